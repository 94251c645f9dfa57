"""Tensor-core kernels written in Triton (FP16/BF16/TF32/FP8). torch and Triton load on first use.

Rungs: t01_tiled (tl.dot on tiles, grouped order), t02_persistent (one program per SM),
t03_tma_persistent (TMA descriptors, flattened loop option; sm_90), t04_splitk (K split over
programs, FP32 partials reduced in the same launch or by a second kernel; small M),
t05_warp_specialized (Gluon: a producer warp and consumer warpgroups; sm_90, FP16/BF16/FP8/TF32).
`auto_gemm` picks per shape bucket: t03 (t02 below sm_90), t04 where the tuner timed it faster,
or t05 where the tuner timed it faster than t03 (products of at least ¾ of a wave of 128×256 tiles). The rungs
are registered here, without importing torch or Triton (`import tilegemm` stays light: about
two seconds of torch and Triton are paid by the first tensor-core call, not by every import);
a rung's module loads when it first runs. They register for float16 and bfloat16, the dtypes
`matmul(kernel="auto")` may give them; TF32 (not IEEE FP32) and FP8 with scales are reached
through `tilegemm.tensorcore_api.gemm`.
"""

from __future__ import annotations

import importlib
import importlib.util
import time

from ...registry import Kernel, register

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
}
RUNGS = {name: row[0] for name, row in _TABLE.items()}  # name -> module


GLUON = [False, "not loaded"]  # [t05 importable, why not]
_LOADED = False  # set once load() has imported every rung (importing one rung alone does not)


def load() -> bool:
    """Import torch, Triton and the rungs (once); False, with IMPORT_ERROR saying why, if they fail."""
    global AVAILABLE, IMPORT_ERROR, _LOADED
    if AVAILABLE and not _LOADED:
        try:
            from . import t01_tiled, t02_persistent, t03_tma_persistent, t04_splitk  # noqa: F401
            _LOADED = True
        except Exception as e:  # noqa: BLE001  (a broken install: say so where it is used)
            AVAILABLE, IMPORT_ERROR = False, f"{type(e).__name__}: {e}"
        try:  # Gluon (Triton's explicit layer) is newer than Triton 3.2: without it, t05 is not a candidate
            from . import t05_warp_specialized  # noqa: F401
            GLUON[:] = [True, ""]
        except Exception as e:  # noqa: BLE001
            GLUON[:] = [False, f"{type(e).__name__}: {e}"]
    return AVAILABLE


def triton_status(kernel) -> tuple[bool, str]:
    """Can a Triton kernel run here? Needs torch with a CUDA GPU and Triton."""
    if not load():
        return False, IMPORT_ERROR
    import torch

    if not torch.cuda.is_available():
        return False, "needs a CUDA GPU"
    if kernel.requires == "sm_90" and torch.cuda.get_device_capability() < (9, 0):
        return False, "needs a Hopper GPU (sm_90)"
    if "gluon" in kernel.tags and not GLUON[0]:
        return False, f"needs Triton's Gluon ({GLUON[1]})"
    return True, ""


def _from_rung(rung: str, name: str):
    """A function of a rung's module, imported when first called."""
    resolved = []

    def call(*args, **kwargs):
        if not resolved:
            load()
            resolved.append(getattr(rung_module(rung), name))
        return resolved[0](*args, **kwargs)

    call.__name__ = f"{RUNGS[rung]}.{name}"
    return call


def _register_rungs() -> None:
    for name, (module, label, rung, rank, requires, tags) in _TABLE.items():
        register(Kernel(name=name, backend="tensorcore", dtypes=("float16", "bfloat16"),
                        launch=_from_rung(name, "launch"), traffic=_from_rung(name, "traffic"), label=label,
                        rung=rung, module=f"{__name__}.{module}", auto_rank=rank, requires=requires,
                        tags=("triton", "tensorcore") + tags))


if AVAILABLE:  # where torch and Triton are installed (CPU builds included); they load on first use
    _register_rungs()

_AUTO: dict = {}  # plan key -> rung module chosen for it (emptied by _common.reset_cache)


