"""Rows of A over the GPUs of one host: `tilegemm.matmul(a, b, devices="all" | [ids])`.

    c = tilegemm.matmul(a, b, devices="all")       # a, b torch CUDA tensors on cuda:0: C there too
    c = tilegemm.matmul(a16, b16, devices=[0, 1])  # NumPy in, NumPy out, staged through pinned memory

A's rows are cut into one block per GPU (the remainder included); each GPU multiplies its rows by
all of B with what `auto` picks there, and C's rows come back to the caller. Each GPU has three
streams of its own (copies in, products, copies out) and a persistent worker thread.

Where the operands live on one GPU (the home: A's device; C is returned there):
- the home multiplies its rows in one product, in place, with nothing copied;
- every other GPU g receives its rows of A and B's column panels over NVLink by the copy engines
  (cuMemcpy2DAsync: a column panel is a strided 2-D copy, so no kernel packs it on the home,
  whose SMs stay with its own product), multiplies panel j while panel j + 1 travels, and sends
  C's panel j back while panel j + 1 is multiplied. Its first panel is multiplied in row chunks
  of A, so g starts after one chunk of A and one panel of B have arrived, not all of its A.
- B leaves the home once: the first other GPU pulls it from the home, and each GPU after it
  pulls B's panels from the one before (a chain; the first panel in pieces, each handed on as it
  lands), so the home's links carry B once and the others' rows of A, not B once a GPU.
- the calling thread queues every GPU's work itself, a step of each GPU in turn (`_round_robin`):
  the work is asynchronous, and one thread queues it faster than one worker thread a GPU taking
  turns at the GIL (docs/perf-notes.md, 70).
- g's share of rows is cut so that it ends with the home (`split`, `lags`): it pays the copies
  before its first product (a chunk of A and B's first panel; at more GPUs, the wait for its rows
  of A, which leave the home's links with every other GPU's) and the copy of its last panel of C
  after, so it takes fewer rows than the home.

Host operands (NumPy, torch CPU): every GPU's worker thread receives its rows of A and B's panels
through its own ring of pinned staging buffers, in chunks (the host fills one while the copy
engine drains another), and C's panels go back the same way into the caller's array.

Traffic for G GPUs of which one is the home (s bytes an element): each other GPU receives
(M/G·K + K·N)·s and sends M/G·N·s (and, but the last of the chain, K·N·s to the next); the home
sends K·N·s + (G − 1)·M/G·K·s and copies nothing itself. The products stay compute-bound: panel
j's product is M/G × w × K, intensity 2·(M/G)·w·K / ((M/G·K + K·w + M/G·w)·s).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import itertools
import queue
import threading

import numpy as np

from . import arrays
from ._cuda import driver_entry
from .errors import DeviceError, OutOfDeviceMemory

PANELS = 8  # B's column panels per GPU (fewer where a panel would be narrower than MIN_PANEL)
MIN_PANEL = 1024
FIRST_CHUNKS = 4  # the first panel's product in this many row chunks of A
ROW_ALIGN = 128  # a GPU's rows start at multiples of this (the kernels' row tiles)
STAGE_BYTES = 64 * 2**20  # one pinned staging buffer
STAGES = 3  # staging buffers per GPU


# --- the copy engines: a strided 2-D copy between any two addresses (device, peer or pinned host) --

class _Memcpy2D(ctypes.Structure):
    _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcMemoryType", ctypes.c_int),
                ("srcHost", ctypes.c_void_p), ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p),
                ("srcPitch", ctypes.c_size_t),
                ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t), ("dstMemoryType", ctypes.c_int),
                ("dstHost", ctypes.c_void_p), ("dstDevice", ctypes.c_uint64), ("dstArray", ctypes.c_void_p),
                ("dstPitch", ctypes.c_size_t),
                ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t)]


_UNIFIED = 4  # CU_MEMORYTYPE_UNIFIED: an address in the unified space, on any device or pinned host


def copy_flat(dst, src, stream) -> None:
    """dst[...] = src for contiguous torch tensors of one size and dtype, on any devices (a peer
    copy over NVLink, or a peer's memory mapped here) by the copy engines on `stream`: one linear
    cuMemcpyAsync, no rows to walk."""
    if dst.numel() != src.numel() or dst.dtype != src.dtype or not (dst.is_contiguous() and src.is_contiguous()):
        raise ValueError(f"copy_flat: {tuple(src.shape)} → {tuple(dst.shape)}: both contiguous, one size and dtype")
    nbytes = dst.numel() * dst.element_size()
    err = nbytes and _memcpy(dst.data_ptr(), src.data_ptr(), nbytes, stream.cuda_stream)
    if err:  # (the message made only here)
        raise DeviceError(f"a copy of {nbytes} bytes from {src.device} to {dst.device} failed (CUDA driver error {err})")


def copy_bytes(dst: int, src: int, nbytes: int, stream: int) -> None:
    """nbytes from address src to address dst (device, a peer's memory mapped here, or pinned
    host) by the copy engines on the CUDA stream whose handle is `stream`: one cuMemcpyAsync.
    For callers that worked their addresses out once (the peer loops' pieces)."""
    err = nbytes and _memcpy(dst, src, nbytes, stream)
    if err:
        raise DeviceError(f"a copy of {nbytes} bytes from address {src:#x} to {dst:#x} failed (CUDA driver error {err})")


def _memcpy(dst: int, src: int, nbytes: int, stream: int) -> int:
    """cuMemcpyAsync on the stream handle `stream`: the driver's error code (0: queued)."""
    fn = driver_entry("cuMemcpyAsync", ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p)
    return fn(dst, src, nbytes, ctypes.c_void_p(stream))


def copy_2d(dst, src, stream) -> None:
    """dst[...] = src for 2-D torch tensors of one shape and dtype whose rows are each contiguous,
    on any devices (peer copies over NVLink) or pinned host memory, by the copy engines on
    `stream` (a torch stream; the thread's current device must be the stream's)."""
    p = params_2d(dst, src)
    err = p is not None and _memcpy_2d(p, stream.cuda_stream)
    if err:  # (the message made only here: a copy's host time is a few µs)
        raise DeviceError(f"matmul(devices=...): a {dst.shape[0]}×{dst.shape[1]} copy from {src.device} to {dst.device} "
                          f"failed (CUDA driver error {err})")


def params_2d(dst, src) -> _Memcpy2D | None:
    """copy_2d's copy as the driver's parameters (None: nothing to copy), for callers that make
    them once and copy many times (copy_planned); the views' memory must outlive them."""
    rows, cols = dst.shape
    if rows == 0 or cols == 0:
        return None
    if tuple(src.shape) != (rows, cols) or src.dtype != dst.dtype or cols > 1 and (dst.stride(1) != 1 or src.stride(1) != 1) \
            or rows > 1 and (dst.stride(0) < cols or src.stride(0) < cols):
        raise ValueError(f"copy_2d: {tuple(src.shape)} → {tuple(dst.shape)}: rows not contiguous or overlapping")
    s = dst.element_size()
    return _Memcpy2D(srcMemoryType=_UNIFIED, srcDevice=src.data_ptr(), srcPitch=max(src.stride(0), cols) * s,
                     dstMemoryType=_UNIFIED, dstDevice=dst.data_ptr(), dstPitch=max(dst.stride(0), cols) * s,
                     WidthInBytes=cols * s, Height=rows)


def copy_planned(p: _Memcpy2D, stream: int) -> None:
    """The 2-D copy p (params_2d) on the CUDA stream whose handle is `stream`."""
    err = _memcpy_2d(p, stream)
    if err:
        raise DeviceError(f"a {p.Height}×{p.WidthInBytes}-byte copy from address {p.srcDevice:#x} to "
                          f"{p.dstDevice:#x} failed (CUDA driver error {err})")


def _memcpy_2d(p: _Memcpy2D, stream: int) -> int:
    """cuMemcpy2DAsync of p on the stream handle `stream`: the driver's error code (0: queued)."""
    fn = driver_entry("cuMemcpy2DAsync_v2", ctypes.POINTER(_Memcpy2D), ctypes.c_void_p)
    return fn(ctypes.byref(p), ctypes.c_void_p(stream))


# --- persistent workers ----------------------------------------------------------------------

class Worker:
    """One GPU's thread and streams, alive for the process. A call's work for this GPU is queued
    here; consecutive calls' work on this GPU runs in order (each job's streams wait for the last
    job's end)."""

    def __init__(self, index: int):
        import torch

        self.index = index
        with torch.cuda.device(index):
            self.copy_in, self.compute, self.copy_out = (torch.cuda.Stream(index) for _ in range(3))
            self.last = None  # the event that ended the last job
        self.staging: list = []  # pinned buffers and the events of their last copies
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.pending = 0  # jobs submitted and not yet ended
        threading.Thread(target=self._loop, name=f"tilegemm-gpu{index}", daemon=True).start()

    def _loop(self) -> None:
        import torch

        torch.cuda.set_device(self.index)
        torch.cuda.set_stream(self.compute)  # what the local products launch on and allocate for
        while True:
            fn, fut = self.jobs.get()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(self))
                except BaseException as e:  # noqa: BLE001  (handed to the caller's thread)
                    try:  # what the job queued before it failed still runs: the caller waits for it
                        e.tilegemm_end = self.end()
                    except BaseException:  # noqa: BLE001  (the device itself failed)
                        e.tilegemm_end = None
                    fut.set_exception(e)
            with _WORKERS_LOCK:
                self.pending -= 1

    def submit(self, fn) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with _WORKERS_LOCK:
            self.pending += 1
        self.jobs.put((fn, fut))
        return fut

    def idle(self) -> None:
        """Return once every job submitted so far has ended (its work queued on the streams), so
        that another thread may queue work on this GPU's streams (under _SUBMIT: none is
        submitted meanwhile)."""
        if self.pending:
            self.submit(lambda w: None).result()

    def begin(self, after) -> None:
        """Every stream of this GPU waits for `after` (an event on the caller's stream) and for
        the last job."""
        for s in (self.copy_in, self.compute, self.copy_out):
            for e in (after, self.last):
                if e is not None:
                    s.wait_event(e)

    def end(self):
        """An event after everything this job queued on this GPU."""
        import torch

        for s in (self.copy_in, self.compute):
            self.copy_out.wait_stream(s)
        self.last = torch.cuda.Event()
        self.last.record(self.copy_out)
        return self.last


_WORKERS: dict[int, Worker] = {}
_WORKERS_LOCK = threading.Lock()


def worker(index: int) -> Worker:
    with _WORKERS_LOCK:
        if index not in _WORKERS:
            _WORKERS[index] = Worker(index)
        return _WORKERS[index]


# --- the plan: which rows each GPU takes, and B's panels -------------------------------------

def device_ids(devices) -> list[int]:
    """devices="all" or a list of GPU ids (ints, "cuda:N" or torch.device) → distinct ids. The
    form of the list is checked before the GPUs are looked for (a mistake in it reads the same on
    any machine), the ids against the GPUs there after."""
    from . import _cuda

    named = None if isinstance(devices, str) and devices == "all" else _parse_ids(devices)  # [(as given, id)]
    ids = None if named is None else [i for _, i in named]
    if not _cuda.has_gpu():
        raise DeviceError("matmul: devices= splits the product over CUDA GPUs, and this machine has none")
    import torch

    count = torch.cuda.device_count()
    if ids is None:
        return list(range(count))
    for d, i in named:  # (devices itself may have been an iterator, read once)
        if not 0 <= i < count:
            raise DeviceError(f"matmul: devices has {d!r}; this host's GPUs are 0 to {count - 1}")
    return ids


def _parse_ids(devices) -> list[tuple]:
    if isinstance(devices, (str, int)) or not hasattr(devices, "__iter__"):
        raise DeviceError(f"matmul: devices={devices!r}; give \"all\" or a list of GPU ids such as [0, 1]")
    ids = []
    for d in devices:
        if isinstance(d, int) and not isinstance(d, bool):
            i = d
        elif isinstance(d, str):
            import torch

            try:
                dev = torch.device(d)
            except RuntimeError:
                dev = None
            i = dev.index if dev is not None and dev.type == "cuda" else None
        else:
            i = getattr(d, "index", None) if getattr(d, "type", None) == "cuda" else None
        if not isinstance(i, int) or i < 0:
            raise DeviceError(f"matmul: devices has {d!r}; give GPU ids such as 0 or \"cuda:1\"")
        if any(i == j for _, j in ids):
            raise DeviceError(f"matmul: devices names GPU {i} twice")
        ids.append((d, i))
    if not ids:
        raise DeviceError("matmul: devices= is empty")
    return ids


def panels(n: int) -> list[tuple[int, int]]:
    """B's column panels: PANELS of them, none narrower than MIN_PANEL, widths multiples of 256."""
    count = max(1, min(PANELS, n // MIN_PANEL))
    w = -(-n // count)
    w = -(-w // 256) * 256 if count > 1 else n
    return [(j, min(n, j + w)) for j in range(0, n, w)]


def split(m: int, n: int, k: int, gpus: int, itemsize: int, home: bool, tflops: float, link_gbps: float) -> list[int]:
    """Row offsets (gpus + 1 of them) of each GPU's block of A. With a home (the first GPU, whose
    operands are local), each other GPU takes fewer rows by what its copies cost before and after
    its products (`lags`), a row costing 2·N·K flops at `tflops`, so that all end together (at
    small sizes the copies outweigh the products and the home takes every row); the other
    blocks' sizes are multiples of ROW_ALIGN."""
    even = [m * g // gpus for g in range(gpus + 1)]
    if not home or gpus == 1 or m < gpus * ROW_ALIGN:
        return even
    row_s = 2 * n * k / (tflops * 1e12)
    if not row_s > 0:  # no rate known for the shape: the copies cannot be weighed against the products
        return even
    lag = lags(m, n, k, gpus, itemsize, row_s, link_gbps)
    # the home's T = m_home·row_s, and each other GPU's T = lag_h + r_h·row_s
    t = (m * row_s + sum(lag)) / gpus
    cap = m // gpus // ROW_ALIGN * ROW_ALIGN  # the home never takes fewer rows than the others
    rs = [min(cap, int(round(max(0.0, t - x) / row_s / ROW_ALIGN)) * ROW_ALIGN) for x in lag]
    home_rows = m - sum(rs)
    return list(itertools.accumulate([0, home_rows] + rs))


def lags(m: int, n: int, k: int, gpus: int, itemsize: int, row_s: float, link_gbps: float) -> list[float]:
    """Seconds each other GPU (in chain order) spends beyond its products' time, at about m/gpus
    rows each: before its first product, a row chunk of A and B's first panel; while its first
    panel's products run, the rest of its rows of A, which leave the home's links with every
    other GPU's (all of the others' rows of A, and B's first panel once, before the last chunk
    lands; FIRST_CHUNKS − 1 chunks' products hide the wait); after its last product, C's last
    panel; and along the chain, a piece of B's first panel a hop."""
    cuts = panels(n)
    w0, wl = cuts[0][1] - cuts[0][0], cuts[-1][1] - cuts[-1][0]
    rows, others, bps = m / gpus, gpus - 1, link_gbps * 1e9
    start = (rows / FIRST_CHUNKS * k + k * w0) * itemsize / bps
    all_a = (others * rows * k + k * w0) * itemsize / bps - (FIRST_CHUNKS - 1) * rows / FIRST_CHUNKS * row_s * w0 / n
    back = rows * wl * itemsize / bps
    hop = (k / FIRST_CHUNKS * w0 * itemsize / bps) if others > 1 else 0.0
    return [max(start, all_a) + back + h * hop for h in range(others)]


# FP32 runs the SIMT kernels, at this share of the tensor cores' BF16 rate (H200, 8192³:
# 36.9 TFLOP/s against about 700; results/h200/library.json); FP64 at half FP32's (the CUDA cores'
# FP64 peak is half their FP32 peak)
SIMT_SHARE = {4: 0.05, 8: 0.025}


def _rate(m: int, n: int, k: int, gpus: int, itemsize: int) -> tuple[float, float]:
    """(TFLOP/s of one GPU's rows, the link's GB/s): the cost model's shipped BF16 rates by size,
    scaled for the SIMT path where the elements are 4 or 8 bytes."""
    from .distributed import costmodel

    hw = costmodel.shipped(gpus)
    return hw.tflops(m / gpus, n, k) * SIMT_SHARE.get(itemsize, 1.0), hw.link_gbps


# --- the call ----------------------------------------------------------------------------------

def matmul(A, B, mnk: tuple[int, int, int], ids: list[int], kernel: str, out, local):
    """A @ B (operands described and checked by api.matmul, `out` too) with A's rows over the GPUs
    `ids` (device_ids); `local` is tilegemm.matmul (each GPU's product)."""
    import torch

    m, n, k = mnk
    host = A.on_host
    ta = _torch_view(A)
    tb = _torch_view(B)
    if out is not None:
        copied = A.kind == "numpy" and not arrays.torch_views(out)
        if copied:  # torch cannot view it: C goes through a copy
            tc = torch.from_numpy(arrays.host_empty((m, n), A.dtype))
        else:
            tc = _torch_view(arrays.describe(out, "out"))
    elif host:
        arrays.check_host_memory((m, n), A.dtype)
        c_np = arrays.host_empty((m, n), A.dtype) if A.kind == "numpy" else None
        tc = torch.from_numpy(c_np) if c_np is not None else torch.empty((m, n), dtype=ta.dtype)
    else:
        tc = torch.empty((m, n), dtype=ta.dtype, device=ta.device)
    if min(m, n) > 0:
        if k == 0:
            tc.zero_()
        elif host:
            _run(ta, tb, tc, ids, kernel, local, host)
        else:  # the copy engines move rows: operands whose rows are not contiguous are made so, once
            row = lambda x: x if (x.stride(1) == 1 or x.shape[1] == 1) and (x.shape[0] == 1 or x.stride(0) >= x.shape[1]) \
                else x.contiguous()  # noqa: E731  (rows contiguous, none overlapping: a broadcast is made whole)
            work = row(tc)
            _run(row(ta), row(tb), work, ids, kernel, local, host)
            if work is not tc:
                tc.copy_(work)
    if out is not None:
        if copied:
            np.copyto(out, tc.numpy())
        return out
    if host:
        return c_np if A.kind == "numpy" else tc
    return arrays.to_kind(tc, A) if A.kind != "torch" else tc


def _torch_view(op):
    """The operand as a torch tensor, no copy: NumPy through torch.from_numpy (a copy only where
    torch cannot view it: the other byte order, negative strides or strides of part of an element),
    CUDA arrays through their interface."""
    import warnings

    import numpy as np
    import torch

    if op.kind == "torch":
        return op.obj.detach()  # the workers' threads have their own grad mode; no gradient is recorded here
    if op.kind == "numpy":
        x = op.obj if arrays.torch_views(op.obj) else np.ascontiguousarray(arrays.host_view(op))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a read-only array: we only read it
            return torch.from_numpy(x)
    return arrays.to_torch_cuda(op)


def _run(ta, tb, tc, ids: list[int], kernel: str, local, host: bool) -> None:
    import torch

    m, k = ta.shape
    n = tb.shape[1]
    home = None if host else ta.device.index
    start = None
    if home is not None:
        with torch.cuda.device(home):
            start = torch.cuda.Event()
            start.record(torch.cuda.current_stream(home))
    blocks = [(g, r0, r1) for g, r0, r1 in describe_split(m, n, k, tuple(ids), ta.element_size(), home) if r1 > r0]
    if host:
        _run_host(ta, tb, tc, blocks, kernel, local)
        return
    remotes = [g for g, _, _ in blocks if g != home]
    # B leaves the home once, to the first other GPU, and goes down the chain of the others
    links = {g: _Link(s) for s, g in zip(remotes, remotes[1:])}
    after = dict(zip(remotes, remotes[1:]))
    # peer access before any step: its first copies run on the current streams, which a step leaves
    # on a worker's queued products
    for s, g in [(home, g) for g in remotes] + list(after.items()):
        _peer(s, g)
    with _SUBMIT:  # no worker takes a job while this thread queues work on its streams
        for g, _, _ in blocks:
            worker(g).idle()
        steps = [(worker(g), _local_steps(worker(g), ta, tb, tc, r0, r1, start, kernel, local) if g == home else
                  _remote_steps(worker(g), ta, tb, tc, r0, r1, start, kernel, local, False, links.get(g),
                                links.get(after.get(g)), bool(links)))
                 for g, r0, r1 in blocks]
        ends = _round_robin(steps)
    caller = torch.cuda.current_stream(home)
    for e in ends:
        caller.wait_event(e)


def _round_robin(steps: list) -> list:
    """Run every GPU's steps (generators) in this thread, one step of each in turn, each on its
    GPU and product stream: the host's work for all GPUs is interleaved, so each starts after a
    share of it, not after the others' whole calls. (Worker threads, one a GPU, spent 7-8 ms each
    of a 16384^3 call's host time taking turns at the GIL; from this thread the same work takes
    4.1-4.7 ms for all three: docs/perf-notes.md, 70.) Each step sets its GPU and stream directly,
    and the caller's device and every GPU's current stream are put back once, at the end: torch's
    device and stream context managers, entered at every step, took a third of a call's host time
    on 2 H200s (docs/perf-notes.md, 76). Returns each GPU's end event; on an error, waits for all
    that was queued (no copy may outlive the call's buffers), then raises it."""
    import torch

    ends, live = [None] * len(steps), list(range(len(steps)))
    theirs = [torch.cuda.current_stream(w.index) for w, _ in steps]
    # the caller's device comes back as torch's device context puts it back: without making a
    # context on a device that has none (a thread that used only the GPUs it names)
    with torch.cuda.device(torch.cuda.current_device()):
        try:
            while live:
                for i in list(live):
                    w, gen = steps[i]
                    torch.cuda.set_device(w.index)
                    torch.cuda.set_stream(w.compute)
                    try:
                        next(gen)
                    except StopIteration as stop:
                        ends[i] = stop.value
                        live.remove(i)
        except BaseException:
            for w, gen in steps:
                gen.close()
                try:
                    w.end().synchronize()
                except Exception:  # noqa: BLE001  (the device itself failed: the first error is raised)
                    pass
            raise
        finally:
            for s in theirs:
                torch.cuda.set_stream(s)  # (which makes its device current: the context ends last)
    return ends


def _run_host(ta, tb, tc, blocks, kernel, local) -> None:
    """Host operands: each GPU's steps in its own worker thread, which blocks on its staging
    buffers' copies while the others go on; C is the caller's memory, so every GPU is waited for."""
    jobs = []
    with _SUBMIT:
        for g, r0, r1 in blocks:
            jobs.append(worker(g).submit(
                lambda w, r0=r0, r1=r1: _drive(_remote_steps(w, ta, tb, tc, r0, r1, None, kernel, local, True))))
    errors, ends = [], []
    for f in jobs:
        try:
            ends.append(f.result())
        except Exception as e:  # noqa: BLE001  (every GPU's job is waited for before one is raised)
            errors.append(e)
            ends.append(getattr(e, "tilegemm_end", None))
    for e in ends:
        if e is not None:
            e.synchronize()
    if errors:
        raise errors[0]


def _drive(gen):
    """A generator's steps to the end; its value."""
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def _local_steps(w, ta, tb, tc, r0, r1, start, kernel, local):
    """The home's rows: one product into C's rows, in place."""
    w.begin(start)
    local(ta[r0:r1], tb, kernel=kernel, out=tc[r0:r1])
    return w.end()
    yield  # noqa: unreachable (a generator)


def _remote_steps(w, ta, tb, tc, r0, r1, start, kernel, local, host, feed=None, forward=None, relay=False):
    """Another GPU's rows, as steps (a generator; the GPU current and its product stream the
    current stream at each): A's rows and B's panels in, C's panels out, overlapped. B's panels
    come from the operand, or (feed) from the previous GPU of a chain, which already holds them;
    each piece that lands here is handed on (forward) to the next GPU, which reads it from here.
    Returns the event after all it queued."""
    import torch

    dev = torch.device("cuda", w.index)
    w.begin(start)
    rows, k = r1 - r0, ta.shape[1]
    cuts = panels(tb.shape[1])
    need = (rows * k + k * tb.shape[1] + rows * tb.shape[1]) * ta.element_size()
    free = torch.cuda.mem_get_info(w.index)[0]
    if need > free:  # what torch holds cached is free to it too (its statistics cost 0.1 ms: only here)
        free += torch.cuda.memory_reserved(w.index) - torch.cuda.memory_allocated(w.index)
    if need > free:
        raise OutOfDeviceMemory(f"matmul(devices=...): GPU {w.index} needs {need / 2**20:.1f} MiB for its "
                                f"{rows} rows of A, B and its rows of C; {free / 2**20:.1f} MiB free")
    send = _Stager(w, host)
    a = torch.empty((rows, k), dtype=ta.dtype, device=dev)
    bs = [torch.empty((k, j1 - j0), dtype=tb.dtype, device=dev) for j0, j1 in cuts]
    for x in [a, *bs]:  # made for the product stream, filled on copy_in
        x.record_stream(w.copy_in)
    taken = 0  # pieces taken from the feed

    def fetch(j: int):
        """B's panel j into bs[j], piece by piece (steps: a piece not yet at the sender is waited
        for); the event after the last piece landed."""
        nonlocal taken
        j0, j1 = cuts[j]
        for k0, k1 in _pieces(k, j, relay):
            dst = bs[j][k0:k1]
            if feed is None:
                ready = send.into(dst, tb[k0:k1, j0:j1])
            else:
                while len(feed.pieces) <= taken:
                    yield
                src, there = feed.pieces[taken]
                taken += 1
                w.copy_in.wait_event(there)
                copy_flat(dst, src, w.copy_in)
                ready = torch.cuda.Event()
                ready.record(w.copy_in)
            if forward is not None:
                forward.pieces.append((dst, ready))
        if feed is not None and j + 1 == len(cuts):  # the sender's panels are read: it may free them
            feed.read = ready
        return ready

    chunks = _row_chunks(rows)
    first = send.into(a[:chunks[1]], ta[r0:r0 + chunks[1]])  # A's first chunk, then B's first panel
    ready = yield from fetch(0)
    pending, done_last = [], None
    for j, (j0, j1) in enumerate(cuts):
        w.compute.wait_event(ready)
        # each product by the plain call (its launch plan, a few µs of host time; no out=, whose
        # checks cost more than a narrow panel's product at 8192²); its C goes back from where
        # it was made
        if j == 0:  # in row chunks of A: the first starts once its chunk (and panel 0) is here
            made = []
            for i0, i1 in zip(chunks, chunks[1:]):
                w.compute.wait_event(first if i0 == 0 else send.into(a[i0:i1], ta[r0 + i0:r0 + i1]))
                made.append((tc[r0 + i0:r0 + i1, j0:j1], local(a[i0:i1], bs[0], kernel=kernel)))
                yield
        else:
            made = [(tc[r0:r1, j0:j1], local(a, bs[j], kernel=kernel))]
            yield
        done = torch.cuda.Event()
        done.record(w.compute)
        if j + 1 < len(cuts):  # the next panel travels while this one is multiplied
            ready = yield from fetch(j + 1)
        for dst, c in pending:  # the last panel of C goes back while this one is multiplied
            send.back(dst, c, done_last)
        pending, done_last = made, done
        for _, c in made:
            c.record_stream(w.copy_out)
    for dst, c in pending:
        send.back(dst, c, done_last)
    send.drain()
    if forward is not None:  # the panels stay until the next GPU has read them
        while forward.read is None:
            yield
        w.copy_in.wait_event(forward.read)
    return w.end()


def _pieces(k: int, j: int, relay: bool) -> list[tuple[int, int]]:
    """The row pieces of K in which panel j travels: along a chain, the first panel in
    FIRST_CHUNKS pieces, so that each GPU hands it on after a quarter has landed, not all."""
    if not relay or j > 0 or k < FIRST_CHUNKS * ROW_ALIGN:
        return [(0, k)]
    cut = [k * i // FIRST_CHUNKS for i in range(FIRST_CHUNKS + 1)]
    return list(zip(cut, cut[1:]))


class _Link:
    """Two GPUs of a chain: the sender's pieces of B's panels, each with the event after it landed
    there, in the order both walk them; and the reader's event after its last copy from the
    sender (None until it is queued)."""

    def __init__(self, sender: int):
        self.sender = sender
        self.pieces: list = []
        self.read = None


_SUBMIT = threading.Lock()


def _row_chunks(rows: int) -> list[int]:
    if rows < FIRST_CHUNKS * ROW_ALIGN:
        return [0, rows]
    return [rows * i // FIRST_CHUNKS // ROW_ALIGN * ROW_ALIGN if i < FIRST_CHUNKS else rows
            for i in range(FIRST_CHUNKS + 1)]


_PEERS: set = set()


def _peer(src: int, dst: int) -> None:
    """Peer access between two GPUs, both ways, enabled once (torch enables it, one way, at its
    first copy between them), so that copy_2d's and copy_flat's copies go over NVLink directly.
    Its copies run on both GPUs' current streams: called with the caller's (in _run)."""
    import torch

    if (src, dst) not in _PEERS and src != dst:
        for x, y in ((src, dst), (dst, src)):
            torch.empty(1, device=f"cuda:{y}").copy_(torch.empty(1, device=f"cuda:{x}"))
        _PEERS.update({(src, dst), (dst, src)})


class _Slot:
    """A pinned staging buffer and the event of its last copy."""

    def __init__(self):
        import torch

        self.buf = torch.empty(STAGE_BYTES, dtype=torch.uint8, pin_memory=True)
        self.event = None

    def view(self, rows: int, cols: int, dtype):
        import torch

        if self.event is not None:
            self.event.synchronize()  # its last copy has drained
            self.event = None
        size = rows * cols * torch.empty((), dtype=dtype).element_size()
        if size > self.buf.numel():  # one row wider than a buffer
            self.buf = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        return self.buf[:size].view(dtype).view(rows, cols)

    def used_on(self, stream) -> None:
        import torch

        self.event = torch.cuda.Event()
        self.event.record(stream)


class _Stager:
    """Copies between the caller's operands and one GPU: over NVLink by the copy engines
    (copy_2d) for device operands; through the worker's ring of pinned buffers for host ones."""

    def __init__(self, w: Worker, host: bool):
        self.w, self.host = w, host
        self.outgoing: list = []  # host: (slot, pinned view, the caller's rows) to write out

    def into(self, dst, src):
        """dst (contiguous, on this GPU) ← src; returns the event on copy_in after which dst holds it."""
        import torch

        w = self.w
        if not self.host:
            copy_2d(dst, src, w.copy_in)
        else:
            for i0, i1, slot in self._chunks(src):
                view = slot.view(i1 - i0, src.shape[1], src.dtype)
                view.copy_(src[i0:i1])  # the host's share: strided rows into the pinned buffer
                with torch.cuda.stream(w.copy_in):
                    dst[i0:i1].copy_(view, non_blocking=True)
                slot.used_on(w.copy_in)
        e = torch.cuda.Event()
        e.record(w.copy_in)
        return e

    def back(self, dst, src, ready) -> None:
        """dst (the caller's C) ← src (contiguous, on this GPU) once `ready` has passed, on copy_out."""
        import torch

        w = self.w
        w.copy_out.wait_event(ready)
        if not self.host:
            copy_2d(dst, src, w.copy_out)
            return
        for i0, i1, slot in self._chunks(src):
            view = slot.view(i1 - i0, src.shape[1], src.dtype)
            with torch.cuda.stream(w.copy_out):
                view.copy_(src[i0:i1], non_blocking=True)
            slot.used_on(w.copy_out)
            self.outgoing.append((slot, view, dst[i0:i1]))
            self._flush(keep=1)

    def drain(self) -> None:
        self._flush(keep=0)

    def _flush(self, keep: int) -> None:
        while len(self.outgoing) > keep:
            slot, view, dst = self.outgoing.pop(0)
            slot.event.synchronize()
            dst.copy_(view)

    def _chunks(self, x):
        """(first row, end row, a staging slot) for each chunk of x's rows that fits a buffer."""
        rows, cols = x.shape
        per = max(1, STAGE_BYTES // max(1, cols * x.element_size()))
        ring = self.w.staging
        for i0 in range(0, rows, per):
            if len(ring) < STAGES:
                ring.append(_Slot())
            slot = ring.pop(0)
            ring.append(slot)
            if any(s is slot for s, _, _ in self.outgoing):  # its C rows are not out yet
                self._flush(keep=0)
            yield i0, min(rows, i0 + per), slot


@functools.lru_cache(maxsize=256)
def describe_split(m: int, n: int, k: int, ids: tuple[int, ...], itemsize: int,
                   home: int | None) -> tuple[tuple[int, int, int], ...]:
    """(GPU, first row, end row) of each GPU's block, the home first: decided once per shape."""
    order = ([home] if home in ids else []) + [i for i in ids if i != home]
    tflops, gbps = _rate(m, n, k, len(order), itemsize)
    rows = split(m, n, k, len(order), itemsize, home in ids, tflops, gbps)
    return tuple((g, r0, r1) for g, r0, r1 in zip(order, rows, rows[1:]))
