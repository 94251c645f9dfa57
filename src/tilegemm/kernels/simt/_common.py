"""Helpers shared by the Numba CUDA kernels: one compiled kernel per dtype, grid arithmetic, and
the launch every rung's launcher goes through (`configure`), which can record what it launches."""

from __future__ import annotations

import contextlib
import functools
import threading

import numba
import numpy as np

from ... import _cuda  # (decides real GPU vs simulator before numba.cuda loads)
from ...errors import says_out_of_memory
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


_SMS: dict = {}  # device id -> multiprocessor count, asked once


def sm_count() -> int:
    """The current GPU's multiprocessors (the simulator: an H200's 132, so plans match the GPU's)."""
    if not _cuda.has_gpu():
        return 132
    dev = _cuda.cuda.get_current_device()
    if dev.id not in _SMS:
        _SMS[dev.id] = dev.MULTIPROCESSOR_COUNT
    return _SMS[dev.id]


# ---- scratch: a call's temporaries ----------------------------------------------------------------

KEPT_SCRATCH_MAX_BYTES = 512 << 20  # Numba scratch kept between calls, all together
_SCRATCH = threading.local()  # .alloc: where this thread's rungs take scratch from (dispatch's), if anywhere
_KEPT: dict = {}  # (thread, device, stream, shapes, dtype) -> (arrays, bytes), the least recently used first
_KEPT_BYTES = [0]
_KEPT_LOCK = threading.Lock()


@contextlib.contextmanager
def scratch_from(alloc):
    """Within it, rungs on this thread take their scratch from alloc(shape, dtype) -> a Numba
    device array, made afresh for each call. dispatch passes torch's caching allocator for torch
    operands: stream-ordered, safe inside a CUDA graph's capture, and what a launch plan makes
    again (or keeps) for each later call."""
    old = getattr(_SCRATCH, "alloc", None)
    _SCRATCH.alloc = alloc
    try:
        yield
    finally:
        _SCRATCH.alloc = old


def _stream_key(stream) -> int:
    """The driver's handle of `stream` (None: Numba's default stream, legacy or per-thread)."""
    if stream is None:
        if _cuda.SIMULATOR:  # (which makes a new default stream object at every ask)
            return 0
        stream = _cuda.cuda.default_stream()
    try:
        return int(stream)
    except TypeError:  # the simulator's streams have none
        return id(stream)


def _capturing(stream) -> bool:
    """Is `stream` being captured into a CUDA graph (by CuPy, Numba or the driver)?"""
    if _cuda.SIMULATOR:
        return False
    from numba.cuda.cudadrv.driver import binding, driver

    try:
        status = driver.cuStreamIsCapturing(_stream_key(stream))
    except Exception:  # noqa: BLE001  (the legacy stream while another captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
        return True
    return status != binding.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def _nbytes(shapes, dtype) -> int:
    return sum(int(np.prod(s)) for s in shapes) * np.dtype(dtype).itemsize


def scratch(shapes, dtype, stream=None) -> list | None:
    """Device arrays of `shapes` for temporaries that one call's launches write before they read
    them; None where none can be had, and the rung runs a form that needs none.

    From scratch_from's allocator where one is set. Else Numba's, kept for the later calls of the
    same thread, device, stream, shapes and dtype (an allocation costs a call tens of µs of host
    time, and a free can wait for the device): one thread's calls on one stream run in the order
    they are enqueued, so no call writes a kept set while another reads it. Up to
    KEPT_SCRATCH_MAX_BYTES are kept in all, the least recently used set given back first (Numba
    frees it later, once the device is past it). None while the stream is captured into a CUDA
    graph (the graph would hold buffers that the cache may give back), and where the device has
    not the memory."""
    alloc = getattr(_SCRATCH, "alloc", None)
    try:
        if alloc is not None:
            return [alloc(s, dtype) for s in shapes]
        if _capturing(stream):
            return None
        cuda = _cuda.cuda
        size = _nbytes(shapes, dtype)
        if size > KEPT_SCRATCH_MAX_BYTES:  # a product this large does not notice its allocations
            return [cuda.device_array(s, dtype=dtype, stream=stream or 0) for s in shapes]
        key = (threading.get_ident(), getattr(cuda.get_current_device(), "id", 0), _stream_key(stream),
               tuple(map(tuple, shapes)), np.dtype(dtype).name)
        with _KEPT_LOCK:
            kept = _KEPT.pop(key, None)
            if kept is None:
                while _KEPT and _KEPT_BYTES[0] + size > KEPT_SCRATCH_MAX_BYTES:
                    _KEPT_BYTES[0] -= _KEPT.pop(next(iter(_KEPT)))[1]
                kept = ([cuda.device_array(s, dtype=dtype, stream=stream or 0) for s in shapes], size)
                _KEPT_BYTES[0] += size
            _KEPT[key] = kept  # the most recently used, last
        return kept[0]
    except Exception as e:
        if isinstance(e, MemoryError) or says_out_of_memory(e):
            return None
        raise


def forget_scratch() -> None:
    """Give back the kept scratch (tests; a caller short of device memory)."""
    with _KEPT_LOCK:
        _KEPT.clear()
        _KEPT_BYTES[0] = 0
