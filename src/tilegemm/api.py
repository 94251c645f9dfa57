"""The library API: `matmul`, `explain`, `kernels`.

    c = tilegemm.matmul(a, b)                        # NumPy in, NumPy out
    c = tilegemm.matmul(a_cuda, b_cuda, kernel="smem_tiled_32")   # torch/CuPy/Numba in, same out

Data flows one way: normalise the operands (arrays.py), check them, choose a kernel from the
registry, move operands to the kernel's array kind (no copy for CUDA arrays), launch, and hand
back the caller's kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _cuda, arrays, registry
from .arrays import Operand
from .errors import DeviceError, DTypeError, LayoutError, OutOfDeviceMemory, ShapeError


@dataclass
class Plan:
    kernel: registry.Kernel
    m: int
    n: int
    k: int
    dtype: str
    reasons: list[str] = field(default_factory=list)


def _check_operands(a: Operand, b: Operand) -> tuple[int, int, int]:
    for op, what in ((a, "a"), (b, "b")):
        if len(op.shape) != 2:
            raise ShapeError(f"matmul: {what} must be 2-D (M×K @ K×N); got shape {op.shape}")
    (m, ka), (kb, n) = a.shape, b.shape
    if ka != kb:
        raise ShapeError(
            f"matmul: inner dimensions differ: a is {m}×{ka}, b is {kb}×{n} "
            f"(a.shape[1] = {ka} must equal b.shape[0] = {kb})"
        )
    if a.dtype != b.dtype:
        raise DTypeError(f"matmul: mixed dtypes a={a.dtype}, b={b.dtype}; cast one of them explicitly")
    if a.device != b.device:
        raise DeviceError(f"matmul: operands on different devices: a on {a.device}, b on {b.device}")
    return m, n, ka


def _candidates(dtype: str, on_host: bool) -> list[registry.Kernel]:
    return [k for k in registry.all_kernels() if k.auto_rank > 0 and not k.teaching and k.supports(dtype)]


def plan(a, b, kernel: str = "auto") -> Plan:
    """Check the operands and choose the kernel, without running anything."""
    return _plan(arrays.describe(a, "a"), arrays.describe(b, "b"), kernel)


_AUTO: dict[tuple, tuple[registry.Kernel, list[str]]] = {}


def _plan(A: Operand, B: Operand, kernel: str) -> Plan:
    m, n, k = _check_operands(A, B)
    dtype = A.dtype
    if kernel != "auto":
        kern = registry.get(kernel)
        if not kern.supports(dtype):
            raise DTypeError(f"matmul: kernel {kern.name!r} supports {', '.join(kern.dtypes)}; got {dtype}")
        ok, why = kern.runnable()
        if not ok:
            raise DeviceError(f"matmul: kernel {kern.name!r} cannot run here: {why}")
        if kern.backend == "cpu" and not A.on_host:
            raise DeviceError(
                f"matmul: {kern.name!r} runs on the host but the operands are on {A.device}; "
                "copy them to the host first or choose a GPU kernel"
            )
        reasons = [f"kernel {kern.name!r} asked for by name"] + ([why] if why else [])
        return Plan(kern, m, n, k, dtype, reasons)

    key = (dtype, A.on_host, A.device)
    if key in _AUTO:  # the choice depends on dtype and where the operands live, not on values
        best, reasons = _AUTO[key]
        return Plan(best, m, n, k, dtype, list(reasons))
    cands = _candidates(dtype, A.on_host)
    if not cands:
        supported = sorted({d for kk in registry.all_kernels() if not kk.teaching for d in kk.dtypes})
        raise DTypeError(f"matmul: no kernel supports dtype {dtype}; supported: {', '.join(supported)}")
    gpu = _cuda.has_gpu()
    reasons = []
    if A.on_host and not gpu:
        pool = [kk for kk in cands if kk.backend == "cpu"]
        reasons.append("no CUDA GPU here, so a CPU kernel (the simulator is for learning, not speed)")
    elif not A.on_host:
        pool = [kk for kk in cands if kk.backend != "cpu" and kk.runnable()[0]]
        reasons.append(f"operands live on {A.device}: a GPU kernel, no host round trip")
    else:
        pool = [kk for kk in cands if kk.backend != "cpu" and kk.runnable()[0]]
        reasons.append("host operands and a CUDA GPU: copy to the device, run there, copy back")
    if not pool:
        raise DeviceError(f"matmul: no runnable kernel for {dtype} operands on {A.device}")
    best = max(pool, key=lambda kk: kk.auto_rank)
    reasons.append(f"{best.name!r} ranks highest for {dtype} among: {', '.join(kk.name for kk in pool)}")
    _AUTO[key] = (best, list(reasons))
    return Plan(best, m, n, k, dtype, reasons)


def explain(a, b, kernel: str = "auto") -> str:
    """Say which kernel `matmul(a, b)` would run, and why."""
    p = plan(a, b, kernel)
    lines = [f"{p.m}×{p.k} @ {p.k}×{p.n}, {p.dtype}: {p.kernel.name} ({p.kernel.label})"]
    lines += [f"  - {r}" for r in p.reasons]
    return "\n".join(lines)


def _check_out(out, A: Operand, shape, dtype: str, inputs) -> Operand:
    O = arrays.describe(out, "out")
    if O.kind != A.kind:
        raise DTypeError(f"matmul: out is a {O.kind} array but the operands are {A.kind}; they must match")
    if tuple(O.shape) != tuple(shape):
        raise ShapeError(f"matmul: out has shape {tuple(O.shape)}; the product needs {tuple(shape)}")
    if O.dtype != dtype:
        raise DTypeError(f"matmul: out has dtype {O.dtype}; the product is {dtype}")
    if O.device != A.device:
        raise DeviceError(f"matmul: out is on {O.device} but the operands are on {A.device}")
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise LayoutError("matmul: out is read-only")
    for x, what in zip(inputs, ("a", "b")):
        if arrays.overlaps(out, x):
            raise LayoutError(f"matmul: out shares memory with {what}; the result would overwrite its own input")
    return O


def _check_free_memory(need: int) -> None:
    if _cuda.SIMULATOR:
        return
    free, total = _cuda.cuda.current_context().get_memory_info()
    if need > free:
        raise OutOfDeviceMemory(
            f"matmul: needs {need / 2**20:.1f} MiB of device memory, {free / 2**20:.1f} MiB free "
            f"of {total / 2**20:.1f} MiB"
        )


def matmul(a, b, *, kernel: str = "auto", out=None):
    """C = A @ B for 2-D float32/float64 operands (the tensor-core kernels add half precisions).

    a: M×K, b: K×N, same dtype, same device. NumPy arrays and torch CPU tensors are copied to
    the GPU and back when a GPU kernel runs; torch CUDA tensors, CuPy arrays, Numba device arrays
    and other `__cuda_array_interface__` objects are used in place. Any strides are accepted.
    kernel: "auto" or a registered name (see `tilegemm.kernels()`).
    out: optional M×N array of the caller's kind and dtype, written and returned.
    Returns the caller's kind. The inputs are never modified.
    """
    A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
    p = _plan(A, B, kernel)
    shape, dtype = (p.m, p.n), p.dtype
    O = _check_out(out, A, shape, dtype, (a, b)) if out is not None else None
    if p.m == 0 or p.n == 0:
        return out if out is not None else arrays.empty_like_kind(A, shape, dtype)
    if p.k == 0:  # an empty sum: zeros, by definition
        if out is None:
            return arrays.zeros_like_kind(A, shape, dtype)
        arrays.fill_zero(out)
        return out
    kern = p.kernel
    if kern.backend == "cpu":
        return _run_host(kern, A, B, O, shape, dtype)
    if kern.backend == "simt":
        return _run_numba(kern, A, B, O, out, shape, dtype)
    from .kernels.tensorcore import run_torch

    return run_torch(kern, A, B, out, shape, dtype)


def _run_host(kern, A: Operand, B: Operand, O, shape, dtype):
    a, b = arrays.host_view(A), arrays.host_view(B)
    if O is not None:
        c = arrays.host_view(O)
        kern.launch(a, b, c)
        return O.obj
    c = np.empty(shape, dtype=dtype)
    kern.launch(a, b, c)
    if A.kind == "torch":
        import torch

        return torch.from_numpy(c)
    return c


def _run_numba(kern, A: Operand, B: Operand, O, out, shape, dtype):
    cuda = _cuda.cuda
    if A.on_host:
        _check_free_memory(arrays.nbytes(A.shape, dtype) + arrays.nbytes(B.shape, dtype) + arrays.nbytes(shape, dtype))
        a_d, b_d = arrays.to_numba(A), arrays.to_numba(B)
        c_d = cuda.device_array(shape, dtype=dtype)
        kern.launch(a_d, b_d, c_d, None)
        host = arrays.host_view(O) if O is not None else np.empty(shape, dtype=dtype)
        if host.flags.c_contiguous:
            c_d.copy_to_host(host)
        else:
            host[...] = c_d.copy_to_host()
        if O is not None:
            return O.obj
        if A.kind == "torch":
            import torch

            return torch.from_numpy(host)
        return host
    with _on_device(arrays.device_index(A)):
        result = out if out is not None else _allocate(A, shape, dtype)
        stream = arrays.numba_stream(A)
        R = arrays.describe(result, "out")
        need = kern.needs_contiguous
        a_d = arrays.to_numba(A, stream, contiguous=need)
        b_d = arrays.to_numba(B, stream, contiguous=need)
        c_d = arrays.to_numba(R, stream)
        if need and not R.contiguous:  # compute into a contiguous buffer, then scatter into `out`
            tmp = cuda.device_array(shape, dtype=dtype, stream=stream) if stream else cuda.device_array(shape, dtype=dtype)
            kern.launch(a_d, b_d, tmp, stream)
            arrays.copy_2d(tmp, c_d, stream)
        else:
            kern.launch(a_d, b_d, c_d, stream)
    return result


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _on_device(index: int):
    """The operands' device as Numba's current one (a no-op when it already is)."""
    if _cuda.SIMULATOR or _cuda.cuda.get_current_device().id == index:
        return _nullcontext()
    return _cuda.cuda.gpus[index]


def _allocate(A: Operand, shape, dtype: str):
    """The result array, of the caller's kind; running out of memory becomes a clear error.
    (No free-memory query up front: it would cost a driver call on every product.)"""
    try:
        return arrays.empty_like_kind(A, shape, dtype)
    except Exception as e:  # noqa: BLE001  (torch, CuPy and Numba each raise their own OOM type)
        if "out of memory" not in str(e).lower() and "OUT_OF_MEMORY" not in str(e):
            raise
        _check_free_memory(arrays.nbytes(shape, dtype))
        raise OutOfDeviceMemory(f"matmul: could not allocate the {shape[0]}×{shape[1]} {dtype} result: {e}") from e


def kernels() -> list[dict]:
    """Every registered kernel: name, backend, dtypes, whether it runs here and why not."""
    rows = []
    for k in registry.all_kernels():
        ok, why = k.runnable()
        rows.append(dict(
            name=k.name, backend=k.backend, label=k.label, rung=k.rung, dtypes=k.dtypes,
            teaching=k.teaching, runs_here=ok, note=why, summary=k.summary,
        ))
    return rows
