"""Helpers shared by the Numba CUDA kernels: one compiled kernel per dtype, grid arithmetic, and
the launch every rung's launcher goes through (`configure`), which can record what it launches."""

from __future__ import annotations

import contextlib
import functools
import threading

import numba
import numpy as np

from ... import _cuda  # noqa: F401  (decides real GPU vs simulator before numba.cuda loads)
from ...registry import ceil_div

SIMT_DTYPES = ("float32", "float64")


def per_dtype(factory):
    """Wrap `factory(DT) -> cuda.jit kernel` so each dtype builds (and later compiles) once.

    Shared and local arrays need their element type at compile time, so the dtype is baked
    into the kernel as a closure constant rather than read from the arguments.
    """

    @functools.lru_cache(maxsize=None)
    def build(dtype_name: str):
        return factory(numba.from_dtype(np.dtype(dtype_name)))

    def get(dtype) -> object:
        return build(np.dtype(dtype).name)

    get.factory = factory
    return get


def per_config(make_kernel, default):
    """`kernel_for(dtype, cfg=default)` for a rung whose kernel is built per configuration and
    dtype (`make_kernel(cfg, DT)`): each pair builds (and later compiles) once."""

    @functools.lru_cache(maxsize=None)
    def build(cfg, dtype_name: str):
        return make_kernel(cfg, numba.from_dtype(np.dtype(dtype_name)))

    def kernel_for(dtype, cfg=default):
        return build(cfg, np.dtype(dtype).name)

    return kernel_for


def grid_2d(m: int, n: int, rows_per_block: int, cols_per_block: int) -> tuple[int, int]:
    """Blocks over C: x runs along columns (N), y along rows (M)."""
    return ceil_div(n, cols_per_block), ceil_div(m, rows_per_block)


_RECORDING = threading.local()  # .launches: the list being recorded on this thread, if any


def _record(compiled, cfg) -> None:
    """numba-cuda's pre-launch callback: the launch, appended to this thread's recording, if any."""
    record = getattr(_RECORDING, "launches", None)
    if record is not None:
        record.append((compiled, cfg.griddim, cfg.blockdim, cfg.sharedmem, list(cfg.args)))


def configure(kernel, grid, block, stream=None):
    """kernel[grid, block(, stream)]: the stream only when one is given. Inside `recording()`, the
    launch is also recorded, as it happens: (compiled kernel, grid, block, shared memory, args).
    numba-cuda caches a launch configuration per (grid, block, stream), so the callback is added
    once per configuration, and records only on a thread that is recording."""
    launch = kernel[grid, block] if stream is None else kernel[grid, block, stream]
    callbacks = getattr(launch, "pre_launch_callbacks", None)  # (the simulator's have none: plans are GPU-only)
    if getattr(_RECORDING, "launches", None) is not None and callbacks is not None and _record not in callbacks:
        callbacks.append(_record)
    return launch


@contextlib.contextmanager
def recording():
    """Record every launch made through `configure` on this thread (a launch plan replays them:
    tilegemm.dispatch)."""
    launches: list = []
    _RECORDING.launches = launches
    try:
        yield launches
    finally:
        _RECORDING.launches = None
