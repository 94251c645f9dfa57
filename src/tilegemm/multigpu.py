"""Rows of A over the GPUs of one host: `tilegemm.matmul(a, b, devices="all" | [ids])`.

    c = tilegemm.matmul(a, b, devices="all")       # a, b torch CUDA tensors on cuda:0: C there too
    c = tilegemm.matmul(a16, b16, devices=[0, 1])  # NumPy in, NumPy out, staged through pinned memory

A's rows are cut into one block per GPU (the remainder included); each GPU multiplies its rows by
all of B with what `auto` picks there, and C's rows come back to the caller. Each GPU is served
by its own persistent worker: a thread with three streams (copies in, products, copies out), so
no GPU waits for the host to serve another, and a call costs no thread start.

Where the operands live on one GPU (the home: A's device; C is returned there):
- the home multiplies its rows in one product, in place, with nothing copied;
- every other GPU g receives its rows of A and B's column panels over NVLink by the copy engines
  (cuMemcpy2DAsync: a column panel is a strided 2-D copy, so no kernel packs it on the home,
  whose SMs stay with its own product), multiplies panel j while panel j + 1 travels, and sends
  C's panel j back while panel j + 1 is multiplied. Its first panel is multiplied in row chunks
  of A, so g starts after one chunk of A and one panel of B have arrived, not all of its A.
- g's share of rows is cut so that it ends with the home: it pays the copy of its first chunk and
  panel before it starts and the copy of its last panel of C after, so it takes a little fewer
  rows than the home (`split`, from the local GEMM rate and the link's bandwidth).

Host operands (NumPy, torch CPU): every GPU receives its rows of A and B's panels through its own
ring of pinned staging buffers, in chunks (the host fills one while the copy engine drains
another), and C's panels go back the same way into the caller's array.

Traffic for G GPUs of which one is the home (s bytes an element): each other GPU receives
(M/G·K + K·N)·s and sends M/G·N·s; the home copies nothing. The products stay compute-bound:
panel j's product is M/G × w × K, intensity 2·(M/G)·w·K / ((M/G·K + K·w + M/G·w)·s).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import queue
import threading

import numpy as np

from . import arrays
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
_cuMemcpy2DAsync = None


def copy_2d(dst, src, stream) -> None:
    """dst[...] = src for 2-D torch tensors of one shape and dtype whose rows are each contiguous,
    on any devices (peer copies over NVLink) or pinned host memory, by the copy engines on
    `stream` (a torch stream; the thread's current device must be the stream's)."""
    global _cuMemcpy2DAsync
    if _cuMemcpy2DAsync is None:
        fn = ctypes.CDLL("libcuda.so.1").cuMemcpy2DAsync_v2
        fn.argtypes, fn.restype = [ctypes.POINTER(_Memcpy2D), ctypes.c_void_p], ctypes.c_int
        _cuMemcpy2DAsync = fn
    rows, cols = dst.shape
    if rows == 0 or cols == 0:
        return
    if tuple(src.shape) != (rows, cols) or src.dtype != dst.dtype or cols > 1 and (dst.stride(1) != 1 or src.stride(1) != 1) \
            or rows > 1 and (dst.stride(0) < cols or src.stride(0) < cols):
        raise ValueError(f"copy_2d: {tuple(src.shape)} → {tuple(dst.shape)}: rows not contiguous or overlapping")
    s = dst.element_size()
    p = _Memcpy2D(srcMemoryType=_UNIFIED, srcDevice=src.data_ptr(), srcPitch=max(src.stride(0), cols) * s,
                  dstMemoryType=_UNIFIED, dstDevice=dst.data_ptr(), dstPitch=max(dst.stride(0), cols) * s,
                  WidthInBytes=cols * s, Height=rows)
    err = _cuMemcpy2DAsync(ctypes.byref(p), ctypes.c_void_p(stream.cuda_stream))
    if err:
        raise DeviceError(f"matmul(devices=...): a {rows}×{cols} copy from {src.device} to {dst.device} failed "
                          f"(CUDA driver error {err})")


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

    def submit(self, fn) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.jobs.put((fn, fut))
        return fut

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
    """devices="all" or a list of GPU ids (ints, "cuda:N" or torch.device) → distinct ids."""
    from . import _cuda

    if not _cuda.has_gpu():
        raise DeviceError("matmul: devices= splits the product over CUDA GPUs, and this machine has none")
    import torch

    count = torch.cuda.device_count()
    if isinstance(devices, str) and devices == "all":
        return list(range(count))
    if isinstance(devices, (str, int)) or not hasattr(devices, "__iter__"):
        raise DeviceError(f"matmul: devices={devices!r}; give \"all\" or a list of GPU ids such as [0, 1]")
    ids = []
    for d in devices:
        i = d if isinstance(d, int) and not isinstance(d, bool) else getattr(torch.device(d) if isinstance(d, str) else d,
                                                                              "index", None)
        if not isinstance(i, int) or not 0 <= i < count:
            raise DeviceError(f"matmul: devices has {d!r}; this host's GPUs are 0 to {count - 1}")
        if i in ids:
            raise DeviceError(f"matmul: devices names GPU {i} twice")
        ids.append(i)
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
    operands are local), each other GPU takes fewer rows by what its copies cost before its first
    product (a row chunk of A and B's first panel) and after its last (C's last panel), at
    link_gbps, a row costing 2·N·K flops at `tflops` (at small sizes the copies outweigh the
    products and the home takes every row); the other blocks' sizes are multiples of ROW_ALIGN."""
    even = [m * g // gpus for g in range(gpus + 1)]
    if not home or gpus == 1 or m < gpus * ROW_ALIGN:
        return even
    row_s = 2 * n * k / (tflops * 1e12)
    cuts = panels(n)
    rows = m / gpus
    lag_bytes = (rows / FIRST_CHUNKS * k + k * (cuts[0][1] - cuts[0][0]) + rows * (cuts[-1][1] - cuts[-1][0])) * itemsize
    lag = lag_bytes / (link_gbps * 1e9)
    # the home's (m − (gpus − 1)·r)·row_s = lag + r·row_s, for each other GPU's r rows
    r = int(round(max(0.0, (m * row_s - lag) / (gpus * row_s)) / ROW_ALIGN)) * ROW_ALIGN
    r = min(r, m // gpus // ROW_ALIGN * ROW_ALIGN)  # the home never takes fewer rows than the others
    home_rows = m - (gpus - 1) * r
    return [0] + [home_rows + g * r for g in range(gpus)]


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
        tc = _torch_view(arrays.describe(out, "out"))
        if A.kind == "numpy" and min(out.strides, default=0) < 0:  # torch cannot view it: C goes through a copy
            tc = torch.from_numpy(arrays.host_empty((m, n), A.dtype))
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
        if A.kind == "numpy" and min(out.strides, default=0) < 0:
            np.copyto(out, tc.numpy())
        return out
    if host:
        return c_np if A.kind == "numpy" else tc
    return arrays.to_kind(tc, A) if A.kind != "torch" else tc


def _torch_view(op):
    """The operand as a torch tensor, no copy: NumPy through torch.from_numpy (a copy only for
    negative strides, which torch cannot view), CUDA arrays through their interface."""
    import warnings

    import numpy as np
    import torch

    if op.kind == "torch":
        return op.obj.detach()  # the workers' threads have their own grad mode; no gradient is recorded here
    if op.kind == "numpy":
        x = op.obj if min(op.obj.strides, default=0) >= 0 else np.ascontiguousarray(op.obj)
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
    jobs = []
    for g, r0, r1 in describe_split(m, n, k, tuple(ids), ta.element_size(), home):
        if r1 == r0:
            continue
        if g == home:
            job = _local_job(ta, tb, tc, r0, r1, start, kernel, local)
        else:
            job = _remote_job(ta, tb, tc, r0, r1, start, kernel, local, host)
        jobs.append(worker(g).submit(job))
    errors, ends = [], []
    for f in jobs:
        try:
            ends.append(f.result())
        except Exception as e:  # noqa: BLE001  (every GPU's job is waited for before one is raised)
            errors.append(e)
            ends.append(getattr(e, "tilegemm_end", None))
    ends = [e for e in ends if e is not None]
    if host or errors:  # host: C is the caller's memory; an error: no copy may outlive the call's buffers
        for e in ends:
            e.synchronize()
        if errors:
            raise errors[0]
        return
    caller = torch.cuda.current_stream(home)
    for e in ends:
        caller.wait_event(e)


def _local_job(ta, tb, tc, r0, r1, start, kernel, local):
    """The home's rows: one product into C's rows, in place."""
    def job(w: Worker):
        w.begin(start)
        local(ta[r0:r1], tb, kernel=kernel, out=tc[r0:r1])
        return w.end()
    return job


def _remote_job(ta, tb, tc, r0, r1, start, kernel, local, host):
    """Another GPU's rows: A's rows and B's panels in, C's panels out, overlapped."""
    def job(w: Worker):
        import torch

        dev = torch.device("cuda", w.index)
        w.begin(start)
        rows, k = r1 - r0, ta.shape[1]
        cuts = panels(tb.shape[1])
        need = (rows * k + k * tb.shape[1] + rows * tb.shape[1]) * ta.element_size()
        free = torch.cuda.mem_get_info(w.index)[0] + torch.cuda.memory_reserved(w.index) \
            - torch.cuda.memory_allocated(w.index)  # what torch holds cached is free to it
        if need > free:
            raise OutOfDeviceMemory(f"matmul(devices=...): GPU {w.index} needs {need / 2**20:.1f} MiB for its "
                                    f"{rows} rows of A, B and its rows of C; {free / 2**20:.1f} MiB free")
        if not host:
            _peer(ta.device.index, w.index)
        send = _Stager(w, host)
        a = torch.empty((rows, k), dtype=ta.dtype, device=dev)
        bs = [torch.empty((k, j1 - j0), dtype=tb.dtype, device=dev) for j0, j1 in cuts]
        for x in [a, *bs]:  # made for the product stream, filled on copy_in
            x.record_stream(w.copy_in)
        chunks = _row_chunks(rows)
        ready = send.into(bs[0], tb[:, cuts[0][0]:cuts[0][1]])
        pending, done_last = [], None
        for j, (j0, j1) in enumerate(cuts):
            w.compute.wait_event(ready)
            # each product by the plain call (its launch plan, a few µs of host time; no out=, whose
            # checks cost more than a narrow panel's product at 8192²); its C goes back from where
            # it was made
            if j == 0:  # in row chunks of A: the first starts once its chunk (and panel 0) is here
                made = []
                for i0, i1 in zip(chunks, chunks[1:]):
                    w.compute.wait_event(send.into(a[i0:i1], ta[r0 + i0:r0 + i1]))
                    made.append((tc[r0 + i0:r0 + i1, j0:j1], local(a[i0:i1], bs[0], kernel=kernel)))
            else:
                made = [(tc[r0:r1, j0:j1], local(a, bs[j], kernel=kernel))]
            done = torch.cuda.Event()
            done.record(w.compute)
            if j + 1 < len(cuts):  # the next panel travels while this one is multiplied
                ready = send.into(bs[j + 1], tb[:, cuts[j + 1][0]:cuts[j + 1][1]])
            for dst, c in pending:  # the last panel of C goes back while this one is multiplied
                send.back(dst, c, done_last)
            pending, done_last = made, done
            for _, c in made:
                c.record_stream(w.copy_out)
        for dst, c in pending:
            send.back(dst, c, done_last)
        send.drain()
        return w.end()
    return job


def _row_chunks(rows: int) -> list[int]:
    if rows < FIRST_CHUNKS * ROW_ALIGN:
        return [0, rows]
    return [rows * i // FIRST_CHUNKS // ROW_ALIGN * ROW_ALIGN if i < FIRST_CHUNKS else rows
            for i in range(FIRST_CHUNKS + 1)]


_PEERS: set = set()


def _peer(src: int, dst: int) -> None:
    """Peer access between two GPUs, enabled once (torch enables it at its first copy between them),
    so that copy_2d's copies go over NVLink directly."""
    import torch

    if (src, dst) not in _PEERS:
        torch.empty(1, device=f"cuda:{dst}").copy_(torch.empty(1, device=f"cuda:{src}"))
        _PEERS.add((src, dst))


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
