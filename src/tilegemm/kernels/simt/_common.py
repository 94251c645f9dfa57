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


# ---- scratch: a launch sequence's temporaries ----------------------------------------------------

KEEP_SCRATCH_BYTES = 512 << 20  # Numba scratch kept between calls, over every device, stream and shape
_SCRATCH = threading.local()  # .alloc: where this thread's rungs take scratch from (dispatch's), if anywhere
_KEPT: dict = {}  # (device, stream, shapes, dtype) -> the arrays kept for calls of that key
_KEPT_BYTES = [0]
_KEPT_LOCK = threading.Lock()


@contextlib.contextmanager
def scratch_from(alloc):
    """Within it, rungs on this thread take their scratch from alloc(shape, dtype) -> a Numba
    device array, made afresh for each call. dispatch passes torch's caching allocator for torch
    operands: stream-ordered, safe inside a CUDA graph's capture, and what a launch plan
    allocates again (or keeps) for each later call."""
    old = getattr(_SCRATCH, "alloc", None)
    _SCRATCH.alloc = alloc
    try:
        yield
    finally:
        _SCRATCH.alloc = old


def _stream_key(stream) -> int:
    if stream is None:
        return 0
    try:
        return int(stream)  # the driver's handle
    except TypeError:  # the simulator's streams have none
        return id(stream)


def _nbytes(shapes, dtype) -> int:
    return sum(int(np.prod(s)) for s in shapes) * np.dtype(dtype).itemsize


@contextlib.contextmanager
def scratch(shapes, dtype, stream=None):
    """Device arrays of `shapes`, for temporaries a launch sequence writes before it reads them;
    enqueue the sequence inside the block. From scratch_from's allocator where one is set; else
    Numba's, kept between calls per device, stream, shapes and dtype (an allocation costs a call
    tens of µs of host time, and a free can wait for the device), up to KEEP_SCRATCH_BYTES in
    all, and held under a lock while the sequence is enqueued: the calls that share them are on
    one stream, so their sequences run one after another, never interleaved."""
    alloc = getattr(_SCRATCH, "alloc", None)
    if alloc is not None:
        yield [alloc(s, dtype) for s in shapes]
        return
    cuda = _cuda.cuda
    size = _nbytes(shapes, dtype)
    if size > KEEP_SCRATCH_BYTES:  # a product this large does not notice its allocations
        yield [cuda.device_array(s, dtype=dtype, stream=stream or 0) for s in shapes]
        return
    key = (getattr(cuda.get_current_device(), "id", 0), _stream_key(stream), tuple(map(tuple, shapes)),
           np.dtype(dtype).name)
    with _KEPT_LOCK:
        bufs = _KEPT.get(key)
        if bufs is None:
            if _KEPT_BYTES[0] + size > KEEP_SCRATCH_BYTES:
                _KEPT.clear()  # Numba frees them later, and a free waits for the work queued before it
                _KEPT_BYTES[0] = 0
            bufs = _KEPT[key] = [cuda.device_array(s, dtype=dtype, stream=stream or 0) for s in shapes]
            _KEPT_BYTES[0] += size
        yield bufs


def forget_scratch() -> None:
    """Drop the kept scratch (tests; a caller short of device memory)."""
    with _KEPT_LOCK:
        _KEPT.clear()
        _KEPT_BYTES[0] = 0
