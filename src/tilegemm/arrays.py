"""Recognise the caller's arrays and move between kinds without needless copies.

Kinds: NumPy and torch CPU tensors live on the host; torch CUDA tensors, CuPy arrays, Numba
device arrays and any object exposing `__cuda_array_interface__` live on a GPU. CUDA arrays
reach Numba kernels through the CUDA array interface and Triton kernels through torch, with no
host round trip; the result comes back as the caller's kind.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from dataclasses import dataclass

import numpy as np

from . import _cuda
from .errors import AutogradError, DeviceError, DTypeError, LayoutError, MaskedArrayError, OutOfHostMemory

HOST = "cpu"


@dataclass(frozen=True)
class Operand:
    obj: object
    kind: str  # "numpy" | "torch" | "cupy" | "numba" | "cai"
    shape: tuple
    dtype: str  # "float32", "float64", "float16", "bfloat16", "float8_e4m3fn", ...
    device: str  # "cpu" or "cuda:N"
    contiguous: bool

    @property
    def on_host(self) -> bool:
        return self.device == HOST


def _module_root(x) -> str:
    return type(x).__module__.split(".")[0]


def _torch_tensor(x) -> bool:
    """Is x a torch tensor, of any class (its strides and address are torch's to give: a CUDA one's
    array interface raises where it requires grad)? Not another of torch's objects (a module, a
    Size), which layout and self_overlapping read as tensors (AttributeError)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _plain_torch(x) -> bool:
    """Is x a torch.Tensor or an nn.Parameter? Not a subclass of torch's own (a MaskedTensor, a
    DTensor), nor another of torch's objects (a module, a Size): those were taken for tensors by
    the module they come from, and failed far inside (AttributeError, or a masked tensor's
    .numpy())."""
    torch = sys.modules.get("torch")
    return torch is not None and (type(x) is torch.Tensor or type(x) is torch.nn.Parameter)


def _torch_dtype_name(dt) -> str:
    return str(dt).removeprefix("torch.")


def refuse_masked(x, what: str) -> None:
    """A NumPy masked array is refused: its masked values would be multiplied in (np.ma.dot
    leaves them out)."""
    if type(x) is not np.ndarray and isinstance(x, np.ma.MaskedArray):
        raise MaskedArrayError(
            f"{what}: a NumPy masked array; tilegemm would multiply its masked values too. Use np.ma.dot "
            f"(it leaves them out), or pass {what}.filled(0) or np.asarray({what}) to multiply the values "
            f"as they are")


