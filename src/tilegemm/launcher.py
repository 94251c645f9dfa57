"""Direct kernel launches: one driver call per kernel, with its arguments packed once.

A plan (`tilegemm.dispatch`) replays the launches of one product. The shapes, strides and dtypes
that key the plan fix everything a launch needs but the operands' addresses: the compiled
kernel, its grid and block, and every scalar argument. So each `Launch` keeps its kernel's
parameters in one buffer, laid out as the kernel reads them, and a call only rewrites the
addresses that moved (re-encoding a TMA descriptor only for an address it has not seen before)
and makes one `cuLaunchKernelEx` call through ctypes. Triton's own launcher parses and converts
every argument, and encodes every TMA descriptor, on every call (docs/perf-notes.md, 32).

Two kinds of compiled kernel are launched this way:
- Triton (and Gluon) kernels: the parameters are the non-constexpr arguments in signature order
  (a host TMA descriptor expands to the 128-byte CUtensorMap, then its shape as i32 and its
  strides as i64), then two scratch pointers (global and profile scratch, null here). This is
  the ABI of Triton 3.6 through 3.9's launchers (`triton/backends/nvidia/driver.py`); another
  version, or a kernel that needs scratch memory, clusters, PDL or a cooperative grid, is not
  launched here (`triton_launch` returns None and the caller goes through Triton).
- Numba kernels: an array argument expands to (meminfo, parent, size, itemsize, data, shape...,
  strides...) as 64-bit values (numba-cuda's `_Kernel._prepare_args`), scalars keep their width.

A launch's operands are *slots*: indices into the tuple of addresses the plan passes on each call
(A, B, C, ...). A Launch is shared state (its buffer): its caller serialises calls to it. A tensor argument that is not a slot is a constant (a kernel's persistent buffer)
and the launch keeps it alive. Nothing here imports torch, Triton or Numba at module level.
"""

from __future__ import annotations

import ctypes
import struct

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_CONTEXT = 201
PARAM_SCRATCH = 2  # Triton's trailing global-scratch and profile-scratch pointers
TRITON_ABI = ((3, 6), (3, 9))  # Triton versions whose launcher ABI this module follows (inclusive)
DESCRIPTOR_CACHE = 64  # encoded TMA descriptors kept per descriptor argument, by address


class LaunchError(RuntimeError):
    """A driver call failed; `code` is the CUresult."""

    def __init__(self, what: str, code: int):
        super().__init__(f"{what} failed: CUDA error {code} ({_driver().error_name(code)})")
        self.code = code


