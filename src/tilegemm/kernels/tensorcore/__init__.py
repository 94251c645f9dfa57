"""Tensor-core kernels written in Triton (FP16/BF16/TF32/FP8). torch and Triton load on first use.

Rungs: t01_tiled (tl.dot on tiles, grouped order), t02_persistent (one program per SM),
t03_tma_persistent (TMA descriptors, flattened loop option; sm_90), t04_splitk (K split over
programs, FP32 partials reduced in the same launch or by a second kernel; small M),
t05_warp_specialized (Gluon: a producer warp and consumer warpgroups; sm_90, FP16/BF16/FP8/TF32),
t06_gemv (decode, M ≤ 4: B straight into registers, FMA, no tensor cores; taken where a tuning on
the GPU found it fastest, the shipped database's or the user's, never by the untuned heuristic).

A problem with an operand spanning past 2^31 elements compiles its pointer arithmetic 64-bit
(the WIDE constant, from `Problem.too_large`); every other problem keeps 32-bit offsets.

Each rung module holds its kernels and says what it launches for a problem and a configuration
(`launches(p, cfg)`: a list of `_problem.KernelCall`); which rung and configuration run a problem
is `tilegemm.tuning`'s choice, and `tilegemm.dispatch` launches them. The rungs are registered
here without importing torch or Triton (`import tilegemm` stays light); a rung's module loads when
it first runs. They register for float16 and bfloat16, the dtypes `matmul(kernel="auto")` may
give them; TF32 (not IEEE FP32) and FP8 with scales are reached through `tilegemm.gemm`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os

from ...registry import Kernel, lazy, register

AVAILABLE = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
IMPORT_ERROR = "" if AVAILABLE else "needs triton and torch (pip install 'tilegemm[gpu]')"
# name: (module, label, rung, auto rank, requires, extra tags): the one list of rungs
_TABLE = {
    "tc_tiled": ("t01_tiled", "Triton tiled tl.dot", 1, 10, "", ()),
    "tc_persistent": ("t02_persistent", "Triton persistent", 2, 20, "", ()),
    "tc_tma_persistent": ("t03_tma_persistent", "Triton TMA persistent", 3, 30, "sm_90", ("tma",)),
    "tc_splitk": ("t04_splitk", "Triton split-K (small M)", 4, 5, "", ()),
    "tc_warp_specialized": ("t05_warp_specialized", "Gluon warp-specialised (producer warp)", 5, 3, "sm_90",
                            ("tma", "gluon")),
    "tc_gemv": ("t06_gemv", "Triton GEMV form (M ≤ 4, B in registers, FMA)", 6, 0, "", ()),
}
RUNGS = {name: row[0] for name, row in _TABLE.items()}  # name -> module

_GLUON = [None, "not loaded"]  # [t05 importable (None: not tried yet), why not]


def load() -> bool:
    """Import torch and Triton (once); False, with IMPORT_ERROR saying why, if they fail."""
    global AVAILABLE, IMPORT_ERROR
    if AVAILABLE:
        try:
            from . import _problem  # noqa: F401  (torch; and Triton's interpreter shim where it runs)
            import triton  # noqa: F401
        except Exception as e:  # noqa: BLE001  (a broken install: say so where it is used)
            AVAILABLE, IMPORT_ERROR = False, f"{type(e).__name__}: {e}"
    return AVAILABLE


def gluon_ready() -> bool:
    """Can t05 (Gluon, Triton's explicit layer, newer than Triton 3.2) be imported here?"""
    if _GLUON[0] is None:
        try:
            rung_module("tc_warp_specialized")
            _GLUON[:] = [True, ""]
        except Exception as e:  # noqa: BLE001
            _GLUON[:] = [False, f"{type(e).__name__}: {e}"]
    return bool(_GLUON[0])


def triton_status(kernel) -> tuple[bool, str]:
    """Can a Triton kernel run here? Needs torch with a CUDA GPU and Triton."""
    if not load():
        return False, IMPORT_ERROR
    import torch

    if not torch.cuda.is_available():  # (matmul's kernels: tilegemm.gemm(kernel=...) runs the rungs on the CPU under
        # Triton's interpreter, which the listing says where it is on)
        interpreter = os.environ.get("TRITON_INTERPRET") == "1"
        return False, "needs a CUDA GPU" + ("; tilegemm.gemm(kernel=...) runs it here, FP16 and FP32, under "
                                            "TRITON_INTERPRET=1" if interpreter else "")
    if kernel.requires == "sm_90" and torch.cuda.get_device_capability() < (9, 0):
        return False, "needs a Hopper GPU (sm_90)"
    if "gluon" in kernel.tags and not gluon_ready():
        return False, f"needs Triton's Gluon ({_GLUON[1]})"
    return True, ""


def rung_module(name: str):
    """The module of a tensor-core kernel by registry name."""
    if name not in RUNGS:
        raise KeyError(f"{name!r} is not a tensor-core kernel; one of {', '.join(RUNGS)}")
    return importlib.import_module(f"{__name__}.{RUNGS[name]}")


def launch_calls(calls) -> list:
    """Launch a rung's KernelCalls through Triton (its JIT and launcher), in order, on torch's
    current stream; returns the compiled kernels (None each under the interpreter)."""
    return [call.fn[call.grid](*call.args, **call.options) for call in calls]


def _register_rungs() -> None:
    for name, (module, label, rung, rank, requires, tags) in _TABLE.items():
        register(Kernel(name=name, backend="tensorcore", dtypes=("float16", "bfloat16"),
                        launch=lazy("tilegemm.dispatch:rung_launcher", name),
                        traffic=lazy(f"{__name__}.{module}:traffic"), label=label, rung=rung,
                        module=f"{__name__}.{module}", auto_rank=rank, requires=requires,
                        tags=("triton", "tensorcore") + tags))


if AVAILABLE:  # where torch and Triton are installed (CPU builds included); they load on first use
    _register_rungs()
