"""The one list of kernels. The CLI, the API's dispatch, the tests and the benchmarks all read it.

A kernel is registered once, from the table in `tilegemm/kernels/__init__.py` (the Triton rungs:
`tilegemm/kernels/tensorcore/__init__.py`), with its metadata and `lazy` stand-ins for its
launcher, cost model and compiled kernels: its module, and the backend it imports (Numba, Triton),
load when one of them is first called, so `import tilegemm` imports neither. Adding a rung means
adding one file under `tilegemm/kernels/` and one row to that table.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from .errors import UnknownKernel

# Backends, and the array kind each kernel's `launch` receives.
BACKEND_ARRAYS = {
    "simt": "numba",  # Numba CUDA device arrays (real GPU or simulator)
    "tensorcore": "torch",  # torch CUDA tensors (Triton)
    "cpu": "numpy",  # host NumPy arrays
}


def lazy(target: str, *args) -> Callable:
    """A callable standing for `module:attr`, imported on its first call (with args: attr(*args)
    is what it stands for, a factory's product)."""
    module, _, attr = target.partition(":")
    resolved: list = []

    def call(*a, **kw):
        if not resolved:
            obj = getattr(importlib.import_module(module), attr)
            resolved.append(obj(*args) if args else obj)
        return resolved[0](*a, **kw)

    call.__name__ = f"{module}.{attr}"
    call.target = target
    return call


def flops_gemm(m: int, n: int, k: int) -> float:
    """One multiply and one add per (i, j, p): 2·M·N·K."""
    return 2.0 * m * n * k


def bytes_compulsory(m: int, n: int, k: int, itemsize: int, out_itemsize: int | None = None) -> float:
    """The fewest global-memory bytes any kernel can move: read A and B once, write C once."""
    return float((m * k + k * n) * itemsize + m * n * (out_itemsize or itemsize))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Kernel:
    """One registered kernel.

    launch(a, b, c, stream) computes c = a @ b on arrays of the backend's kind (see BACKEND_ARRAYS);
    c is allocated by the caller with the result dtype. `stream` is a backend stream or None.
    traffic(M, N, K, itemsize) is the global-memory bytes the design moves (reads + writes), which
    with flops() gives the kernel's arithmetic intensity; bytes_compulsory() is the floor.
    """

    name: str
    backend: str
    dtypes: tuple[str, ...]
    launch: Callable
    traffic: Callable[[int, int, int, int], float]
    label: str
    rung: int = 0
    module: str = ""
    teaching: bool = False  # shown and benchmarked, never picked by kernel="auto"
    auto_rank: int = 0  # higher wins among kernels that can run; 0 = never auto
    flops: Callable[[int, int, int], float] = flops_gemm
    requires: str = ""  # e.g. "sm_90": extra capability the kernel needs
    jit_kernels: Callable[[np.dtype], list] | None = None  # Numba dispatchers, for SASS/resources
    needs_contiguous: bool = False  # True: launch() needs C-contiguous operands (the API copies others)
    # True: launch(a, b, c, stream, bias=None) also takes b as the transpose of a C-contiguous array (a
    # linear layer's W.t()), read in place, and then adds a bias row where given (the API copies no such b)
    reads_wt: bool = False
    tags: tuple[str, ...] = field(default=())

    @property
    def doc(self) -> str:
        mod = importlib.import_module(self.module) if self.module else None
        return inspect.cleandoc(mod.__doc__ or "") if mod else ""

    @property
    def summary(self) -> str:
        doc = self.doc  # its first paragraph (a title that runs onto a second line is whole)
        return " ".join(doc.split("\n\n")[0].split()) if doc else self.label

    @property
    def arrays(self) -> str:
        return BACKEND_ARRAYS[self.backend]

    def supports(self, dtype) -> bool:
        return np.dtype(dtype).name in self.dtypes if not isinstance(dtype, str) else dtype in self.dtypes

    def intensity(self, m: int, n: int, k: int, itemsize: int) -> float:
        return self.flops(m, n, k) / self.traffic(m, n, k, itemsize)

    def runnable(self) -> tuple[bool, str]:
        """Can it run in this process? (ok, reason when not). Decided once per process."""
        if self.name not in _RUNNABLE:
            _RUNNABLE[self.name] = self._runnable()
        return _RUNNABLE[self.name]

    def _runnable(self) -> tuple[bool, str]:
        from . import _cuda

        if self.backend == "cpu":
            return True, ""
        if self.backend == "simt":
            if _cuda.has_gpu():
                return True, ""
            if _cuda.SIMULATOR:
                return True, "simulator (slow; times are not GPU times)"
            return False, "no CUDA GPU and the simulator is off" + (f": {_cuda.OFF_WHY}" if _cuda.OFF_WHY else "")
        if self.backend == "tensorcore":
            from .kernels.tensorcore import triton_status

            return triton_status(self)
        return False, f"unknown backend {self.backend!r}"


_REGISTRY: dict[str, Kernel] = {}
_RUNNABLE: dict[str, tuple[bool, str]] = {}
_SORTED: list[Kernel] = []


def register(kernel: Kernel) -> Kernel:
    _SORTED.clear()
    if kernel.name in _REGISTRY:
        raise ValueError(f"kernel {kernel.name!r} registered twice")
    if kernel.backend not in BACKEND_ARRAYS:
        raise ValueError(f"kernel {kernel.name!r}: unknown backend {kernel.backend!r}")
    _REGISTRY[kernel.name] = kernel
    return kernel


def _load() -> None:
    # By module path: the package attribute `tilegemm.kernels` is the listing function.
    importlib.import_module(f"{__package__}.kernels")


def all_kernels() -> list[Kernel]:
    if not _SORTED:
        _load()
        order = {"cpu": 0, "simt": 1, "tensorcore": 2}
        _SORTED[:] = sorted(_REGISTRY.values(), key=lambda k: (order[k.backend], k.rung, k.name))
    return list(_SORTED)


def get(name: str) -> Kernel:
    known = isinstance(name, str)  # (a list is no key: TypeError, where the caller is told the names)
    if known and name in _REGISTRY:
        return _REGISTRY[name]
    _load()
    if known and name in _REGISTRY:
        return _REGISTRY[name]
    names = ", ".join(k.name for k in all_kernels())
    raise UnknownKernel(f"no kernel named {name!r}; registered: {names}")


def select(names: Iterable[str] | None = None, *, backend: str | None = None) -> list[Kernel]:
    ks = [get(n) for n in names] if names else all_kernels()
    return [k for k in ks if backend is None or k.backend == backend]
