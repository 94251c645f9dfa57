"""What the tensor-core rungs share on the host: the problem, its precision, the device's facts.

A `Problem` is one C = alpha·scale_a·scale_b·(A @ B) + beta·C on torch tensors, 2-D or batched
3-D (a 2-D operand broadcasts over the batch with stride 0). Every operand is passed with its
strides, so transposed views run without copies. A rung says what it launches for a problem and
a configuration as a list of `KernelCall`s; `tilegemm.dispatch` launches them (directly, through
`tilegemm.launcher`, or through Triton).
"""

from __future__ import annotations

import ctypes
import inspect
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from ..._cuda import driver_entry

SMEM_BUDGET = 227 * 1024  # bytes of shared memory one block may use on sm_90
INT32_MAX = 2**31 - 1

# precision name -> (torch input dtype, tl.dot input_precision)
PRECISIONS = {
    "fp16": (torch.float16, "ieee"),
    "bf16": (torch.bfloat16, "ieee"),
    "tf32": (torch.float32, "tf32"),
    "ieee": (torch.float32, "ieee"),
    "fp8": (None, "ieee"),  # float8_e4m3fn or float8_e5m2
}
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
# Hopper's FP8 MMA sums into an accumulator of fewer bits than FP32 (as cuBLAS's fast accumulation):
# at K = 8192 a product of one-signed operands was 15.6% off on the H100, where adding the partial sum
# to an FP32 accumulator every 128 of K (fast_accum=False) gave 0.010%, cuBLAS's default mode's error
# (docs/perf-notes.md, 145)
PROMOTE_K = 128


def precision_of(dtype: torch.dtype) -> str:
    """Default precision for an input dtype: FP32 means exact IEEE, never TF32 silently."""
    if dtype == torch.float16:
        return "fp16"
    if dtype == torch.bfloat16:
        return "bf16"
    if dtype == torch.float32:
        return "ieee"
    if dtype in FP8_DTYPES:
        return "fp8"
    raise TypeError(f"tensor-core kernels take float16, bfloat16, float32 or float8 inputs; got {dtype}")


# ---- the problem ------------------------------------------------------------------------------