def auto_gemm(p) -> dict:
    """Run problem p on the rung that is fastest for its shape bucket; returns the config used.

    Where split-K can matter (`t04_splitk.applicable`: few tiles of C for the SMs), t02, t03 (where
    TMA can run) and t04 are tuned (each once per bucket, cached) and the one with the lowest tuned
    median runs; with tuning off, t04 runs for M ≤ 64. Everything else runs t03 (t02 below sm_90)."""
    if not _LOADED:
        load()
    t03 = t03_tma_persistent  # noqa: F821  (imported by load())
    key = t03.plan_key(p)
    mod = _AUTO.get(key)
    if mod is None:
        from . import _common as C

        if not any(x is _AUTO for x in C.PLAN_CACHES):
            C.PLAN_CACHES.append(_AUTO)
        mod = _pick(p, C, t02_persistent, t03, t04_splitk)  # noqa: F821
        if len(_AUTO) > 4096:
            _AUTO.clear()
        _AUTO[key] = mod
    return mod.gemm(p, key=key)


def _pick(p, C, t02, t03, t04):
    """Where split-K can matter, every rung that can run is tuned (t02 always, t03 where TMA can
    describe the operands, t04) and the lowest tuned median wins. A rung whose tuning timed
    nothing (every config failed) cannot win."""
    big = t03 if C.capability(p.a.device) >= (9, 0) else t02
    if not t04.applicable(p):
        return _t03_or_t05(p, C, t03) if big is t03 else big
    if not C.autotune_enabled() or p.c.device.type != "cuda":
        return t04 if p.m <= 64 else big
    tuners = []
    if big is t03 and not t03.usable(p):  # usable() is '' when TMA can run, else the reason it cannot
        tuners.append((t03, lambda: _entry(p, C, t03)))
    tuners.append((t02, lambda: _entry(p, C, t02)))
    tuners.append((t04, lambda: t04.tuned_entry(p)))
    won = _fastest(tuners)
    if won is None:
        return big if big is t02 or not t03.usable(p) else t02
    return won


def _entry(p, C, mod):
    """mod's tuning entry for p (tuned now unless cached), over mod.candidates."""
    return C.choose_entry(mod.NAME, p, lambda: mod.candidates(p), mod.default_config(p), mod.run)


def _fastest(tuners):
    """The module whose tuning gave the lowest median (the earlier one on a tie), from (module,
    entry function) pairs; None when none timed anything. Tuning is best effort: a tuner that
    fails leaves the others to compete."""
    timed = []
    for rank, (mod, entry) in enumerate(tuners):
        try:
            ms = entry().get("ms")
        except Exception:  # noqa: BLE001
            continue
        if ms is not None:
            timed.append((ms, rank, mod))
    return min(timed, key=lambda t: (t[0], t[1]))[2] if timed else None


def _t03_or_t05(p, C, t03):
    """For products of at least ¾ of a wave of 128×256 tiles that t05 can run (FP16/BF16/FP8/TF32,
    no alpha or beta, sm_90, Gluon present): both are tuned and their winners re-timed against
    each other, interleaved (C.settle), and the faster runs; t03 otherwise, and with tuning off
    (its configurations are the better-known ones). The verdict is cached with the tuning."""
    if not GLUON[0] or not C.autotune_enabled() or p.c.device.type != "cuda" or t03.usable(p):
        return t03
    t05 = t05_warp_specialized  # noqa: F821  (imported by load())
    if t05.usable(p) or not t05.worth_tuning(p):
        return t03
    return _settled(p, C, (t03, t05)) or t03


def _settled(p, C, rungs):
    """The rung, of `rungs`, whose tuned configuration ran fastest for p when the rungs' winners were
    timed against each other, interleaved (C.settle); None when none tuned. Each rung's own tuning
    ran at a different time, on a GPU whose clocks drift under its power cap, so their tuned
    medians alone would compare the moments as much as the kernels. The verdict is cached only
    when every rung tuned and the re-timing ran, and holds only while the rungs' tuned
    configurations are the ones it compared."""
    key = C.tune_key("+".join(m.NAME for m in rungs), p)
    by_name = {m.NAME: m for m in rungs}
    hit = C.cached_entry(key)
    if hit is not None and hit.get("winner") in by_name:
        now = {m.NAME: (C.cached_entry(C.tune_key(m.NAME, p)) or {}).get("config") for m in rungs}
        if now == hit.get("configs"):
            return by_name[hit["winner"]]
    tuned, why = [], {}
    for mod in rungs:
        try:
            entry = _entry(p, C, mod)
        except Exception as e:  # noqa: BLE001  (tuning is best effort: the others compete)
            why[mod.NAME] = f"{type(e).__name__}: {e}"[:200]
            continue
        if entry.get("ms") is None:
            why[mod.NAME] = "no configuration ran"
        else:
            tuned.append((mod, entry))
    if not tuned:
        return None
    ms = [e["ms"] for _, e in tuned]  # the rungs' own tunings: the fallback
    if len(tuned) > 1:
        trial = C.trial_problem(p)
        try:
            ms = C.settle([lambda m=m, c=e["config"]: m.run(trial, c) for m, e in tuned], budget_ms=30.0,
                          graph=p.flops() < C.GRAPH_FLOPS)
        except Exception as e:  # noqa: BLE001  (keep the tuned medians; cache no verdict)
            why["settle"] = f"{type(e).__name__}: {e}"[:200]
    i = min(range(len(tuned)), key=lambda j: (ms[j], j))
    times = {m.NAME: t for (m, _), t in zip(tuned, ms)}
    C.tuning_log.append(dict(key=key, settled=times, **({"why": why} if why else {})))
    if len(tuned) == len(rungs) and not why:
        C.store_entry(key, dict(winner=tuned[i][0].NAME, ms=times, configs={m.NAME: e["config"] for m, e in tuned},
                                when=time.strftime("%Y-%m-%dT%H:%M:%S")))
    return tuned[i][0]