def describe(x, what: str) -> Operand:
    """Classify `x` (argument `what`) or raise a typed error saying what was expected."""
    if isinstance(x, np.generic):  # a NumPy scalar (np.float32(2)): a 0-D array, as np.matmul takes it
        x = np.asarray(x)
    root = _module_root(x)
    if isinstance(x, np.ndarray):
        refuse_masked(x, what)
        return Operand(x, "numpy", x.shape, x.dtype.name, HOST, x.flags.c_contiguous)
    if _plain_torch(x):
        if x.is_nested or x.layout is not sys.modules["torch"].strided:  # (torch is loaded: x is its tensor)
            raise LayoutError(f"{what}: a torch tensor of layout {'nested' if x.is_nested else x.layout}; tilegemm "
                              "multiplies dense (strided) tensors: pass x.to_dense(), or use torch.matmul")
        dev = HOST if x.device.type == "cpu" else f"cuda:{x.device.index or 0}"
        if x.device.type not in ("cpu", "cuda"):
            raise DeviceError(f"{what}: torch tensors on {x.device} are not supported (cpu or cuda only)")
        refuse_memoryless(x, what)
        return Operand(x, "torch", tuple(x.shape), _torch_dtype_name(x.dtype), dev, x.is_contiguous())
    if root == "cupy":
        return Operand(x, "cupy", x.shape, x.dtype.name, f"cuda:{x.device.id}", x.flags.c_contiguous)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):  # (a subclass: its __torch_function__ may say what its
        # values are; torch.matmul asks it, tilegemm's kernels would read its memory. Before the array interface: a
        # CUDA one was read through it, and a wrapper's, or one that requires grad, raised there)
        advice = ("use torch.matmul, which knows its rules" if root == "torch" else  # (torch's own: a masked tensor's
                  f"pass {what}.as_subclass(torch.Tensor), or use torch.matmul")  # plain view holds its masked values)
        raise DTypeError(f"{what}: a {x.device.type.upper() if x.device.type == 'cpu' else x.device.type} tensor "
                         f"of a subclass of torch.Tensor, {type(x).__module__}.{type(x).__name__}; tilegemm reads "
                         f"plain ones: {advice}")
    if hasattr(x, "__cuda_array_interface__") or type(x).__name__ in ("DeviceNDArray", "FakeCUDAArray"):
        arr = x if type(x).__name__ in ("DeviceNDArray", "FakeCUDAArray") else _cuda.cuda.as_cuda_array(x)
        kind = "numba" if arr is x else "cai"
        contiguous = bool(arr.is_c_contiguous()) if hasattr(arr, "is_c_contiguous") else True
        return Operand(x, kind, tuple(arr.shape), np.dtype(arr.dtype).name, _numba_device(arr), contiguous)
    raise DTypeError(
        f"{what}: expected a NumPy array, a torch tensor, a CuPy array, a Numba device array or an "
        f"object with __cuda_array_interface__; got {type(x).__module__}.{type(x).__name__}"
    )


def memoryless(x) -> str:
    """Why torch tensor x (strided, with elements) has no memory of its own holding its values, or
    "": a ZeroTensor (torch's lazy zeros: data_ptr 0), a functionalization wrapper outside its
    transform (data_ptr 0: the values are its wrapped tensor's), or a storage resized to 0 (as FSDP
    frees a parameter's: data_ptr 0 plus the tensor's offset). A kernel given its data_ptr reads
    (or writes) address 0 plus an offset; NumPy over it, whatever lies there. (About 0.4 µs.)"""
    if not x.numel():
        return ""
    if x._is_zerotensor():
        return "a ZeroTensor (torch's lazy zeros, with no memory); pass torch.zeros_like({what})"
    if sys.modules["torch"]._is_functional_tensor(x):
        return ("a functionalization wrapper, whose memory is its wrapped tensor's; pass "
                "torch._from_functional_tensor({what})")
    try:
        held = x.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):  # (a wrapper subclass, DTensor's: no storage; its own rules, as before)
        return ""
    if not held:
        return ("a tensor whose storage holds no memory (freed: untyped_storage().resize_(0), as FSDP frees a "
                "sharded parameter's); use it while its storage is allocated")
    return ""


def refuse_memoryless(x, what: str) -> None:
    """A torch tensor with no memory holding its values (`memoryless`) refused, in words."""
    why = memoryless(x)
    if why:
        raise LayoutError(f"{what} is {why.format(what=what)}")


def refuse_two_host_kinds(A: Operand, B: Operand, who: str) -> None:
    """NumPy with a torch CPU tensor: np.matmul gives torch's kind, torch.matmul refuses; the
    result's kind would be a guess, so `who` (matmul, gemm) refuses them."""
    if A.kind != B.kind and A.on_host and B.on_host:
        raise DTypeError(f"{who}: a is a {A.kind} array and b a {B.kind} array; pass both of one kind")


def _numba_device(arr) -> str:
    if _cuda.SIMULATOR:
        return "cuda:0"
    try:
        return f"cuda:{arr.gpu_data.device.id}" if hasattr(arr, "gpu_data") else f"cuda:{_cuda.cuda.get_current_device().id}"
    except Exception:  # noqa: BLE001  (foreign CAI memory: assume the current device)
        return f"cuda:{_cuda.cuda.get_current_device().id}"