@dataclass
class Problem:
    a: torch.Tensor  # (M, K) or (B, M, K)
    b: torch.Tensor  # (K, N) or (B, K, N)
    c: torch.Tensor  # (M, N) or (B, M, N), written
    precision: str  # key of PRECISIONS
    alpha: float = 1.0
    beta: float = 0.0
    c_in: torch.Tensor | None = None  # read when beta != 0 (may be c itself)
    scale_a: torch.Tensor | None = None  # one-element float32 tensors (FP8)
    scale_b: torch.Tensor | None = None
    fast_accum: bool = True  # FP8: the tensor cores' own accumulation (see promote)
    # where gemm converts an operand (a cast, FP8 quantisation: kernels.tensorcore._convert), the caller's tensors a
    # and b were made from (None: the operand itself) and the conversion's KernelCalls, launched before the rung's
    # (their scratch holds a, b and the scales they make): a launch plan reads the caller's tensors and replays them
    sources: tuple = (None, None)
    prologue: tuple = ()
    m: int = field(init=False)
    n: int = field(init=False)
    k: int = field(init=False)
    batch: int = field(init=False)

    def __post_init__(self):
        a, b, c = self.a, self.b, self.c
        self.m, self.k = a.shape[-2:]
        self.n = b.shape[-1]
        self.batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1,
                         c.shape[0] if c.dim() == 3 else 1)
        if b.shape[-2] != self.k:
            raise ValueError(f"inner dimensions differ: a {tuple(a.shape)}, b {tuple(b.shape)}")
        if c.shape[-2] != self.m or c.shape[-1] != self.n:
            raise ValueError(f"c has shape {tuple(c.shape)}; the product is {self.m}×{self.n}")
        for x, what in ((a, "a"), (b, "b"), (c, "c"), (self.c_in, "c_in")):
            if x is None:
                continue
            if x.dim() == 3 and x.shape[0] not in (1, self.batch):
                raise ValueError(f"{what}: batch {x.shape[0]} does not broadcast to {self.batch}")
        if c.dim() == 2 and self.batch > 1:
            raise ValueError("c must be 3-D for a batched product")

    @property
    def too_large(self) -> bool:
        """An operand's matrix spans more than 2^31 elements, past what int32 offsets reach: the
        rungs then compile their pointer arithmetic 64-bit (WIDE; TMA's addressing always is)."""
        return any(x is not None and span(x) > INT32_MAX for x in (self.a, self.b, self.c, self.c_in))

    @property
    def has_beta(self) -> bool:
        return self.beta != 0.0 and self.c_in is not None

    @property
    def bias_row(self) -> bool:
        """C_in is one row of N elements broadcast over every row and batch (a linear layer's bias,
        `bias.expand(M, N)`), added as it is (beta 1): N elements from memory where a C_in is M·N,
        so a shape's tuning without C_in is its tuning (`problem_class`), and t05 adds it too."""
        x = self.c_in
        return (self.has_beta and self.beta == 1.0 and x.stride(-1) == 1
                and all(st == 0 or d == 1 for d, st in zip(x.shape[:-1], x.stride()[:-1])))

    @property
    def in_dtype(self) -> torch.dtype:
        return self.a.dtype

    @property
    def dot_precision(self) -> str:
        return PRECISIONS[self.precision][1]

    @property
    def promoted(self) -> bool:
        """FP8 without fast_accum: the MMA's partial sums are added into FP32 (see promote)."""
        return self.precision == "fp8" and not self.fast_accum

    def promote(self, bk: int) -> int:
        """The K span after which an FP8 MMA's partial sum is added to an FP32 accumulator (tl.dot's
        max_num_imprecise_acc), at most the k-step bk; 0: never (16-bit and TF32 MMAs accumulate in
        FP32 anyway; FP8 with fast_accum keeps the tensor cores' own sum)."""
        return min(PROMOTE_K, bk) if self.promoted else 0

    def bstride(self, x) -> int:
        """Batch stride, 0 for a 2-D operand (broadcast) or a batch of one."""
        return x.stride(0) if x is not None and x.dim() == 3 and x.shape[0] > 1 else 0

    def mat_strides(self, x) -> tuple[int, int]:
        return x.stride(-2), x.stride(-1)

    def layout(self) -> str:
        """'n' when an operand's rows are contiguous (row-major), 't' when its columns are."""
        def one(x):
            s0, s1 = self.mat_strides(x)
            return "n" if s1 == 1 else ("t" if s0 == 1 else "s")
        return one(self.a) + one(self.b)

    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k


def scale_tensor(s, device) -> torch.Tensor:
    """A per-tensor scale as a one-element float32 tensor on `device`: a tensor's (no host sync), or
    a number's `fixed_scale`."""
    if isinstance(s, torch.Tensor):
        if s.numel() != 1:
            raise ValueError(f"per-tensor scales only: got a scale with {s.numel()} elements")
        return s.reshape(1).to(device=device, dtype=torch.float32).resolve_neg()  # (the kernels read its memory)
    return fixed_scale(float(s.item() if hasattr(s, "item") else s), device)  # (an array's one element: float() of
    # a 1-D NumPy array is deprecated)


FIXED_SCALES_MAX = 64  # numbers whose scale tensors a process keeps, over its devices (past it: made for a call)
_FIXED: dict = {}  # (device, the number's bits) -> its one-element float32 tensor, never freed
_FIXED_IDS: set = set()  # id() of each: `is_fixed`
_FIXED_LOCK = threading.Lock()