class _Config(ctypes.Structure):
    """CUlaunchConfig (cuda.h, CUDA 12+)."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


class _Driver:
    """The two driver entry points a launch needs, bound once through ctypes."""

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        self.launch = lib.cuLaunchKernelEx
        self.launch.argtypes = [ctypes.c_void_p] * 4
        self.launch.restype = ctypes.c_int
        self.encode = lib.cuTensorMapEncodeTiled
        self.encode.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                ctypes.c_int, ctypes.c_int]
        self.encode.restype = ctypes.c_int
        self._name = lib.cuGetErrorName
        self._name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        self._retain = lib.cuDevicePrimaryCtxRetain
        self._retain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        self._set_current = lib.cuCtxSetCurrent
        self._set_current.argtypes = [ctypes.c_void_p]

    def make_current(self, device: int) -> int:
        """Make `device`'s primary context current on this thread (a thread whose first CUDA work
        is a plan's launch has none; Triton's launcher does the same: ensureCudaContext)."""
        ctx = ctypes.c_void_p()
        rc = self._retain(ctypes.byref(ctx), device)
        return rc if rc != CUDA_SUCCESS else self._set_current(ctx)

    def error_name(self, code: int) -> str:
        out = ctypes.c_char_p()
        return out.value.decode() if self._name(code, ctypes.byref(out)) == 0 and out.value else "unknown"


_DRIVER: list = []


def _driver() -> _Driver:
    if not _DRIVER:
        _DRIVER.append(_Driver())
    return _DRIVER[0]


# ---- the parameter buffer ------------------------------------------------------------------------

# Triton signature type -> (struct format, size); floats are passed in their own width
_SCALARS = {
    "i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
    "u1": "B", "u8": "B", "u16": "H", "u32": "I", "u64": "Q",
    "fp16": "e", "fp32": "f", "f32": "f", "fp64": "d",
}
_U64 = struct.Struct("<Q")
TMAP_BYTES = 128


class Layout:
    """The kernel's parameters, in order: each a (format or 'tmap') at an offset in one buffer."""

    def __init__(self):
        self.fields: list[tuple[str, int]] = []  # (struct format or "tmap", offset)
        self.size = 0

    def add(self, fmt: str) -> int:
        size = TMAP_BYTES if fmt == "tmap" else struct.calcsize("<" + fmt)
        align = TMAP_BYTES if fmt == "tmap" else size
        off = -(-self.size // align) * align
        self.fields.append((fmt, off))
        self.size = off + size
        return off


class _Descriptor:
    """One TMA descriptor argument: how to encode it (all but the address fixed by the plan), where
    it goes in the buffer, and the encodings of the addresses seen so far."""

    __slots__ = ("offset", "slot", "dtype", "rank", "dims", "strides", "box", "ones", "swizzle", "fill", "seen")

    def __init__(self, offset, slot, dtype, shape, strides_bytes, box, swizzle, fill):
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        self.offset, self.slot, self.dtype, self.rank = offset, slot, dtype, len(shape)
        self.dims = (u64 * self.rank)(*reversed(shape))  # innermost first, as the driver wants
        self.strides = (u64 * max(self.rank - 1, 1))(*reversed(strides_bytes[:-1]))
        self.box = (u32 * self.rank)(*reversed(box))
        self.ones = (u32 * self.rank)(*([1] * self.rank))
        self.swizzle, self.fill = swizzle, fill
        self.seen: dict[int, bytes] = {}

    def encoded(self, address: int) -> bytes:
        got = self.seen.get(address)
        if got is None:
            out = (ctypes.c_char * (TMAP_BYTES + TMAP_BYTES))()
            where = -(-ctypes.addressof(out) // TMAP_BYTES) * TMAP_BYTES
            rc = _driver().encode(where, self.dtype, self.rank, address, self.dims, self.strides, self.box, self.ones,
                                  0, self.swizzle, 2, self.fill)  # interleave none, L2 promotion 128B
            if rc != CUDA_SUCCESS:
                raise LaunchError("cuTensorMapEncodeTiled", rc)
            got = ctypes.string_at(where, TMAP_BYTES)
            if len(self.seen) >= DESCRIPTOR_CACHE:
                self.seen.clear()
            self.seen[address] = got
        return got


class Launch:
    """One kernel launch of a plan: call it with the slots' addresses and a stream (raw handle)."""

    def __init__(self, function: int, grid, block, shared: int, layout: Layout, constants: list,
                 pointers: list[tuple[int, int]], descriptors: list[_Descriptor], keep=(), name: str = "",
                 device: int = 0):
        self.name, self.device = name, device
        self._buf = (ctypes.c_char * (layout.size + TMAP_BYTES))()
        base = -(-ctypes.addressof(self._buf) // TMAP_BYTES) * TMAP_BYTES
        self._base = base - ctypes.addressof(self._buf)  # offset of the aligned start in _buf
        self._params = (ctypes.c_void_p * len(layout.fields))(*(base + off for _, off in layout.fields))
        for (fmt, off), value in constants:
            struct.pack_into("<" + fmt, self._buf, self._base + off, value)
        self._pointers = [(self._base + off, slot) for off, slot in pointers]
        self._descriptors = descriptors
        for d in descriptors:
            d.offset += self._base
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        self._config = _Config(*grid, *block, shared, None, None, 0)
        self._config_ref = ctypes.c_void_p(ctypes.addressof(self._config))
        self._params_ref = ctypes.c_void_p(ctypes.addressof(self._params))
        self._function = ctypes.c_void_p(function)
        self._launch = _driver().launch if _DRIVER else self._bind_driver
        self._keep = tuple(keep)  # constant tensors the kernel reads (persistent buffers)
        self._addresses = None
        self._stream = None
        self.grid, self.block, self.shared = grid, block, shared

    def _bind_driver(self, *args) -> int:
        """The first launch of one made before the driver was bound (bound lazily, so that a Launch
        can be built and inspected where there is no driver): bind it, so that later calls go
        straight to cuLaunchKernelEx, then launch."""
        self._launch = _driver().launch
        return self._launch(*args)

    def bind(self, addresses: tuple) -> None:
        """Write the slots' addresses (and their descriptors) into the buffer."""
        buf = self._buf
        for off, slot in self._pointers:
            _U64.pack_into(buf, off, addresses[slot])
        for d in self._descriptors:
            ctypes.memmove(ctypes.addressof(buf) + d.offset, d.encoded(addresses[d.slot]), TMAP_BYTES)
        self._addresses = addresses

    def __call__(self, addresses: tuple, stream: int) -> None:
        if addresses != self._addresses:
            self.bind(addresses)
        if stream != self._stream:
            self._config.hStream = stream
            self._stream = stream
        rc = self._launch(self._config_ref, self._function, self._params_ref, None)
        if rc == CUDA_ERROR_INVALID_CONTEXT and _driver().make_current(self.device) == CUDA_SUCCESS:
            rc = self._launch(self._config_ref, self._function, self._params_ref, None)
        if rc != CUDA_SUCCESS:
            self._addresses = None
            raise LaunchError(f"cuLaunchKernelEx({self.name})", rc)

    def parameters(self) -> bytes:
        """The packed parameter bytes (for tests)."""
        return bytes(self._buf)[self._base:]


# ---- Triton kernels ------------------------------------------------------------------------------


def triton_version_ok(version: str) -> bool:
    try:
        v = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        return False
    return TRITON_ABI[0] <= v <= TRITON_ABI[1]


def _slot_of(x, slots) -> int | None:
    for i, s in enumerate(slots):
        if s is not None and x is s:
            return i
    return None


def _is_tensor(x) -> bool:
    return hasattr(x, "data_ptr") and callable(x.data_ptr) and not hasattr(x, "block_shape")


def triton_layout(signature: dict, args: list, tensordesc_meta, slots) -> tuple | None:
    """(layout, constants, pointer bindings, descriptor bindings, kept tensors) of a Triton kernel's
    parameters for `args` (every argument of the kernel, constexprs included, in order), or None
    where this module does not know how to pass one of them."""
    layout, constants, pointers, descriptors, keep = Layout(), [], [], [], []
    metas = list(tensordesc_meta or [])
    for (name, ty), value in zip(signature.items(), args):
        if ty == "constexpr":
            continue
        if not isinstance(ty, str):  # tuples of arguments: not used by tilegemm's kernels
            return None
        if ty.startswith("*"):
            off = layout.add("Q")
            slot = _slot_of(value, slots)
            if slot is not None:
                pointers.append((off, slot))
            elif value is None or isinstance(value, int):
                constants.append((("Q", off), value or 0))
            elif _is_tensor(value):
                constants.append((("Q", off), value.data_ptr()))
                keep.append(value)
            else:
                return None
        elif ty.startswith("tensordesc"):
            if not metas:
                return None
            meta = metas.pop(0)
            if meta is None or meta.get("fp4_padded") or meta.get("is_im2col") or getattr(value, "round_f32_to_tf32", False):
                return None
            slot = _slot_of(value.base, slots)
            if slot is None:
                return None
            shape, strides = [int(s) for s in value.shape], [int(s) for s in value.strides]
            if strides[-1] != 1:
                return None
            off = layout.add("tmap")
            elem = int(meta["elem_size"])
            descriptors.append(_Descriptor(off, slot, _TMA_HOST_DTYPE.get(int(meta["elem_type"]), int(meta["elem_type"])),
                                           shape, [s * elem for s in strides], [int(b) for b in meta["block_size"]],
                                           int(meta["swizzle"]), 1 if getattr(value, "padding", "zero") == "nan" else 0))
            for s in shape:
                constants.append((("i", layout.add("i")), s))
            for s in strides:
                constants.append((("q", layout.add("q")), s))
        elif ty in _SCALARS:
            fmt = _SCALARS[ty]
            constants.append(((fmt, layout.add(fmt)), float(value) if fmt in "efd" else int(value)))
        elif ty == "bf16":
            off = layout.add("H")
            constants.append((("H", off), struct.unpack("<I", struct.pack("<f", float(value)))[0] >> 16))
        else:
            return None
    if metas:
        return None
    for _ in range(PARAM_SCRATCH):
        constants.append((("Q", layout.add("Q")), 0))
    return layout, constants, pointers, descriptors, keep


# The TMA element type Triton's compiler records (device numbering) -> the driver's (host), as
# triton/backends/nvidia/driver.py's TMA_DTYPE_DEVICE_TO_HOST
_TMA_HOST_DTYPE = {8: 10, 9: 8, 10: 9}


def load_function(compiled, device: int) -> int:
    """The CUfunction of a Triton CompiledKernel on `device`, loaded once (without building Triton's
    C launcher, which compiles with the host's C compiler the first time a signature is seen)."""
    functions = getattr(compiled, "_tilegemm_functions", None)
    if functions is None:
        functions = compiled._tilegemm_functions = {}
    fn = functions.get(device)
    if fn is None:
        from triton.runtime.driver import driver

        got = driver.active.utils.load_binary(compiled.name, compiled.kernel, compiled.metadata.shared, device)
        fn = functions[device] = int(got[1])
    return fn


def triton_launch(compiled, grid, args: list, slots, device: int) -> Launch | None:
    """A Launch of Triton's compiled kernel `compiled` for `args` (all arguments in order), or None
    where it needs more than this module does (scratch memory, clusters, PDL, a cooperative grid)."""
    md = compiled.metadata
    if (getattr(md, "global_scratch_size", 0) or getattr(md, "profile_scratch_size", 0) or getattr(md, "num_ctas", 1) != 1
            or getattr(md, "launch_cooperative_grid", False) or getattr(md, "launch_pdl", False)):
        return None
    got = triton_layout(compiled.src.signature, args, getattr(md, "tensordesc_meta", None), slots)
    if got is None:
        return None
    layout, constants, pointers, descriptors, keep = got
    num_warps, _, shared = compiled.packed_metadata
    return Launch(load_function(compiled, device), grid, (32 * num_warps,), shared, layout, constants, pointers,
                  descriptors, keep, name=compiled.name, device=device)


# ---- Numba kernels -------------------------------------------------------------------------------


def numba_launch(kernel, grid, block, shared: int, args: list, slot_addresses: tuple, device: int = 0) -> Launch | None:
    """A Launch of numba-cuda's compiled `_Kernel` for `args` (Numba device arrays and scalars, as
    it was launched with), its arrays' data bound to the slots whose addresses they have; None where
    an array is not one of the slots (a temporary) or an argument is of a kind not handled here."""
    from numba.core import types

    layout, constants, pointers = Layout(), [], []
    for ty, value in zip(kernel.argument_types, args):
        if isinstance(ty, types.Array):
            ptr = value.__cuda_array_interface__["data"][0]
            if ptr not in slot_addresses:
                return None
            itemsize = value.dtype.itemsize
            strides = value.strides if value.strides else _c_strides(value.shape, itemsize)
            for v in (0, 0, value.size, itemsize):
                constants.append((("q", layout.add("q")), v))
            pointers.append((layout.add("Q"), slot_addresses.index(ptr)))
            for v in (*value.shape, *strides):
                constants.append((("q", layout.add("q")), v))
        elif isinstance(ty, types.Integer):
            fmt = {8: "b", 16: "h", 32: "i", 64: "q"}[ty.bitwidth]
            constants.append(((fmt.upper() if not ty.signed else fmt, layout.add(fmt)), int(value)))
        elif ty == types.float32 or ty == types.float64:
            fmt = "f" if ty == types.float32 else "d"
            constants.append(((fmt, layout.add(fmt)), float(value)))
        elif ty == types.boolean:
            constants.append((("B", layout.add("B")), int(bool(value))))
        else:
            return None
    handle = kernel._codelibrary.get_cufunc().handle
    return Launch(int(handle), grid, block, shared, layout, constants, pointers, [], name=str(kernel.entry_name),
                  device=device)


def _c_strides(shape, itemsize) -> tuple:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))