def device_index(op: Operand) -> int:
    return int(op.device.split(":")[1])


# ---- to and from Numba (the SIMT kernels) -------------------------------------------------


def numba_stream(op: Operand):
    """The stream the caller's framework is using, so our kernel orders with its work."""
    if _cuda.SIMULATOR:
        return None
    if op.kind == "torch":
        import torch

        return _external(torch.cuda.current_stream(op.obj.device).cuda_stream)
    if op.kind == "cupy":
        import cupy

        return _external(cupy.cuda.get_current_stream().ptr)
    return None


_STREAMS: dict[int, object] = {}


def _external(ptr: int):
    """Numba's view of a framework's stream, made once per stream handle (0: the legacy default)."""
    if ptr == 0:
        return None
    if ptr not in _STREAMS:
        _STREAMS[ptr] = _cuda.cuda.external_stream(ptr)
    return _STREAMS[ptr]


def to_numba(op: Operand, stream=None, contiguous: bool = False):
    """A Numba device array viewing (CUDA kinds) or holding a copy of (host kinds) the operand.
    contiguous=True: a C-contiguous device copy is made of a strided CUDA operand."""
    if op.kind == "numba" or op.kind in ("cupy", "cai") or (op.kind == "torch" and not op.on_host):
        obj = op.obj.detach() if op.kind == "torch" and op.obj.requires_grad else op.obj  # such a tensor has no CAI
        arr = obj if op.kind == "numba" else _cuda.cuda.as_cuda_array(obj)
        return contiguous_copy(arr, stream) if contiguous and not op.contiguous else arr
    host = np.ascontiguousarray(host_view(op))
    return _cuda.cuda.to_device(host, stream=stream) if stream else _cuda.cuda.to_device(host)


cuda = None  # numba.cuda, bound by copy_2d before its kernels compile (a global, not a closure: the
# simulator runs a kernel with its module's `cuda` swapped for each thread's view)
_copy_kernels: tuple = ()
GRID_Y = 65535  # CUDA's most blocks along y: past it the copy's blocks stride down their axis


def _along_rows(s, d):
    j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if j < d.shape[1]:
        step = cuda.gridDim.y * cuda.blockDim.y
        for i in range(cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y, d.shape[0], step):
            d[i, j] = s[i, j]


def _along_columns(s, d):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < d.shape[0]:
        step = cuda.gridDim.y * cuda.blockDim.y
        for j in range(cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y, d.shape[1], step):
            d[i, j] = s[i, j]