def fixed_scale(v: float, device) -> torch.Tensor:
    """v as a one-element float32 tensor on `device`, made once a process per (device, v) and never
    freed: a launch plan keeps its address and serves every stream and a graph's capture with it (a
    tensor made for one call is filled on that call's stream and freed on it with the plan: a plan
    of one is bound to that stream, docs/perf-notes.md, 154). Made apart from the caller's thread
    and streams (`made_apart`). A number not kept yet gets a tensor for the call alone under a
    capture (its fill is the graph's, run only by a replay), on the CPU, under a dispatch mode (a
    fake tensor's), where torch gives a tensor subclass, and past FIXED_SCALES_MAX numbers (made
    apart too, on the call's stream: the call's plan keeps it)."""
    key = (device, v.hex())  # (bits: -0.0 is not 0.0's tensor; every NaN is one)
    t = _FIXED.get(key)
    if t is not None:
        return t
    dev = torch.device(device)
    fill = lambda: torch.full((1,), v, dtype=torch.float32, device=device)  # noqa: E731
    if dev.type != "cuda" or torch._C._len_torch_dispatch_stack():
        return fill()
    with torch.cuda.device(dev):
        if torch.cuda.is_current_stream_capturing():  # (the capture's: its pool, filled by its replay)
            return fill()
    if len(_FIXED) >= FIXED_SCALES_MAX:
        return made_apart(fill, dev, on_callers_stream=True)
    t = made_apart(fill, dev, on_callers_stream=False)
    if type(t) is not torch.Tensor:
        return t
    with _FIXED_LOCK:  # (two threads' first calls: one tensor kept; is_fixed true of it before it is found)
        held = _FIXED.get(key)
        if held is not None:
            return held
        _FIXED_IDS.add(id(t))
        _FIXED[key] = t
    return t


CAPTURE_MODE_RELAXED = 2  # CU_STREAM_CAPTURE_MODE_RELAXED (cuda.h)
PER_THREAD_STREAM = 2  # cudaStreamPerThread's handle (torch.cuda.ExternalStream(2): CuPy's per-thread default stream)


def made_apart(make, dev, on_callers_stream: bool) -> torch.Tensor:
    """make(), for memory tilegemm keeps past the call (a fixed scale, a stream's arena or tile
    counters), in a thread of its own with dev current: never in a pool the caller's thread
    allocates to (torch.cuda.use_mem_pool routes that thread's allocations alone; kept memory there
    would hold the pool for good, and a pool whose memory is given up and mapped again, as a
    server's sleep mode does, would lose what it holds: a scale, zeroed counters).
    on_callers_stream: make() runs on the caller's current stream (an arena's, counters': its
    memory is that stream's, as the caller's own allocation is, and what make() enqueues runs
    before the caller's next launch there); else on a stream of its own, which the thread waits
    for (that fill alone, no stream of the caller's: the thread's capture mode relaxed, so that
    another thread's graph capture in torch's default mode is not failed by it). In the caller's
    thread where no thread can start (at exit), where the caller's stream is CUDA's per-thread
    default (a handle that names another stream in another thread), and for a device not CUDA's
    (the interpreter's CPU)."""
    if getattr(dev, "type", None) != "cuda" or sys.is_finalizing():  # (at exit a thread may never start)
        return make()
    if dev.index is None:  # (the caller's current GPU, not the new thread's)
        dev = torch.device("cuda", torch.cuda.current_device())
    stream = torch.cuda.current_stream(dev) if on_callers_stream else None
    if stream is not None and stream.cuda_stream == PER_THREAD_STREAM:  # another stream in another thread
        return make()
    box = []

    def run():
        try:
            _relax_capture_mode()
            with torch.cuda.device(dev):
                own = torch.cuda.Stream() if stream is None else stream
                with torch.cuda.stream(own):
                    t = make()
                if stream is None:
                    own.synchronize()
            box.append(t)
        except BaseException as e:  # (out of memory: the caller's error)
            box.append(e)

    worker = threading.Thread(target=run, name="tilegemm kept memory", daemon=True)
    try:
        worker.start()
    except RuntimeError:  # (can't create new thread at interpreter shutdown)
        run()
    else:
        worker.join()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def _relax_capture_mode() -> None:
    """This thread's stream-capture interaction mode made relaxed (the driver's
    cuThreadExchangeStreamCaptureMode): its synchronisation of a stream of its own is then no
    unsafe call, which would fail, and fail a graph's capture, while another thread captures in
    torch's default (global) mode."""
    try:  # (bound once a process)
        exchange = driver_entry("cuThreadExchangeStreamCaptureMode", ctypes.POINTER(ctypes.c_int))
    except (OSError, AttributeError):  # (no driver: torch's own calls say so)
        return
    exchange(ctypes.byref(ctypes.c_int(CAPTURE_MODE_RELAXED)))