def rung_module(name: str):
    """The module of a tensor-core kernel by registry name."""
    if name not in RUNGS:
        raise KeyError(f"{name!r} is not a tensor-core kernel; one of {', '.join(RUNGS)}")
    return importlib.import_module(f"{__name__}.{RUNGS[name]}")


# ---- arrays of any kind <-> torch CUDA tensors -------------------------------------------------

_CUDA_SEEN = []  # non-empty once torch has reported a CUDA device in this process


def cuda_available() -> bool:
    """torch.cuda.is_available(), asked until it first says yes (a device does not go away)."""
    if not _CUDA_SEEN:
        import torch

        if torch.cuda.is_available():
            _CUDA_SEEN.append(True)
    return bool(_CUDA_SEEN)


class on_device:
    """`with on_device(d):` makes CUDA device d current (Triton launches there) only when it is not
    already: torch.cuda.device costs microseconds on every call, a comparison does not."""

    __slots__ = ("ctx",)

    def __init__(self, device):
        import torch

        self.ctx = None if device.index is None or device.index == torch.cuda.current_device() \
            else torch.cuda.device(device)

    def __enter__(self):
        if self.ctx is not None:
            self.ctx.__enter__()

    def __exit__(self, *exc):
        return self.ctx.__exit__(*exc) if self.ctx is not None else False



def to_torch_cuda(op):
    """A torch CUDA tensor for an `arrays.Operand`: no copy for CUDA arrays (CUDA array interface),
    one host-to-device copy for NumPy arrays and torch CPU tensors."""
    import numpy as np
    import torch

    x = op.obj
    if op.kind == "torch":
        return x if x.is_cuda else x.cuda()
    if op.kind == "numpy":
        return torch.from_numpy(x if x.flags.writeable and min(x.strides, default=0) >= 0 else x.copy()).cuda()
    if op.kind == "cupy":
        return torch.as_tensor(x, device=f"cuda:{x.device.id}")
    # numba device arrays and other __cuda_array_interface__ objects
    return torch.as_tensor(x, device="cuda")


def to_kind(t, op, out=None):
    """Hand torch CUDA tensor t back as the caller's kind (the kind of operand `op`)."""
    if out is not None:
        return out
    if op.kind == "torch":
        return t if op.obj.is_cuda else t.cpu()
    if op.kind == "numpy":
        return t.cpu().numpy()
    if op.kind == "cupy":
        import cupy

        return cupy.asarray(t)
    from numba import cuda

    return cuda.as_cuda_array(t)


def run_torch(kern, A, B, out, shape, dtype: str):
    """api.matmul's path to a tensor-core kernel: A, B are arrays.Operand, out the caller's array
    (or None); returns the caller's kind. CUDA operands are used in place."""
    import torch

    a, b = to_torch_cuda(A), to_torch_cuda(B)
    tdtype = getattr(torch, dtype)
    with on_device(a.device):
        if out is None:
            c = torch.empty(shape, dtype=tdtype, device=a.device)
            kern.launch(a, b, c, None)
            return to_kind(c, A)
        from ...arrays import describe

        O = describe(out, "out")
        if O.on_host:  # NumPy / torch CPU out: compute on the device, copy back into it
            c = torch.empty(shape, dtype=tdtype, device=a.device)
            kern.launch(a, b, c, None)
            host = c.cpu()
            if O.kind == "numpy":
                out[...] = host.numpy()
            else:
                out.copy_(host)
            return out
        kern.launch(a, b, to_torch_cuda(O), None)  # a view of the caller's memory
        return out