def copy_2d(src, dst, stream=None, configure=None) -> None:
    """dst[...] = src on the device, any strides (a Numba kernel: works for every CUDA kind), the
    threads of a warp along dst's rows (its writes coalesced where they are contiguous) unless its
    columns are the contiguous axis, or it is one column. configure(kernel, grid, block, stream) ->
    the launch, where given (a SIMT rung's, which a launch plan can record)."""
    global cuda, _copy_kernels
    if not _copy_kernels:
        cuda = _cuda.cuda
        _copy_kernels = cuda.jit(_along_rows), cuda.jit(_along_columns)
    m, n = dst.shape
    columns = m > 1 and (n == 1 or dst.strides[0] == dst.dtype.itemsize != dst.strides[1])
    fast, slow = (m, n) if columns else (n, m)
    grid = ((fast + 15) // 16, min((slow + 15) // 16, GRID_Y))
    kernel = _copy_kernels[columns]
    if configure is not None:
        k = configure(kernel, grid, (16, 16), stream)
    else:
        k = kernel[grid, (16, 16)] if stream is None else kernel[grid, (16, 16), stream]
    k(src, dst)


def contiguous_copy(arr, stream=None):
    cuda = _cuda.cuda
    out = cuda.device_array(arr.shape, dtype=arr.dtype, stream=stream) if stream else cuda.device_array(arr.shape, dtype=arr.dtype)
    copy_2d(arr, out, stream)
    return out


def write_back(t, out, O: Operand) -> None:
    """Copy the torch tensor t (on any device) into the caller's `out` (described as O), of any kind."""
    if O.kind == "torch":
        out.copy_(t)
    elif O.on_host:
        host_target(O)[...] = t.cpu().numpy()
    else:
        to_torch_cuda(O).copy_(t)


def host_view(op: Operand, torch_ok: bool = False) -> np.ndarray:
    """The operand as a NumPy array to read (host kinds only; no copy where possible): one in the
    other byte order (big-endian data read from a file) is copied to this machine's, which the
    kernels and torch take. torch_ok: the array goes to torch.from_numpy, which takes no negative
    strides nor strides that are not a whole number of elements (a field of a structured array),
    and warns on read-only arrays, so such a view is copied."""
    if op.kind == "numpy":
        if not op.obj.dtype.isnative:
            return op.obj.astype(op.obj.dtype.newbyteorder("="))
        if torch_ok and _torch_refuses(op.obj):
            return op.obj.copy()
        return op.obj
    if op.kind == "torch" and op.on_host:
        t = op.obj.detach()
        if t.dtype.is_floating_point and _torch_dtype_name(t.dtype) not in ("float32", "float64", "float16"):
            raise DTypeError(f"a torch CPU tensor of {t.dtype} has no NumPy equivalent")
        if t.is_neg() or t.is_conj():  # a lazy negation (x.conj().imag) or conjugation: its values, made
            t = t.resolve_neg().resolve_conj()
        return t.numpy()
    raise DeviceError(f"{op.kind} array on {op.device} is not a host array")


def torch_views(x: np.ndarray) -> bool:
    """Can torch.from_numpy view NumPy array x as it lies: this machine's byte order, strides neither
    negative nor part of an element (a field of a structured array)? (A read-only one it views, warning.)"""
    return x.dtype.isnative and all(s >= 0 and s % x.itemsize == 0 for s in x.strides)


def _torch_refuses(x: np.ndarray) -> bool:
    """Would torch.from_numpy refuse x (torch_views) or warn (read-only)? host_view copies it."""
    return not torch_views(x) or not x.flags.writeable


def negated(x) -> bool:
    """Is x a lazy negation: a torch tensor with the neg bit (torch._neg_view(t), z.conj().imag),
    a view whose memory holds the negated values? Kernels read memory as it lies."""
    is_neg = getattr(x, "is_neg", None)
    return is_neg is not None and is_neg()


def resolved(x):
    """x's values in memory of their own: a lazy negation made real (a copy, as torch's
    resolve_neg makes; differentiable), any other x as it is."""
    return x.resolve_neg() if negated(x) else x


def refuse_negated(x, what: str) -> None:
    """A result is written into x's memory as it lies: a lazy negation would read back negated."""
    if negated(x):
        raise LayoutError(f"{what} is a lazy negation view (torch's neg bit: its memory holds the negated values), "
                          f"and the result is written into its memory; pass a plain tensor")


def refuse_inference(x, what: str) -> None:
    """A torch inference tensor (made under torch.inference_mode) written outside inference mode:
    torch refuses that in-place write (the tensor keeps no version counter for autograd to check),
    and so does tilegemm, which would write it where torch does not see."""
    is_inference = getattr(x, "is_inference", None)  # (a torch tensor's)
    if is_inference is not None and is_inference():
        import torch

        if not torch.is_inference_mode_enabled():
            raise AutogradError(f"{what} is an inference tensor (made under torch.inference_mode), which torch lets no "
                                "one write in place outside inference mode; call under torch.inference_mode(), or "
                                "pass a normal tensor (made outside it, or its .clone() there)")


def host_layout(op: Operand) -> np.ndarray | None:
    """How host_view(op, torch_ok=True) lays a NumPy operand out, without reading its values: op's
    array where it makes no copy, an uninitialised one in astype's layout (which keeps the order)
    for the other byte order, None where its copy is in C order. explain's stand-in for what matmul
    moves to the GPU."""
    x = op.obj
    if not x.dtype.isnative:
        return np.empty_like(x, dtype=x.dtype.newbyteorder("="))
    return None if _torch_refuses(x) else x


def host_target(op: Operand) -> np.ndarray:
    """A host array to write a result into, as a NumPy array over its memory (never a copy)."""
    if op.kind == "numpy":
        return op.obj
    if op.kind == "torch" and op.on_host:
        refuse_negated(op.obj, "out")
        return op.obj.detach().numpy()
    raise DeviceError(f"{op.kind} array on {op.device} is not a host array")


def available_host_bytes() -> int | None:
    """Memory a new allocation can take without swapping (Linux's MemAvailable; else free pages),
    or None where the system does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


LARGE_HOST_BYTES = 64 * 2**20  # results below this are not checked (the check reads /proc: ~13 µs)


def dims(shape) -> str:
    """A shape as messages write it: 777×1234."""
    return "×".join(map(str, shape))


def check_host_memory(shape, dtype: str, what: str = "matmul: the result") -> None:
    need = nbytes(shape, dtype)
    if need >= LARGE_HOST_BYTES:
        refuse_past_host_memory(need, f"{what} ({dims(shape)} {dtype}) needs")


def refuse_past_host_memory(need: int, what: str, why: str = "", advice: str = "") -> None:
    """OutOfHostMemory where `need` bytes exceed the host's available memory ("{what} X GiB of host
    memory{why}, Y GiB available{advice}")."""
    free = available_host_bytes()
    if free is not None and need > free:
        raise OutOfHostMemory(f"{what} {need / 2**30:.1f} GiB of host memory{why}, {free / 2**30:.1f} GiB "
                              f"available{advice}")


def host_empty(shape, dtype: str) -> np.ndarray:
    """np.empty for a result, refused (OutOfHostMemory) where it cannot fit in memory."""
    check_host_memory(shape, dtype)
    return np.empty(shape, dtype=dtype)


class _Memory:
    """A tensor's memory as NumPy reads an __array_interface__ (Tensor.numpy() would mark the
    tensor's storage shared with NumPy, which then refuses to resize)."""

    def __init__(self, t, dtype: str):
        self.__array_interface__ = dict(shape=tuple(t.shape), typestr=np.dtype(dtype).str,
                                        data=(t.data_ptr(), False), version=3)


def host_result(op: Operand, shape, dtype: str):
    """A host result of the caller's kind and the NumPy array a kernel writes it through: for a
    torch caller a tensor of torch's own storage, which resizes as torch's results do (one made by
    torch.from_numpy refused resize_, torch.cat(..., out=) of another size and a storage freed to
    0 bytes). The array is valid while the tensor lives: the caller holds both."""
    if op.kind == "torch":
        t = empty_like_kind(op, shape, dtype)
        return t, np.asarray(_Memory(t, dtype)) if t.numel() else np.empty(t.shape, dtype)
    c = host_empty(shape, dtype)
    return c, c


def empty_like_kind(op: Operand, shape, dtype: str):
    """An uninitialised array of the caller's kind, on the caller's device."""
    if op.kind == "numpy":
        return host_empty(shape, dtype)
    if op.kind == "torch":
        import torch

        if op.on_host:
            check_host_memory(shape, dtype)
        return torch.empty(shape, dtype=getattr(torch, dtype), device=op.obj.device)
    if op.kind == "cupy":
        import cupy

        with cupy.cuda.Device(device_index(op)):
            return cupy.empty(shape, dtype=dtype)
    return _cuda.cuda.device_array(shape, dtype=dtype)


def zeros_like_kind(op: Operand, shape, dtype: str):
    out = empty_like_kind(op, shape, dtype)
    fill_zero(out)
    return out


def fill_zero(x) -> None:
    root = _module_root(x)
    if isinstance(x, np.ndarray) or root in ("torch", "cupy"):
        x[...] = 0
        return
    arr = x if hasattr(x, "copy_to_device") else _cuda.cuda.as_cuda_array(x)  # (Numba's, or another CAI object's view)
    if not arr.size:
        return
    if arr.is_c_contiguous() or arr.is_f_contiguous():
        arr.copy_to_device(np.zeros(arr.shape, dtype=arr.dtype, order="C" if arr.is_c_contiguous() else "F"))
    else:  # a strided view (out=wide[:, ::2]): no one copy reaches its elements; a kernel writes them, as a
        # product's are (matmul's numba out= is 2-D)
        with _cuda.SIM_LAUNCHES if _cuda.SIMULATOR else contextlib.nullcontext():  # (dispatch.execute_matmul's)
            copy_2d(_cuda.cuda.to_device(np.zeros(arr.shape, dtype=arr.dtype)), arr)


def nbytes(shape, dtype: str) -> int:
    return math.prod(int(d) for d in shape) * itemsize(dtype)  # (Python's ints: NumPy's int64 wrapped at 2⁶⁴)


def itemsize(dtype: str) -> int:
    if dtype == "bfloat16":
        return 2
    if dtype.startswith("float8"):
        return 1
    return np.dtype(dtype).itemsize


def layout(x) -> tuple[int, tuple, tuple | None, int] | None:
    """(first element's address, shape, strides in bytes or None where C-contiguous, itemsize) of an
    array: a torch tensor's, or one with the CUDA or NumPy array interface; None when unknown."""
    if _torch_tensor(x):
        size = x.element_size()
        return x.data_ptr(), tuple(x.shape), tuple(s * size for s in x.stride()), size
    desc = getattr(x, "__cuda_array_interface__", None) or getattr(x, "__array_interface__", None)
    if desc is None:
        return None
    return desc["data"][0], tuple(desc["shape"]), desc.get("strides") or None, np.dtype(desc["typestr"]).itemsize


def span(x) -> tuple[int, int] | None:
    """(first byte, one past the last byte) of an array's memory, or None when unknown."""
    got = layout(x)
    if got is None:
        return None
    ptr, shape, strides, size = got
    if 0 in shape:
        return (ptr, ptr)
    if strides is None:
        return (ptr, ptr + math.prod(shape) * size)
    lo, hi = ptr, ptr + size  # (a plain loop: gemm's slow path makes two of these per call)
    for d, st in zip(shape, strides):
        if st < 0:
            lo += (d - 1) * st
        else:
            hi += (d - 1) * st
    return (lo, hi)


def self_overlapping(x) -> bool:
    """Can two of an array's elements share memory? True for a broadcast view (a stride of 0 on a
    dimension longer than 1) and whenever a stride, smallest first, is shorter than the extent of
    the dimensions inside it; so also for the rare interleaved layouts whose elements are in fact
    distinct (torch's `as_strided((3, 5), (2, 3))`), which this test cannot tell apart. Such an
    array cannot take a result: its elements could overwrite each other. False for an empty
    array, and where the layout is unknown."""
    if _torch_tensor(x):
        size, shape, strides = x.element_size(), tuple(x.shape), tuple(s * x.element_size() for s in x.stride())
    else:
        desc = getattr(x, "__cuda_array_interface__", None) or getattr(x, "__array_interface__", None)
        if desc is None or not desc.get("strides"):
            return False  # unknown, or C-contiguous
        size, shape, strides = np.dtype(desc["typestr"]).itemsize, tuple(desc["shape"]), tuple(desc["strides"])
    if 0 in shape:
        return False
    extent = size  # bytes covered by the dimensions taken so far, innermost (smallest stride) first
    for stride, n in sorted((abs(st), n) for n, st in zip(shape, strides) if n > 1):
        if stride < extent:
            return True
        extent = stride * (n - 1) + extent
    return False


OVERLAP_WORK = 100_000  # np.shares_memory's max_work for two layouts whose address ranges meet (past it: overlap)
_TOO_HARD = getattr(getattr(np, "exceptions", np), "TooHardError")  # (numpy.exceptions from NumPy 1.25)


class _Layout:
    """An array interface at an address, read by NumPy's memory-overlap solver alone (never dereferenced)."""

    def __init__(self, ptr: int, shape: tuple, strides: tuple | None, size: int):
        self.__array_interface__ = dict(version=3, data=(ptr, True), shape=shape, strides=strides,
                                        typestr=f"|V{size}")


def overlaps(x, y) -> bool:
    """Do two arrays share memory? Exact for any two arrays whose layouts are known (NumPy's
    solver over their addresses, shapes and strides: interleaved views such as buf[:, ::2] and
    buf[:, 1::2] share none), by address ranges only where a layout is not; True where the solver
    gives up (OVERLAP_WORK)."""
    if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
        return bool(np.shares_memory(x, y))
    if type(x).__name__ == "FakeCUDAArray" and type(y).__name__ == "FakeCUDAArray":
        return bool(np.shares_memory(x._ary, y._ary))
    sx, sy = span(x), span(y)
    if sx is None or sy is None:
        return x is y
    if sx[0] == sx[1] or sy[0] == sy[1]:  # (an empty array has no memory to share)
        return False
    if not (sx[0] < sy[1] and sy[0] < sx[1]):
        return False
    lx, ly = layout(x), layout(y)
    if lx[2] is None and ly[2] is None:  # (both contiguous: their ranges meet, so they share bytes)
        return True
    try:
        return bool(np.shares_memory(_stand_in(*lx), _stand_in(*ly), max_work=OVERLAP_WORK))
    except (_TOO_HARD, ValueError):  # (past the solver's work, or a layout NumPy cannot hold)
        return True


def _stand_in(ptr: int, shape: tuple, strides: tuple | None, size: int) -> np.ndarray:
    """An ndarray over the addresses of a layout, for np.shares_memory alone, without the
    dimensions that add no address (length 1, or stride 0: a broadcast, whose extent could pass
    intp where its memory is one row)."""
    if strides is not None:
        kept = [(n, st) for n, st in zip(shape, strides) if n > 1 and st != 0]
        shape, strides = tuple(n for n, _ in kept), tuple(st for _, st in kept)
    return np.asarray(_Layout(ptr, shape, strides, size))


# ---- to and from torch CUDA tensors (the tensor-core kernels) -----------------------------------


def to_torch_cuda(op: Operand):
    """A torch CUDA tensor for an operand: no copy for CUDA arrays (CUDA array interface), one
    host-to-device copy for NumPy arrays and torch CPU tensors."""
    import torch

    x = op.obj
    if op.kind == "torch":
        return x if x.is_cuda else x.cuda()
    if op.kind == "numpy":  # (host_view: this machine's byte order, no negative strides, writeable)
        return torch.from_numpy(host_view(op, torch_ok=True)).cuda()
    if op.kind == "cupy":
        return torch.as_tensor(x, device=f"cuda:{x.device.id}")
    # numba device arrays and other __cuda_array_interface__ objects
    return torch.as_tensor(x, device="cuda")


def to_kind(t, op: Operand):
    """Torch CUDA tensor t as the caller's kind (the kind of operand `op`)."""
    if op.kind == "torch":
        return t if op.obj.is_cuda else t.cpu()
    if op.kind == "numpy":
        return t.cpu().numpy()
    if op.kind == "cupy":
        import cupy

        return cupy.asarray(t)
    return _cuda.cuda.as_cuda_array(t)