def is_fixed(t) -> bool:
    """Is t a `fixed_scale` (filled before any launch reads it, and never freed)?"""
    return id(t) in _FIXED_IDS


# ---- device facts, cached ---------------------------------------------------------------------

_DEV: dict = {}  # device index -> (multiprocessor count, (major, minor), name): read once per process


def _dev_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def device_facts(device: torch.device) -> tuple[int, tuple[int, int], str]:
    """(SM count, compute capability, name) of a CUDA device, cached: get_device_properties costs
    microseconds per call, which a small product cannot afford on every launch."""
    idx = _dev_index(device)
    facts = _DEV.get(idx)
    if facts is None:
        prop = torch.cuda.get_device_properties(idx)
        facts = _DEV[idx] = (prop.multi_processor_count, (prop.major, prop.minor), prop.name)
    return facts


def num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter: any small number exercises the persistent loop
    return device_facts(device)[0]


def capability(device: torch.device) -> tuple[int, int]:
    if device.type != "cuda":
        return (9, 0)  # the interpreter takes the sm_90 paths (TMA descriptors are emulated)
    return device_facts(device)[1]


def gpu_name(device: torch.device) -> str:
    if device.type != "cuda":
        return "interpreter"
    return device_facts(device)[2]


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _interpreter_numpy_shim() -> None:
    """Triton 3.6's interpreter turns a scalar tensor into an int with int(ndarray of shape (1,)),
    which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted"), so any loop bounded
    by a run-time scalar fails under TRITON_INTERPRET=1. Re-patch `__index__` to take the one
    element. Only ever installed in interpreter mode."""
    import numpy as np
    from triton.runtime import interpreter as interp

    if getattr(interp, "_tilegemm_shim", False) or not hasattr(interp, "_patch_lang_tensor"):
        return
    original = interp._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interp._patch_lang_tensor = patched
    interp._tilegemm_shim = True


if interpreting():
    _interpreter_numpy_shim()


# ---- which MMA form a problem's layouts allow ---------------------------------------------------


def reg_a(p: "Problem", swap: bool) -> bool | None:
    """Whether the MMA's A operand must come from registers for p's layouts, computing C = A·B
    (swap False) or C^T = B^T·A^T (swap True); None when no choice works without a copy.
    16-bit wgmma reads either layout from shared memory. 32- and 8-bit wgmma read the B operand
    only K-major, and the A operand K-major or from registers."""
    if p.a.element_size() == 2:
        return False
    a_k, b_k = is_kmajor(p.a, "a"), is_kmajor(p.b, "b")
    mma_a_k, mma_b_k = (b_k, a_k) if swap else (a_k, b_k)
    if not mma_b_k:
        return None
    return not mma_a_k


def stage_bytes(cfg: dict, in_size: int) -> int:
    """One stage of a configuration's main-loop ring in shared memory: an A tile and a B tile."""
    return (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * in_size


def mma_form(cfg: dict) -> dict:
    """A configuration's SWAP and REG_A launch arguments (REG_A off under the interpreter, which
    has no inline assembly)."""
    return {"SWAP": bool(cfg.get("SWAP")), "REG_A": bool(cfg.get("REG_A")) and not interpreting()}


def is_kmajor(x: torch.Tensor, which: str) -> bool:
    """Is operand `which` ("a": M×K, "b": K×N) stored with K contiguous?"""
    return x.stride(-1) == 1 if which == "a" else x.stride(-2) == 1


def swap_form(p: "Problem", bm: int) -> dict | None:
    """The swapped form (C^T = B^T·A^T) worth trying for a tile of bm rows, or None: where a tile
    under 64 rows would otherwise miss wgmma (its M is 64; swapped, the tile is its N, 8…256), or
    where the plain form needs a copy. Not for bm > 128 (wgmma N = 256): Triton 3.6 computed 0.7%
    of C wrong there on the H200."""
    swapped = reg_a(p, True)
    if swapped is None or bm > 128 or not (bm < 64 or reg_a(p, False) is None):
        return None
    return {"SWAP": True, "REG_A": swapped}


def swapped_tf32(p: Problem) -> bool:
    """TF32 with a row-major B: the plain form's B operand would be N-major, which 32-bit wgmma
    cannot read (reg_a finds no plain form), so t05 computes C^T = B^T·A^T."""
    return p.a.element_size() == 4 and reg_a(p, False) is None


def epilogue_args(p: Problem):
    """(c_in, scale_a, scale_b) tensors to pass; unused ones point at c (never read)."""
    c_in = p.c_in if p.has_beta else p.c
    sa = p.scale_a if p.scale_a is not None else p.c
    sb = p.scale_b if p.scale_b is not None else p.c
    return c_in, sa, sb


class KernelCall(NamedTuple):
    """One launch a rung asks for: the @triton.jit (or @gluon.jit) function, its grid, every argument
    in the function's order (constexprs included), the compile options (num_warps, num_stages,
    maxnreg) and the tensors among the arguments that are scratch (written before read within the
    call: a plan allocates them afresh for each call; every other tensor that is not an operand is
    a persistent buffer the plan keeps). stream_bound: a persistent buffer belongs to the stream
    the call was made on (t04's tile counters), so a plan of it runs on that stream only."""

    fn: object
    grid: tuple
    args: list
    options: dict
    scratch: tuple = ()
    stream_bound: bool = False


_PARAMS: dict = {}


def ordered(fn, args: tuple = (), **kwargs) -> list:
    """Kernel fn's arguments in its parameter order: `args` first, then the rest by name (a
    parameter not given takes its default). fn: a @triton.jit or @gluon.jit function (or the
    interpreter's stand-in for one)."""
    params = _params(fn)
    out = list(args)
    for p in params[len(args):]:
        if p.name in kwargs:
            out.append(kwargs[p.name])
        elif p.default is not inspect.Parameter.empty:
            out.append(p.default)
        else:
            raise TypeError(f"{p.name!r}: no value for this argument of {fn.fn.__name__}")
    return out


def compile_for_sm90(call: KernelCall):
    """call's kernel compiled for sm_90 without a GPU (Triton's bundled ptxas), specialised as a
    launch is (an integer argument of 1 a constant; integers that are multiples of 16 and
    16-byte-aligned pointers marked divisible by 16): the CompiledKernel, or Triton's error where
    this Triton cannot compile that form."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import mangle_type

    fn = call.fn
    consts, sig, attrs = {}, {}, {}
    for i, (name, value, param) in enumerate(zip(fn.arg_names, call.args, fn.params)):
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if param.is_constexpr or value is None or (is_int and value == 1):
            consts[name], sig[name] = value, "constexpr"
            continue
        sig[name] = mangle_type(value)
        if (isinstance(value, torch.Tensor) and value.data_ptr() % 16 == 0) or (is_int and value % 16 == 0):
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton_compile(src, target=GPUTarget("cuda", 90, 32), options=dict(call.options))


def named(call: KernelCall) -> dict:
    """A call's arguments by its function's parameter names (`ordered`'s inverse)."""
    return dict(zip((p.name for p in _params(call.fn)), call.args))


def _params(fn) -> list:
    params = _PARAMS.get(fn)
    if params is None:
        params = _PARAMS[fn] = list(inspect.signature(fn.fn).parameters.values())
    return params


def take(x: torch.Tensor, dim: int, idx: torch.Tensor) -> torch.Tensor:
    """index_select, through a uint8 view for FP8 (the same bytes)."""
    if x.element_size() == 1 and x.is_floating_point():
        return x.view(torch.uint8).index_select(dim, idx).view(x.dtype)
    return x.index_select(dim, idx)


def span(x) -> int:
    """Elements from a matrix's first to its last, by its strides: what a kernel's offsets must reach."""
    (rows, cols), (s0, s1) = x.shape[-2:], x.stride()[-2:]
    return (rows - 1) * abs(s0) + (cols - 1) * abs(s1) if rows and cols else 0


def problem_2d(a, b, c) -> Problem:
    """The registry's launch(a, b, c): C = A @ B with the precision the input dtype implies."""
    return Problem(a, b, c, precision_of(a.dtype))
