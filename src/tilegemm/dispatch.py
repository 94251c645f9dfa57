"""One path from operands to a launch, for `matmul` and `gemm`: operands → plan → configuration → launch.

A call is keyed by everything that decides its launches except the operands' addresses: the
shapes, strides, dtypes and device of torch CUDA operands, their 16-byte alignment (Triton
specialises pointers on it, TMA needs it), and for `gemm` its precision, output dtype, alpha,
beta, output and scales. The first call of a key takes the slow path: the API's checks, the
kernel (`api`), the rung and configuration (`tilegemm.tuning.choose`: the user's cache, the
shipped database, a heuristic; never a tuning unless TILEGEMM_AUTOTUNE=1), the rung's launches
compiled and run, and kept as a *launch plan* (`tilegemm.launcher`). A later call of the key is a
dictionary hit, an allocation of the output, and one driver call per kernel: no checks (the key
says they passed), no device queries, no Triton or Numba argument handling
(docs/perf-notes.md, 32).

A call that another planned call serves on views of its operands (an N-D matmul that `nd`
runs as one 2-D or batched product; a patched linear layer's x @ Wᵀ) is kept under its own key
as a `ViewPlan` of that plan. Plans exist for torch CUDA tensors on a real GPU (the SIMT path's
too: its Numba kernels, a strided operand's contiguous copy among them, are recorded as they
launch and replayed the same way). Everything else, and any launch the launcher
cannot replay (a K-major copy, Triton's interpreter, another Triton's ABI), takes the slow path
every call, through Triton's or Numba's own launchers. TILEGEMM_FAST_LAUNCH=0 turns plans off.
A captured CUDA graph records a plan's launches like any other (they go to torch's current
stream).
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import warnings

import numpy as np

from . import _cuda, arrays, env, launcher
from .arrays import Operand
from .errors import OutOfDeviceMemory, says_out_of_memory

PLAN_MAX = 4096  # call keys whose plans a process keeps (a new one past this empties the table)
_PLANS: dict = {}  # call key -> LaunchPlan (or a ViewPlan of one)
ARENA_MAX_BYTES = 256 << 20  # the streams' scratch arenas, all together (past it, a call allocates its own)
_ARENAS: dict = {}  # (device index, raw stream) -> _Arena
_ARENAS_LOCK = threading.Lock()  # a new or larger arena: the bound checked and the table changed at once
fallbacks: dict[str, str] = {}  # what ran instead of the chosen rung, and why (once per rung and class)
STATS = {"slow_calls": 0, "plans_built": 0, "not_planned": {}}  # the slow path's counters (the hot path counts nothing)


class _NoTensor:  # stands for torch.Tensor until torch is in use: no object is one
    pass


NO_MEMORY = 1 << 20  # a storage starting below this is no allocation's: a tensor whose storage has no memory (a
# ZeroTensor, a functionalization wrapper, a storage resized to 0: null, its data_ptr only its offset, which for a
# view into a large freed buffer, FSDP's, is past any fixed bound); the fast paths give it to the slow path, which
# refuses it (arrays.describe). No device or host allocation lies in the first MiB.
LOW_ADDRESS = 1 << 40  # a data_ptr at or above this is no null storage's offset (a 1 TiB view); below it (no device
# allocation on Linux's UVA lies there, ~2**47, nor a PIE heap's) the fast paths ask where the storage starts


def no_memory(x, p: int) -> bool:
    """Does torch tensor x, whose data_ptr is p, lie in a storage with no memory (`NO_MEMORY`)?
    Its storage's start, p less its offset: 0 for a ZeroTensor, a functionalization wrapper or a
    freed storage's view at any offset (about 0.1 µs; the fast paths ask only below LOW_ADDRESS)."""
    return p - x.storage_offset() * x.itemsize < NO_MEMORY


_PLAIN: tuple = (_NoTensor,)  # torch.Tensor and nn.Parameter once torch is in use (not subclasses)
_empty = _empty_strided = _raw_stream = _current_device = _exchange_device = _maybe_exchange_device = None
_grad_enabled = _capturing = _strided = _fwad = None
_transforms = _bump = tracing = _inference_mode = None  # torch._C._are_functorch_transforms_active,
# _increment_version, _is_tracing and torch.is_inference_mode_enabled, once torch is in use


def _bind_torch() -> None:
    """The torch functions the hot path calls, bound once (torch is imported by the caller's tensors)."""
    global _PLAIN, _empty, _empty_strided, _raw_stream, _current_device, _exchange_device, _maybe_exchange_device
    global _grad_enabled, _capturing, _strided, _fwad, _transforms, _bump, tracing, _inference_mode
    if _empty_strided is not None:  # (the last bound, below)
        return
    import torch
    import torch.autograd.forward_ad

    _PLAIN = (torch.Tensor, torch.nn.Parameter)
    _fwad = torch.autograd.forward_ad  # (its _current_level: -1 outside a dual level)
    _transforms = torch._C._are_functorch_transforms_active  # (functionalize's tensors have a data_ptr: 0)
    _bump = torch._C._increment_version  # (torch.autograd.graph.increment_version's own call; of a tuple: 0.16 µs on
    # this CPU, where one tensor is iterated as a sequence, its rows each bumped: 2.8 µs)
    tracing = torch._C._is_tracing  # (torch.jit.trace: a product the tracer does not see is recorded as a constant;
    # inside an operator's body it reads False)
    _grad_enabled = torch.is_grad_enabled
    _inference_mode = torch.is_inference_mode_enabled
    _strided = torch.strided
    # (a CPU build of torch has neither stream nor device queries; no plan exists there to ask them)
    _empty = torch.empty
    _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _current_device = getattr(torch._C, "_cuda_getDevice", None)
    # torch.cuda.device's own pair: the way back makes no CUDA context on a GPU that has none (cudaSetDevice would)
    # (torch._C's _cuda_exchangeDevice and _cuda_maybeExchangeDevice in a CUDA build)
    _exchange_device = torch.cuda._exchange_device
    _maybe_exchange_device = torch.cuda._maybe_exchange_device
    _capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
    _empty_strided = torch.empty_strided  # a call's output: 1–2.5 µs a call less than torch.empty(shape, ...) (perf-notes 74)


def plain(x) -> bool:
    """Is x a torch.Tensor (or an nn.Parameter), not a subclass a plan cannot read the memory of?"""
    _bind_torch()
    return type(x) in _PLAIN


def enabled() -> bool:
    return env.flag("TILEGEMM_FAST_LAUNCH", True)


def reset() -> None:
    """Forget every launch plan (the configurations they were built from may have changed): run by
    tilegemm.tuning.cache.reset(), which tilegemm.tuning registers it with."""
    _PLANS.clear()
    with _ARENAS_LOCK:
        _ARENAS.clear()


# ---- the hot path -----------------------------------------------------------------------------------


ALIGNS = 127  # an operand's address bits that decide its launches: Triton compiles a pointer it sees 16-byte
# aligned as such, and t03's PAD copies an operand whose rows are 16- but not 128-byte aligned (a plan made for
# a view 64 bytes in copied every aligned operand after it, and one made for an aligned operand left a view's
# rows across two L2 lines each)


def matmul_key(a, b, pa: int, pb: int) -> tuple:
    """What decides matmul's launches but the addresses; each operand's own alignment (ALIGNS)
    and its own device."""
    return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.get_device(), b.get_device(), pa & ALIGNS,
            pb & ALIGNS)


def wants_grad(a, b) -> bool:
    """Would torch record a gradient for a product of a and b (tensors that require it, grad mode on)?"""
    return (a.requires_grad or b.requires_grad) and _grad_enabled()


def traced(a, b) -> bool:
    """Are a and b torch tensors (plain) under torch.jit.trace? Asked of a loaded torch only: a
    NumPy product imports none."""
    if getattr(sys.modules.get("torch"), "Tensor", None) is None:  # (none, or another thread's import under way)
        return False
    _bind_torch()
    return type(a) in _PLAIN and type(b) in _PLAIN and tracing()


@contextlib.contextmanager
def checked_in_trace():
    """A traced call's checks of shapes and dtypes, with the tracer paused: they read sizes as
    ints and record nothing, and raise none of the tracer's warnings (that the value "will be
    treated as a constant": the trace keeps them as it keeps the shapes; the operator's body checks
    each call's own). The tracer's state is the thread's own, where a warnings filter would be the
    process's (another thread's warnings dropped meanwhile)."""
    torch = sys.modules["torch"]
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    try:
        yield
    finally:
        torch._C._set_tracing_state(state)


def written(x) -> None:
    """x, a torch tensor a kernel has written in place (matmul's out, gemm's c), has its version
    counter moved on, as torch's in-place operations move it: a backward that saved x's old values
    (x = w.exp(), then matmul(a, b, out=x.detach()) under no_grad) then raises torch's "modified by
    an inplace operation" instead of computing its gradient from the new values."""
    torch = sys.modules.get("torch")  # (no torch loaded: x is no tensor)
    if torch is not None and isinstance(x, getattr(torch, "Tensor", ())):  # (no Tensor yet while another
        _bind_torch()  # thread's import is under way)
        _bump((x,))


def transformed(x) -> str | None:
    """"wrapped" for a tensor of a torch.func transform (vmap, grad, jacrev, jvp, functionalize: a
    wrapper with no memory of its own), "dual" for a forward-mode AD dual tensor (its tangent would
    not be carried: the result would have none), None for anything else."""
    torch = sys.modules.get("torch")
    tensor = getattr(torch, "Tensor", None)  # (None too while another thread's `import torch` is under way)
    if tensor is None or not isinstance(x, tensor):
        return None
    if torch._C._functorch.is_functorch_wrapped_tensor(x):
        return "wrapped"
    fwad = torch.autograd.forward_ad
    return "dual" if fwad._current_level >= 0 and fwad.unpack_dual(x).tangent is not None else None


def refuse_transformed(who: str, *named) -> None:
    """A transformed tensor (`transformed`) among the (tensor, name) pairs: refused in words. The
    fast paths give calls in a dual level or under a transform to the slow path, which asks this."""
    from .errors import AutogradError

    for x, what in named:
        kind = transformed(x)
        if kind == "wrapped":
            raise AutogradError(f"{who}: {what} is a torch.func transform's tensor (vmap, grad, jacrev, jvp), which "
                                "has no memory of its own for a kernel to read; call torch.matmul inside the transform "
                                "(a model under tilegemm.patch does)")
        if kind == "dual":
            raise AutogradError(f"{who}: {what} is a forward-mode AD dual tensor, and tilegemm's kernels carry no "
                                "tangent (the result would have none); call torch.matmul under forward-mode AD (a "
                                "model under tilegemm.patch does)")


def out_key(c) -> tuple:
    """What of matmul's out= decides the launches: its shape, strides, dtype, device and 16-byte
    alignment (a plan for out= is kept under matmul_key + this)."""
    return (c.shape, c.stride(), c.dtype, c.get_device(), c.data_ptr() & 15)


def plannable_out(out) -> bool:
    """A call whose out= (if any) a plan can write: none, or a plain torch CUDA tensor."""
    return out is None or (type(out) in _PLAIN and out.is_cuda)


def call_key(a, b, out=None) -> tuple:
    """The plan's key of matmul(a, b, out=out): matmul_key, and out_key where there is an out."""
    return matmul_key(a, b, a.data_ptr(), b.data_ptr()) + (() if out is None else out_key(out))


def fast_matmul(a, b, out=None):
    """`matmul(a, b, out=out)` by its launch plan, or None (no plan: the caller takes the slow
    path, which also says what is wrong with an out that no plan was built for). An out that
    overlaps a or b finds its plan but is refused here, so the slow path names the problem. A lazy
    negation (torch's neg bit) among the tensors has the same key as its memory, whose values are
    the negated ones: the slow path multiplies its values."""
    if (type(a) not in _PLAIN or type(b) not in _PLAIN or wants_grad(a, b) or a.is_neg() or b.is_neg()
            or _fwad._current_level >= 0 or _transforms() or tracing()):  # (a dual level, a torch.func transform:
        return None  # the slow path's refuse_transformed asks whether a tangent or a wrapper is there; a trace: the
        # slow path records tilegemm's operator)
    try:
        pa, pb = a.data_ptr(), b.data_ptr()
        key = matmul_key(a, b, pa, pb)
    except RuntimeError:  # no storage (sparse, MKL-DNN), no sizes (a nested tensor of strided layout): the
        return None  # slow path names the layout
    if (pa < LOW_ADDRESS and no_memory(a, pa)) or (pb < LOW_ADDRESS and no_memory(b, pb)):  # no memory (a
        return None  # ZeroTensor, a freed storage's view, ...): the slow path refuses it
    if out is None:
        plan = _PLANS.get(key)
        return None if plan is None else plan.run(pa, pb, None, 0, 0)
    if (type(out) not in _PLAIN or (out.requires_grad and _grad_enabled()) or out.is_neg()
            or (out.is_inference() and not _inference_mode())):  # (an out that requires grad is the slow path's
        return None  # AutogradError with grad mode on, and written as any out under no_grad; one written outside
        # inference mode: refused)
    try:
        pc = out.data_ptr()
        key += out_key(out)
    except RuntimeError:  # (as a's and b's: the slow path names out's layout)
        return None
    plan = _PLANS.get(key)
    if plan is None or (pc < LOW_ADDRESS and no_memory(out, pc)) or plan.overlaps(pa, pb, pc):
        return None
    c = plan.run(pa, pb, out, 0, 0)
    _bump((out,))  # (written's)
    return c


def linear_key(x, w, px: int, pw: int) -> tuple:
    """The call key of a patched linear layer's product x @ wᵀ (torchop): x of any rank whose
    leading dimensions fold into rows, w the layer's (N, K) weight as it is stored."""
    return ("linear", x.shape, w.shape, x.stride(), w.stride(), x.dtype, w.dtype, x.get_device(), w.get_device(),
            px & ALIGNS, pw & ALIGNS)


class ViewPlan:
    """A call by the plan of another call on views of its operands that start where they do (a
    linear layer's x @ Wᵀ by matmul(x.view(-1, K), W.t()); an N-D matmul by the one 2-D or batched
    product `nd` runs it as): the same launches at the same addresses, the output made in this
    call's shape (the plan's output is contiguous, so only its shape differs). A call makes none of
    the views, checks or broadcasts of its first call."""

    __slots__ = ("plan", "out_shape", "view")

    def __init__(self, plan: LaunchPlan, out_shape: tuple):
        self.plan, self.out_shape = plan, tuple(out_shape)
        self.view = (self.out_shape, tuple(math.prod(self.out_shape[i + 1:]) for i in range(len(self.out_shape))))

    def run(self, pa: int, pb: int, c=None, psa: int = 0, psb: int = 0, pi: int = 0):
        """The plan's launches (c is None: a view plan is kept only for calls without out=; pi: a
        bias row's address, for a plan that adds one)."""
        return self.plan.run(pa, pb, c, psa, psb, self.view, pi)


class AddBias:
    """A linear layer's x @ wᵀ + bias where the bias is not added in the kernel's epilogue (a bias
    torchop's `_epilogue` refuses: strided, of another dtype or device, or on a rung without that
    epilogue): the product by its view plan, then the bias added by torch, in place where it is of
    y's dtype."""

    __slots__ = ("plan", "in_place")

    def __init__(self, plan: ViewPlan, in_place: bool):
        self.plan, self.in_place = plan, in_place


def fast_linear(x, w, bias=None):
    """x @ wᵀ (+ bias) by the plan of an earlier call like it (`remember_linear`, `linear_bias`),
    or None (as fast_matmul's, for a lazy negation too). The caller (a patched layer in inference)
    has checked that no gradient is wanted."""
    if (type(x) not in _PLAIN or type(w) not in _PLAIN or x.layout is not _strided or w.layout is not _strided
            or x.is_neg() or w.is_neg()):
        return None
    try:
        px, pw = x.data_ptr(), w.data_ptr()
        key = linear_key(x, w, px, pw)
    except RuntimeError:  # a nested tensor of strided layout: no sizes (the caller's slow path gives it to torch)
        return None
    if (px < LOW_ADDRESS and no_memory(x, px)) or (pw < LOW_ADDRESS and no_memory(w, pw)):  # (as fast_matmul's)
        return None
    if bias is None:
        plan = _PLANS.get(key)
        return None if plan is None else plan.run(px, pw)
    if type(bias) not in _PLAIN or bias.layout is not _strided or bias.is_neg():
        return None
    pi = bias.data_ptr()
    plan = _PLANS.get(key + bias_key(bias, pi))
    if plan is None or (pi < LOW_ADDRESS and no_memory(bias, pi)):
        return None
    if type(plan) is ViewPlan:  # the bias added in the kernel's epilogue
        return plan.run(px, pw, None, 0, 0, pi)
    y = plan.plan.run(px, pw)
    return None if y is None else y.add_(bias) if plan.in_place else y + bias


def bias_key(bias, pi: int) -> tuple:
    """What of a linear layer's bias decides its launches: shape, strides, dtype, device, alignment."""
    return (bias.shape, bias.stride(), bias.dtype, bias.get_device(), pi & 15)


def remember_linear(x, w, rows, wt, bias=None) -> None:
    """After matmul(rows, wt) ran, rows being x's rows (x.reshape(-1, K)) and wt being w.t(): keep
    that call's plan as x @ wᵀ's too (with bias: x @ wᵀ + bias's, the bias added after it by
    torch), where there is one and rows starts where x does (a view: a reshape that copied would
    leave the plan reading the copy's address, not x's)."""
    if not x.numel() or rows.data_ptr() != x.data_ptr():
        return
    key, shape = linear_key(x, w, x.data_ptr(), w.data_ptr()), (*x.shape[:-1], wt.shape[1])
    if bias is None:
        _keep_view(key, call_key(rows, wt), shape, None)
        return
    view = _view_of(_PLANS.get(call_key(rows, wt)), shape, None)
    if view is not None and type(bias) in _PLAIN:
        in_place = bias.dtype is view.plan.out_dtype and bias.get_device() == view.plan.index
        _store(key + bias_key(bias, bias.data_ptr()), AddBias(view, in_place))


def linear_bias(x, w, bias, rows, wt, kern):
    """x @ wᵀ + bias with the bias added in the kernel's epilogue (one launch, as cuBLASLt's bias
    epilogue does for nn.Linear), rows being x's rows and wt w.t(): torch CUDA operands of one
    dtype and device, bias a contiguous row of N of theirs, K > 0; kern the rung matmul(rows, wt)
    runs on: the tensor cores (FP16/BF16), or a SIMT rung that reads W's rows in place and adds a
    bias (`reads_wt`: FP32, rows C-contiguous). The plan is kept under x, w and bias's key
    (`fast_linear`). Returns y in x's leading shape."""
    from .kernels.tensorcore import _problem as P

    _bind_torch()
    m, n = rows.shape[0], wt.shape[1]
    shape = (*x.shape[:-1], n)
    with on_device(rows.device):
        with memory_for(f"linear: the {arrays.dims((m, n))} {str(rows.dtype).removeprefix('torch.')} result",
                        m * n * rows.element_size()):
            c = _empty((m, n), dtype=rows.dtype, device=rows.device)
        if not m or not n:
            return c.view(shape)
        planned = enabled() and plain(x) and plain(w) and plain(bias) and rows.data_ptr() == x.data_ptr()
        key = linear_key(x, w, x.data_ptr(), w.data_ptr()) + bias_key(bias, bias.data_ptr()) if planned else None
        if kern.backend == "simt":
            _linear_numba(kern, rows, wt, bias, c, key and ("rows", key))
        else:
            run_problem(P.Problem(rows, wt, c, P.precision_of(rows.dtype), 1.0, 1.0, bias.expand(m, n)), "auto",
                        key and ("rows", key))
    if planned:  # the 2-D call's plan, kept under the layer's key only
        _keep_view(key, ("rows", key), shape, None)
        _PLANS.pop(("rows", key), None)
    return c.view(shape)


def remember_view(a, b, inner: tuple, c) -> None:
    """After matmul(a, b) (not both 2-D; torch CUDA tensors, no out=) ran as one call on views of a
    and b (`nd`: inner is ("mm", x, y) for matmul(x, y), or ("gemm", x, y, precision) for
    gemm(x, y, precision=precision)) and gave c: keep that call's plan under matmul(a, b)'s own
    key, with c's shape, where there is one and x and y start where a and b do."""
    if type(a) not in _PLAIN or type(b) not in _PLAIN or not enabled() or not c.numel() or not c.is_contiguous():
        return
    kind, x, y, *rest = inner
    pa, pb = a.data_ptr(), b.data_ptr()
    if x.data_ptr() != pa or y.data_ptr() != pb:
        return
    key = call_key(x, y) if kind == "mm" else gemm_key(x, y, pa, pb, rest[0], None, 1.0, 0.0, None, None, None, "auto")
    _keep_view(matmul_key(a, b, pa, pb), key, c.shape, c.dtype)


def _keep_view(key, inner_key, shape: tuple, dtype) -> None:
    """A ViewPlan, with output `shape`, of the launch plan kept under inner_key, kept under key
    (where `_view_of` gives one)."""
    view = _view_of(_PLANS.get(inner_key), shape, dtype)
    if view is not None:
        _store(key, view)


def _view_of(plan, shape: tuple, dtype) -> ViewPlan | None:
    """A ViewPlan of `plan` with output `shape`: where it is a launch plan whose output is as large
    as `shape` and (unless dtype is None, the caller's output being the plan's own by
    construction) of that dtype; else None."""
    if (isinstance(plan, LaunchPlan) and math.prod(plan.out_shape) == math.prod(shape)
            and (dtype is None or plan.out_dtype == dtype)):
        return ViewPlan(plan, shape)
    return None


def span_bytes(t) -> int:
    """Bytes from a tensor's first element to just past its last (`arrays.span`'s reach)."""
    lo, hi = arrays.span(t)
    return hi - lo


def spans_of(a, b, c) -> tuple[int, int, int]:
    """A plan's `spans`: the three operands' span_bytes, for its out= overlap test."""
    return span_bytes(a), span_bytes(b), span_bytes(c)


def _scale_key(s):
    if s is None or (isinstance(s, int) and s.__class__ is not bool):  # (True equals 1.0; gemm refuses it)
        return s
    if isinstance(s, float):  # zero and NaN by their bits, as their tensors are (P.fixed_scale): -0.0 equals 0.0, a
        return s if s == s and s != 0 else s.hex()  # NaN equals nothing (a plan made for each NaN call, until
        # PLAN_MAX emptied them all). Any other float's value gives its bits, and costs no float.hex (0.3 µs)
    if type(s) in _PLAIN:
        return ("tensor", s.dtype, s.get_device(), s.numel(), s.data_ptr() & 15, s.is_neg())  # (gemm plans no
        # lazily negated scale: its key finds no plan)
    return ("other", id(s))  # never planned (tensorcore_api.gemm plans only tensor or float scales)


def gemm_key(a, b, pa, pb, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel,
             fast_accum=True) -> tuple | None:
    """The call key of a gemm on torch CUDA tensors, or None where no plan can serve it. alpha's and
    beta's classes are in it: True equals 1.0, and gemm refuses a bool where a plan made for 1.0
    would take it."""
    if c is None and scale_a is None and scale_b is None:  # the common call: no key of c or the scales to make
        return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.get_device(), b.get_device(),
                pa & ALIGNS, pb & ALIGNS, precision, out_dtype, alpha, beta, alpha.__class__, beta.__class__, None,
                None, None, kernel, fast_accum)
    if c is None:
        ck = None
    elif type(c) in _PLAIN:
        ck = (c.shape, c.stride(), c.dtype, c.get_device(), c.data_ptr() & 15, c.is_neg())  # (a lazily negated c,
        # refused by gemm, finds no plan)
    else:
        return None
    return (a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype, a.get_device(), b.get_device(),
            pa & ALIGNS, pb & ALIGNS, precision, out_dtype, alpha, beta, alpha.__class__, beta.__class__, ck,
            _scale_key(scale_a), _scale_key(scale_b), kernel, fast_accum)


def fast_gemm(a, b, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel, fast_accum=True):
    """`gemm(...)` by its launch plan, or None (as fast_matmul's, for a lazy negation too; for a
    fast_accum not a bool, which gemm refuses: 1 equals True)."""
    if (type(a) not in _PLAIN or type(b) not in _PLAIN or wants_grad(a, b) or a.is_neg() or b.is_neg()
            or fast_accum.__class__ is not bool or _fwad._current_level >= 0 or _transforms() or tracing()):
        return None
    try:
        pa, pb = a.data_ptr(), b.data_ptr()
        key = gemm_key(a, b, pa, pb, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel, fast_accum)
        plan = _PLANS.get(key) if key is not None else None
    except (RuntimeError, TypeError):  # no storage (sparse), or an argument that is no key (a list): the slow
        return None  # path says which
    if (pa < LOW_ADDRESS and no_memory(a, pa)) or (pb < LOW_ADDRESS and no_memory(b, pb)):  # (as fast_matmul's)
        return None
    if plan is None or (c is not None and ((c.requires_grad and _grad_enabled())
                                           or ((pc := c.data_ptr()) < LOW_ADDRESS and no_memory(c, pc))
                                           or plan.overlaps(pa, pb, pc)
                                           or (c.is_inference() and not _inference_mode()))):  # (a c over
        return None  # a or b: the slow path's LayoutError; the plan was made for a c apart, and would write over
        # its inputs; a c that requires grad with grad mode on, or an inference tensor outside inference mode: its
        # AutogradError. Under no_grad a c that requires grad is written as any c, by the plan too)
    psa = psb = 0  # a scale tensor the slow path refuses, whatever the key says (it has neither requires_grad nor
    # addresses): one that requires grad (_check_scale's AutogradError), one with no memory, or one c's memory covers
    # (C would overwrite it while the kernels read it: _check_kinds_and_c's LayoutError). Inline, c's address
    # reused: on every FP8 call
    if type(scale_a) in _PLAIN:
        psa = scale_a.data_ptr()
        if ((scale_a.requires_grad and _grad_enabled()) or (psa < LOW_ADDRESS and no_memory(scale_a, psa))
                or (c is not None and psa < pc + plan.spans[2] and pc < psa + scale_a.itemsize)):
            return None
    if type(scale_b) in _PLAIN:
        psb = scale_b.data_ptr()
        if ((scale_b.requires_grad and _grad_enabled()) or (psb < LOW_ADDRESS and no_memory(scale_b, psb))
                or (c is not None and psb < pc + plan.spans[2] and pc < psb + scale_b.itemsize)):
            return None
    done = plan.run(pa, pb, c, psa, psb)
    if c is not None:
        _bump((c,))  # (written's)
    return done


SCRATCH_ALIGN = 512  # bytes: each plan's scratch buffer starts this aligned in its stream's arena (as torch's blocks)


class _Arena:
    """The scratch of every plan's calls on one stream. Calls on a stream run one after another on
    the GPU and each writes its scratch before reading it, so one buffer serves them all, whatever
    their shapes (as cuBLAS's workspace serves its handle's calls): memory is the largest call's
    need, not the sum over plans, and a process with many shapes keeps every plan's scratch in
    place. Its lock keeps one call's launches together where threads share the stream. Arenas are
    held (ARENA_MAX_BYTES over all streams, as the plans' kept buffers were) until
    `dispatch.reset()`; `torch.cuda.empty_cache()` does not free them."""

    __slots__ = ("buf", "base", "size", "lock")

    def __init__(self, buf):
        self.buf, self.base, self.size = buf, buf.data_ptr(), buf.numel()
        self.lock = threading.Lock()


def _arena(device, index: int, stream: int, need: int) -> _Arena | None:
    """Stream `stream`'s arena of at least `need` bytes (allocated on that stream, the current one:
    torch's allocator hands a freed arena's memory back to that stream only; by a thread of its
    own, so never in a pool the caller's thread allocates to: P.made_apart), or None where it would
    take the arenas past ARENA_MAX_BYTES."""
    key = (index, stream)
    got = _ARENAS.get(key)
    if got is not None and got.size >= need:
        return got
    import torch

    with _ARENAS_LOCK:
        got = _ARENAS.get(key)  # (another thread on this stream may have made it meanwhile)
        if got is not None and got.size >= need:
            return got
        held = sum(a.size for a in _ARENAS.values()) - (got.size if got else 0)
        size = -(-need // (1 << 20)) << 20  # whole MiB: a little room for the next plan
        if held + size > ARENA_MAX_BYTES:
            return None
        from .kernels.tensorcore import _problem as P

        buf = P.made_apart(lambda: _empty(size, dtype=torch.uint8, device=device), device, on_callers_stream=True)
        _ARENAS[key] = got = _Arena(buf)
    return got


class LaunchPlan:
    """The launches of one call key, and what a call allocates: the output (unless the caller
    gives it). Addresses are passed to the launches in slot order: (A, B, C, C_in, scale_a,
    scale_b, scratch…); C_in is C itself where it is read, or a linear layer's bias row (its
    address given to `run`: `linear_bias`'s plans).

    Scratch (a realigning copy's buffers, split-K's partials) lies in the arena of the call's
    stream (`_Arena`), at offsets fixed by the plan, so every call finds it in place and every
    launch's arguments stay as packed (t04's fused split-K: 2–9 µs of a decode call's 12–20; a
    realigning copy's 16.9 MB at 100×12345×678: 41 µs a call down to 31, docs/perf-notes.md, 55).
    A call made while a CUDA graph is captured gets buffers of its own, from the graph's pool (the
    graph keeps them alive; an arena may be replaced by a larger one under a graph still using
    it), and so does a call past ARENA_MAX_BYTES. A stream-bound plan (t04's tile counters, or
    scales made for its first call, filled and freed on that stream) serves the stream it was built
    on. Under a capture, a plan that holds memory of its own beyond scratch (a stream-bound plan's
    counters, a plan's own scales) serves no call: the graph would share the stream's counters
    with eager calls and every other graph captured there, and read the scales at an address
    freed once the plan is dropped (dispatch.reset, the PLAN_MAX bound, a rebuilt key); the slow
    path gives the graph counters and scales of its own pool. A key's calls on another stream get
    a plan of their own, kept beside this one (`others`, `_beside`), so calls that alternate between
    streams build each stream's plan once (docs/perf-notes.md, 154)."""

    __slots__ = ("launches", "lock", "out_shape", "out_strides", "out_dtype", "device", "index", "scratch", "stream",
                 "scales", "keep", "offsets", "need", "spans", "direct", "holds", "others")

    def __init__(self, launches: list, out_shape, out_dtype, device, scratch=(), stream=None, scales=(), spans=None):
        self.launches, self.out_shape, self.out_dtype = tuple(launches), tuple(out_shape), out_dtype
        # contiguous, as torch makes them (a zero-size dimension counts as one)
        self.out_strides = tuple(math.prod(max(d, 1) for d in self.out_shape[i + 1:]) for i in range(len(self.out_shape)))
        self.lock = threading.Lock()  # a launch's buffer is shared: bind and launch under one lock
        self.device, self.index = device, device.index
        self.scratch = tuple(scratch)  # (numel, dtype) of each scratch buffer
        self.stream = stream  # the stream a stream-bound plan runs on, else None
        self.others = {}  # a stream-bound plan's: another stream -> the key's plan built there (STREAMS_MAX)
        # scales the API made for the plan's first call (not fixed ones, P.fixed_scale): kept, at fixed addresses
        self.keep = tuple(scales)
        self.scales = tuple(0 if s is None else s.data_ptr() for s in scales) or (0, 0)
        self.offsets, at = [], 0  # each scratch buffer's place in the arena
        for n, dt in self.scratch:
            self.offsets.append(at)
            at += -(-n * dt.itemsize // SCRATCH_ALIGN) * SCRATCH_ALIGN
        self.need = at
        self.spans = spans  # (A's, B's, C's span_bytes): out='s overlap test, for a plan of out=
        # memory of its own that a captured graph must not take (the stream's counters, its own scales)
        self.holds = stream is not None or any(s is not None for s in self.keep)
        self.direct = not self.scratch and not self.holds  # the common plan: no capture query, no arena

    def run(self, pa: int, pb: int, c, psa: int, psb: int, view=None, pi: int = 0):
        """Launch for operands at pa, pb (and c, or a new output: of this plan's shape, or of
        view's (shape, strides), a ViewPlan's; C_in at pi where it is not c: a bias row), with
        the plan's GPU current; None where this plan cannot serve the call (another stream for a
        stream-bound plan, a graph's capture for one that holds memory of its own)."""
        here = _current_device()
        if here != self.index:  # operands on another GPU than the current one (a model moved to cuda:1, no
            # set_device): launched with theirs current, as the slow path does, which built this plan on every call.
            # Back as torch.cuda.device goes back: a caller's GPU that has no context yet (a process on cuda:1
            # alone) gets none, where cudaSetDevice would make one (hundreds of MB on GPU 0, in every such process)
            _exchange_device(self.index)
            try:
                return self.run(pa, pb, c, psa, psb, view, pi)
            finally:
                _maybe_exchange_device(here)
        stream = _raw_stream(self.index)
        capturing = False
        if not self.direct:  # (a stream-bound plan, scratch, or scales of its own)
            if self.stream is not None and stream != self.stream:  # (another stream's plan, where one was built)
                other = self.others.get(stream)
                return None if other is None else other.run(pa, pb, c, psa, psb, view, pi)
            capturing = _capturing()
            if capturing and self.holds:  # the slow path gives a graph's capture its own (the class says why)
                return None
        if c is None:
            shape, strides = view or (self.out_shape, self.out_strides)
            c = _empty_strided(shape, strides, dtype=self.out_dtype, device=self.device)
        pc = c.data_ptr()
        psa, psb = psa or self.scales[0], psb or self.scales[1]
        if not self.scratch:
            with self.lock:
                for launch in self.launches:
                    launch((pa, pb, pc, pi or pc, psa, psb), stream)
            return c
        arena = None if capturing else _arena(self.device, self.index, stream, self.need)
        if arena is None:  # a graph's capture, or past the arenas' bound: buffers of the call's own
            bufs = [_empty(n, dtype=dt, device=self.device) for n, dt in self.scratch]
            self.launch_now((pa, pb, pc, pi or pc, psa, psb, *(x.data_ptr() for x in bufs)), stream)
            return c
        with arena.lock:
            self.launch_now((pa, pb, pc, pi or pc, psa, psb, *(arena.base + off for off in self.offsets)), stream)
        return c

    def overlaps(self, pa: int, pb: int, pc: int) -> bool:
        """Would a C at pc share memory with A at pa or B at pb (the plan's shapes and strides)?"""
        ea, eb, ec = self.spans
        return (pc < pa + ea and pa < pc + ec) or (pc < pb + eb and pb < pc + ec)

    def launch_now(self, addresses: tuple, stream: int, skip: int = 0) -> None:
        """The launches (but the first `skip`: a prologue the call has run) for the slots at addresses."""
        with self.lock:
            for launch in self.launches[skip:] if skip else self.launches:
                launch(addresses, stream)


def _remember(key, plan: LaunchPlan) -> None:
    if plan.device.type == "cuda" and _capturing is not None and _capturing():  # bound to a capture's stream,
        # it serves no later call (the query raises on a CPU build)
        return
    _store(key, plan)
    STATS["plans_built"] += 1


def _store(key, plan) -> None:
    held = _PLANS.get(key)
    if held is not None and _beside(held, plan):
        return
    if len(_PLANS) >= PLAN_MAX:
        _PLANS.clear()
    _PLANS[key] = plan


STREAMS_MAX = 32  # other streams' plans one key keeps beside its first (torch's pool: 32 streams a priority)


def _beside(held, plan) -> bool:
    """Keep `plan`, stream-bound and built for a key whose `held` plan is bound to another stream
    (the held plan refused the call), among held's `others`, where it serves its stream's calls
    from then on (past STREAMS_MAX, the oldest goes); True where kept so. A held view (ViewPlan,
    AddBias) of the same key has the same output: its launch plan keeps the new one's. Replacing
    held instead (as before) rebuilt the plan at every switch of stream. A plan built again on
    held's own stream (the slow path taken for another reason: a forward-AD level, a thread's race)
    replaces it, and takes its others."""
    if type(held) is not type(plan):
        return False
    old, new = _bound(held), _bound(plan)
    if old.stream is None or new.stream is None:
        return False
    if new.stream == old.stream:
        new.others.update(old.others)
        return False
    if new.stream not in old.others and len(old.others) >= STREAMS_MAX:
        old.others.pop(tuple(old.others)[0], None)  # (the keys taken at once: another thread may add one)
    old.others[new.stream] = new
    return True


def _bound(plan) -> LaunchPlan:
    """The launch plan a kept plan (LaunchPlan, ViewPlan, AddBias) runs."""
    while type(plan) is not LaunchPlan:
        plan = plan.plan
    return plan


def _not_planned(why: str) -> None:
    STATS["not_planned"][why] = STATS["not_planned"].get(why, 0) + 1


# ---- tensor cores: configuration, launches, plans ------------------------------------------------------


def _plannable(p) -> str:
    """'' where p's launches can be kept as a plan, else why not."""
    if p.alpha != p.alpha or p.beta != p.beta:  # NaN: equal to nothing, so its key finds its plan only for the very
        # same float object; a NaN made anew each call kept another plan each call, until PLAN_MAX emptied them all
        return "alpha or beta is NaN"
    if not enabled():
        return "TILEGEMM_FAST_LAUNCH=0"
    if p.c.device.type != "cuda":
        return "not on a GPU (interpreter)"
    import triton

    if not launcher.triton_version_ok(triton.__version__):
        return f"Triton {triton.__version__}: launcher ABI not known here"
    return ""


def _slots(p) -> list:
    """A plan's operand slots for p: the caller's A and B (a converted operand's source), C, C_in, and the
    scales that are neither made by p's prologue (those are its scratch) nor fixed (P.fixed_scale: one
    tensor for every call of the key, as a persistent buffer is, and for both scales where they are equal)."""
    from .kernels.tensorcore import _problem as P

    made = [t for call in p.prologue for t in call.scratch]
    scales = [None if any(s is t for t in made) or P.is_fixed(s) else s for s in (p.scale_a, p.scale_b)]
    a, b = (x if src is None else src for x, src in zip((p.a, p.b), p.sources))
    return [a, b, p.c, p.c_in if p.has_beta else None, *scales]


def _build(p, calls, own_scales) -> LaunchPlan | None:
    """The launch plan of `calls` for problem p (compiling them), or None where a call cannot be
    launched directly. own_scales: which of p's scales the API made (not the caller's tensors):
    the plan keeps those made for this call, at fixed addresses (a fixed one is no slot, `_slots`)."""
    slots = _slots(p)
    operands = [t for i, t in enumerate(slots) if t is not None and i != 3]
    if len({id(t) for t in operands}) < len(operands):  # one tensor in two slots (the APIs give matmul(x, x)'s and
        return None  # gemm(x, x)'s B a view of its own): a plan binds operands by identity, and would read (or write)
        # one slot for two operands on every later call
    # scales the plan keeps: those the API made for this call (own_scales) that are slots (not a fixed one: a
    # constant of the launches, `_slots`). They were filled by a kernel on this call's stream, and are freed on that
    # stream when the plan is dropped (PLAN_MAX, reset, a rebuilt key): a launch on another stream is ordered with
    # neither (it could read them before the fill, or after the memory went to another tensor), so such a plan is
    # bound to its stream, as t04's counters bind theirs
    scales = tuple(s if own else None for s, own in zip(slots[4:6], own_scales))
    bound = any(c.stream_bound for c in calls) or any(s is not None for s in scales)
    scratch = []
    for t in _scratch(calls):
        if t.storage_offset():  # a plan allocates each scratch buffer afresh and passes its start
            return None
        slots.append(t)
        scratch.append((t.untyped_storage().nbytes() // t.element_size(), t.dtype))  # a view's whole buffer
    launches = []
    for call in calls:
        compiled = call.fn.run(*call.args, grid=call.grid, warmup=True, **call.options)
        if hasattr(compiled, "result"):  # Triton's asynchronous compile mode
            compiled = compiled.result()
        one = launcher.triton_launch(compiled, call.grid, call.args, slots, p.c.device.index)
        if one is None:
            return None
        launches.append(one)
    stream = _raw_stream(p.c.device.index) if bound else None
    return LaunchPlan(launches, p.c.shape, p.c.dtype, p.c.device, scratch, stream, scales, spans_of(*slots[:3]))


def _scratch(calls) -> list:
    """The calls' scratch tensors, each once (by identity), in order: the plan's slots after the operands."""
    out = []
    for call in calls:
        out += [t for t in call.scratch if not any(t is s for s in out)]
    return out


def _addresses(p, calls) -> tuple:
    """The slots' addresses for the launches of a plan just built (C_in: C's where it is not read)."""
    a, b, c, c_in, sa, sb = _slots(p)
    ptr = lambda t: 0 if t is None else t.data_ptr()  # noqa: E731
    return (a.data_ptr(), b.data_ptr(), c.data_ptr(), ptr(c if c_in is None else c_in), ptr(sa), ptr(sb),
            *(t.data_ptr() for t in _scratch(calls)))


def _launch(p, decision, key, own_scales) -> None:
    from .kernels import tensorcore as tc

    calls = [*p.prologue, *tc.rung_module(decision.rung).launches(p, decision.config)]
    why = _plannable(p) if key is not None else "no call key"
    plan = _build(p, calls, own_scales) if not why else None
    if plan is None:
        _not_planned(why or f"{decision.rung}: an aliased operand, or a launch the launcher cannot replay")
        tc.launch_calls(calls[len(p.prologue):])  # (the prologue ran: run_problem)
        return
    plan.launch_now(_addresses(p, calls), _raw_stream(p.c.device.index), skip=len(p.prologue))  # (it ran: run_problem)
    _remember(key, plan)


def _fallback(p, decision, error: Exception):
    """What runs when the chosen rung fails to compile or launch here: the same without the loop
    options (FLAT, WS) this Triton may refuse, else t04's default for t06 and t02's for the others;
    None for t02/t04 themselves."""
    from .tuning import Decision, space

    err = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    opts = [o for o in ("WS", "FLAT") if decision.config.get(o)]
    if opts:
        alt = Decision(decision.rung, dict(decision.config, WS=False, FLAT=False), decision.source)
        why = f"{'+'.join(opts)} failed ({err}); ran without"
    elif decision.rung in (space.T03, space.T05, space.T06, "tc_tiled"):
        below = space.T04 if decision.rung == space.T06 else space.T02
        alt = Decision(below, space.default(below, p), f"fallback from {decision.rung}")
        why = f"{decision.rung} failed ({err}); ran {below}"
    else:
        return None
    tag = f"{decision.rung}|{'+'.join(opts)}"
    if tag not in fallbacks:
        fallbacks[tag] = why
        warnings.warn(f"tilegemm: {why}", RuntimeWarning, stacklevel=4)
    return alt


def run_problem(p, kernel: str = "auto", key=None, own_scales=(False, False), config: dict | None = None) -> dict:
    """Run tensor-core problem p on the rung and configuration tilegemm.tuning chooses (kernel:
    "auto" or a rung's name; config: a configuration to force on that rung), keeping a launch plan
    under `key` where one can be kept (own_scales: which of p's scale tensors are the API's, not
    the caller's: the plan keeps those, but fixed ones, P.fixed_scale). Returns the configuration,
    with "kernel" naming the rung that ran and "source" where it came from."""
    from . import tuning

    _bind_torch()
    STATS["slow_calls"] += 1
    if p.prologue:  # before anything reads the converted operands: a tuning now (TILEGEMM_AUTOTUNE=1) times and checks
        # on them, and a rung's launches() may copy one on the host's call (t03's K-major copy)
        from .kernels import tensorcore as tc

        tc.launch_calls(p.prologue)
    if config is not None:
        if kernel == "auto":
            raise ValueError("run_problem: a forced configuration needs a rung's name")
        d = tuning.Decision(kernel, dict(config), "forced configuration")
    else:
        d = tuning.choose(p, kernel)
    for attempt in range(3):
        try:
            _launch(p, d, key, own_scales)
            if attempt and config is None:  # the bucket's next shapes go straight to what ran
                tuning.remember(p, kernel, d)
            return dict(d.config, kernel=d.rung, source=d.source)
        except Exception as e:  # noqa: BLE001  (a compile or launch this Triton refuses: degrade, say why)
            alt = _fallback(p, d, e)
            if alt is None:
                raise
            d = alt
    raise RuntimeError(f"tilegemm: no rung could run {p.m}×{p.n}×{p.k}")


def rung_launcher(name: str):
    """The registry's launcher of tensor-core rung `name`: c = a @ b (torch CUDA tensors) on that
    rung, with its configuration for the shape, on `stream` (a torch stream) or the current one."""

    def launch(a, b, c, stream=None):
        import torch

        from .kernels.tensorcore import _problem as P

        with torch.cuda.stream(stream) if isinstance(stream, torch.cuda.Stream) else _nothing():
            run_problem(P.problem_2d(a, b, c), name)

    launch.__name__ = f"launch_{name}"
    return launch


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class on_device:
    """`with on_device(d):` makes CUDA device d current (Triton compiles and launches there) only
    when it is not already: torch.cuda.device costs microseconds, a comparison does not."""

    __slots__ = ("ctx",)

    def __init__(self, device):
        import torch

        self.ctx = None if device.index is None or device.index == torch.cuda.current_device() \
            else torch.cuda.device(device)

    def __enter__(self):
        if self.ctx is not None:
            self.ctx.__enter__()

    def __exit__(self, *exc):
        return self.ctx.__exit__(*exc) if self.ctx is not None else False


def explain_problem(p, kernel: str = "auto") -> tuple[str, list[str]]:
    """The rung p runs on, and lines saying its configuration and where that comes from (for
    tilegemm.explain)."""
    from . import tuning
    from .tuning import space

    d = tuning.choose(p, kernel, tune=False)  # (nothing timed, under TILEGEMM_AUTOTUNE=1 too)
    cfg = ", ".join(f"{k}={v}" for k, v in d.config.items())
    waves = space.waves_note(p, d.rung, d.config, d.shape)  # a tile timed at another shape: its waves there and here
    return d.rung, [f"tensor-core rung {d.rung}: {cfg}", f"configuration from {d.source}", *([waves] if waves else [])]


# ---- matmul's execution (api.matmul has checked the operands and chosen the kernel) -----------------


def execute_matmul(kern, auto: bool, A: Operand, B: Operand, O, out, shape, dtype: str):
    """C = A @ B on kernel `kern` (a registry.Kernel; auto: chosen by "auto", so the tensor cores
    choose their rung per shape), in the caller's kind."""
    if kern.backend == "cpu":
        return _run_host(kern, A, B, O, shape, dtype)
    if kern.backend == "simt":
        STATS["slow_calls"] += 1
        if _cuda.SIMULATOR:  # one simulated launch at a time in a process: calls from several threads take turns
            with _cuda.SIM_LAUNCHES:
                return _run_numba(kern, auto, A, B, O, out, shape, dtype)
        return _run_numba(kern, auto, A, B, O, out, shape, dtype)
    return _run_tensorcore("auto" if auto else kern.name, A, B, out, shape, dtype)


def _run_host(kern, A: Operand, B: Operand, O, shape, dtype):
    a, b = arrays.host_view(A), arrays.host_view(B)
    if O is not None:
        kern.launch(a, b, arrays.host_target(O))
        return O.obj
    c, host = arrays.host_result(A, shape, dtype)
    kern.launch(a, b, host)
    return c


def check_free_memory(need: int) -> None:
    """Refuse, before any copy, a product whose operands and result do not fit the device."""
    if _cuda.SIMULATOR:
        return
    free, total = _device_memory()
    if need > free:
        raise OutOfDeviceMemory(
            f"matmul: needs {need / 2**20:.1f} MiB of device memory, {free / 2**20:.1f} MiB free "
            f"of {total / 2**20:.1f} MiB"
        )


def _run_numba(kern, auto: bool, A: Operand, B: Operand, O, out, shape, dtype):
    cuda = _cuda.cuda
    if A.on_host:
        check_free_memory(arrays.nbytes(A.shape, dtype) + arrays.nbytes(B.shape, dtype) + arrays.nbytes(shape, dtype))
        a_d, b_d = arrays.to_numba(A), arrays.to_numba(B)
        c_d = cuda.device_array(shape, dtype=dtype)
        kern.launch(a_d, b_d, c_d, None)
        c, host = (O.obj, arrays.host_target(O)) if O is not None else arrays.host_result(A, shape, dtype)
        if host.flags.c_contiguous:
            c_d.copy_to_host(host)
        else:
            host[...] = c_d.copy_to_host()
        return c
    from .kernels.simt import _common as S

    with _numba_call(arrays.device_index(A), A.obj.device if A.kind == "torch" else None) as made:
        result = out if out is not None else _allocate(A, shape, dtype)
        stream = arrays.numba_stream(A)
        R = arrays.describe(result, "out")
        need = kern.needs_contiguous
        b_as_is = B.contiguous or (kern.reads_wt and transposed_contiguous(B))  # x @ W.t(): W's rows read in place
        why = _numba_plannable(A, B, out) or ("" if auto else "a kernel asked for by name is not the call's plan")
        if need and not why and R.contiguous:  # a strided operand copied contiguous into the call's
            # scratch by a recorded kernel: the plan repeats the copy (a strided activation, say)
            with S.recording() as launches:
                a_d = arrays.to_numba(A, stream) if A.contiguous else _copied_contiguous(A, stream)
                b_d = arrays.to_numba(B, stream) if b_as_is else _copied_contiguous(B, stream)
                kern.launch(a_d, b_d, arrays.to_numba(R, stream), stream)
            if len(launches) > (not A.contiguous) + (not b_as_is):  # the rung's own launches recorded too:
                _keep_numba_plan(A, B, result, launches, out is not None, made)  # else a plan would only copy
            else:
                _not_planned("the rung launched outside the recording")
            return result
        if need:  # torch operands are copied by torch: its allocator is safe inside a CUDA graph's capture
            A, B = _torch_contiguous(A, "a"), B if b_as_is else _torch_contiguous(B, "b")
        a_d = arrays.to_numba(A, stream, contiguous=need)
        b_d = arrays.to_numba(B, stream, contiguous=need and not b_as_is)
        c_d = arrays.to_numba(R, stream)
        if need and not R.contiguous:  # compute into a contiguous buffer, then scatter into `out`
            if R.kind == "torch":  # torch's allocator: safe inside a CUDA graph's capture
                tmp = arrays.to_numba(arrays.describe(R.obj.new_empty(shape), "out"), stream)
            else:
                tmp = cuda.device_array(shape, dtype=dtype, stream=stream or 0)  # 0: Numba's default stream
            kern.launch(a_d, b_d, tmp, stream)
            arrays.copy_2d(tmp, c_d, stream)
            return result
        if why:
            _not_planned(why)
            kern.launch(a_d, b_d, c_d, stream)
            return result
        with S.recording() as launches:
            kern.launch(a_d, b_d, c_d, stream)
        _keep_numba_plan(A, B, result, launches, out is not None, made)
    return result


def transposed_contiguous(X: Operand) -> bool:
    """Is X, 2-D, the transpose of a C-contiguous array (a linear layer's weight passed as W.t())
    and not itself C-contiguous? (CUDA kinds: torch's strides, or the array interface's.)"""
    if X.contiguous or len(X.shape) != 2 or min(X.shape) < 2 or X.on_host:
        return False
    if X.kind == "torch":
        return X.obj.t().is_contiguous()
    strides = getattr(X.obj, "__cuda_array_interface__", {}).get("strides")
    item = arrays.itemsize(X.dtype)
    return strides is not None and tuple(strides) == (item, item * X.shape[0])


def _torch_scratch(device, made: list):
    """A rung's scratch allocator for torch operands: torch's caching allocator (stream-ordered,
    safe inside a CUDA graph's capture), each tensor noted in `made` for the call's plan."""
    import torch

    def alloc(shape, dtype):
        t = torch.empty(tuple(shape), dtype=getattr(torch, np.dtype(dtype).name), device=device)
        made.append(t)
        return _cuda.cuda.as_cuda_array(t)

    return alloc


def _torch_contiguous(X: Operand, what: str) -> Operand:
    """A strided torch CUDA operand as a contiguous copy made by torch (its caching allocator is
    capture-safe, where Numba's cuMemAlloc breaks a CUDA graph's capture); others as they are."""
    if X.kind != "torch" or X.contiguous:
        return X
    return arrays.describe(X.obj.contiguous(), what)


def _numba_plannable(A: Operand, B: Operand, out) -> str:
    if not enabled():
        return "TILEGEMM_FAST_LAUNCH=0"
    if A.kind != "torch" or B.kind != "torch" or not plannable_out(out):
        return "SIMT plans are kept for torch CUDA tensors (and a torch CUDA out=)"
    if _cuda.SIMULATOR:
        return "simulator"
    return ""


def _copied_contiguous(X: Operand, stream):
    """A strided torch CUDA operand copied C-contiguous by a Numba kernel launched through the SIMT
    rungs' `configure` (so that a recording takes it: the plan repeats it at the operand's
    address) into a scratch buffer (torch's allocator, which the plan makes again or keeps). The
    transpose of a C-contiguous array (A passed as X.t()) goes through k17's 32×32 transposing
    tile, its reads and its writes coalesced; any other strides by `arrays.copy_2d`."""
    from .kernels.simt import _common as S

    got = S.scratch([tuple(X.shape)], X.dtype, stream)
    if got is None:  # (scratch says None where the device has not the memory)
        raise out_of_memory(f"matmul: a contiguous copy of the {arrays.dims(X.shape)} {X.dtype} operand",
                            arrays.nbytes(X.shape, X.dtype))
    dst = got[0]
    if transposed_contiguous(X):
        from .kernels.simt import k17_splitk_unrolled as k17

        k17.launch_transpose(_cuda.cuda.as_cuda_array(X.obj.detach().t()), dst, stream)  # from X's own rows
    else:
        arrays.copy_2d(arrays.to_numba(X, stream), dst, stream, configure=S.configure)
    return dst


def _linear_numba(kern, rows, wt, bias, c, key) -> None:
    """c = rows @ wt + bias on a SIMT rung that reads W's rows in place (wt = W.t()) and adds the
    bias row (`reads_wt`), its launches kept as a plan under key where one is given."""
    from .kernels.simt import _common as S

    with _numba_call(rows.device.index, rows.device) as made:
        stream = arrays.numba_stream(arrays.describe(rows, "x"))
        a, b, out, row = (_cuda.cuda.as_cuda_array(t.detach()) for t in (rows, wt, c, bias))
        with S.recording() as launches:
            kern.launch(a, b, out, stream, bias=row)
    if key is not None:
        plan = _numba_plan(rows, wt, c, launches, made, bias.data_ptr())
        if plan is not None:
            _remember(key, plan)


def _keep_numba_plan(A: Operand, B: Operand, c, records, is_out: bool, scratch=()) -> None:
    """Keep the recorded launches as the call's plan (under out_key too where c is the caller's out)."""
    plan = _numba_plan(A.obj, B.obj, c, records, scratch)
    if plan is not None:
        _remember(call_key(A.obj, B.obj, c if is_out else None), plan)


def _numba_plan(a, b, c, records, scratch=(), pi: int = 0) -> LaunchPlan | None:
    """The recorded launches as a plan for torch tensors a, b, c (pi: the address of a bias row
    they read, C_in's slot), or None (noted) where they cannot make one; `scratch`: the torch
    tensors the launches took as scratch, which the plan makes again for each later call, or keeps
    for its stream (LaunchPlan)."""
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    if len({pa, pb, pc, pi or pc}) < 3 + bool(pi) or not records:
        _not_planned("aliased operands" if records else "no launch recorded")
        return None
    slots = (pa, pb, pc, pi or pc, 0, 0, *(t.data_ptr() for t in scratch))
    launches = [launcher.numba_launch(kernel, grid, block, shared, args, slots, c.device.index)
                for kernel, grid, block, shared, args in records]
    if any(one is None for one in launches):
        _not_planned("a Numba launch the launcher cannot replay")
        return None
    _bind_torch()
    return LaunchPlan(launches, c.shape, c.dtype, c.device, [(t.numel(), t.dtype) for t in scratch],
                      spans=spans_of(a, b, c))


@contextlib.contextmanager
def _numba_call(index: int, torch_device=None):
    """A SIMT rung's call: Numba's current device the operands' (`_numba_device`) and, for torch
    operands (torch_device), the rung's scratch from torch's allocator; yields the list of the
    torch tensors taken as scratch (a plan makes, or keeps, its own for later calls)."""
    from .kernels.simt import _common as S

    made: list = []
    with _numba_device(index), (S.scratch_from(_torch_scratch(torch_device, made)) if torch_device is not None
                                else _nothing()):
        yield made


def _numba_device(index: int):
    """The operands' device as Numba's current one (a no-op when it already is)."""
    if _cuda.SIMULATOR or _cuda.cuda.get_current_device().id == index:
        return _nothing()
    return _cuda.cuda.gpus[index]


def _allocate(A: Operand, shape, dtype: str):
    """The result array, of the caller's kind; running out of memory becomes a clear error.
    (No free-memory query up front: it would cost a driver call on every product.)"""
    with memory_for(f"matmul: the {arrays.dims(shape)} {dtype} result", arrays.nbytes(shape, dtype)):
        return arrays.empty_like_kind(A, shape, dtype)


def _device_memory() -> tuple[int, int]:
    """(free, total) bytes of the current device, as the driver counts them: torch's reader where
    torch is loaded (it does not create a Numba context), else Numba's. One reader for every check."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return torch.cuda.mem_get_info()
    except AttributeError:  # (a torch still being imported by another thread, with no cuda yet: Numba's reader)
        pass
    free, total = _cuda.cuda.current_context().get_memory_info()
    return free, total


@contextlib.contextmanager
def memory_for(what: str, need: int):
    """Allocations for `what` (`need` bytes in all): a device out-of-memory error (torch's, CuPy's
    or Numba's, each its own type) becomes OutOfDeviceMemory stating what was needed and what is
    free, not the library's trace."""
    try:
        yield
    except Exception as e:  # noqa: BLE001  (only an out-of-memory error is converted)
        if not says_out_of_memory(e):
            raise
        raise out_of_memory(what, need) from e


def out_of_memory(what: str, need: int) -> OutOfDeviceMemory:
    """The error for `what` needing `need` bytes of device memory, beside what is free."""
    return OutOfDeviceMemory(f"{what}: needs {need / 2**20:.1f} MiB of device memory, "
                             f"{_device_memory()[0] / 2**20:.1f} MiB free")


def _run_tensorcore(kernel: str, A: Operand, B: Operand, out, shape, dtype: str):
    """matmul's path to the tensor cores: CUDA operands in place, host ones copied there and back."""
    import torch

    from .kernels.tensorcore import _problem as P

    _bind_torch()
    copies = sum(arrays.nbytes(X.shape, dtype) for X in (A, B) if X.on_host)
    with memory_for(f"matmul: {arrays.dims(shape)} {dtype}", copies + arrays.nbytes(shape, dtype)):
        a, b = arrays.to_torch_cuda(A), arrays.to_torch_cuda(B)
    tdtype = getattr(torch, dtype)
    planned = A.kind == "torch" and B.kind == "torch" and not A.on_host and kernel == "auto" and plannable_out(out)
    if b is a and planned and type(a) in _PLAIN:  # matmul(x, x): B a tensor of its own over x's memory and strides
        b = a[...]  # (a plan binds its operand slots by identity)
    with on_device(a.device):
        if out is None or arrays.describe(out, "out").on_host:
            with memory_for(f"matmul: the {arrays.dims(shape)} {dtype} result", arrays.nbytes(shape, dtype)):
                c = torch.empty(shape, dtype=tdtype, device=a.device)
        else:
            c = arrays.to_torch_cuda(arrays.describe(out, "out"))  # a view of the caller's memory
        key = call_key(a, b, out) if planned else None
        run_problem(P.problem_2d(a, b, c), kernel, key)
    if out is None:
        return arrays.to_kind(c, A)
    O = arrays.describe(out, "out")
    if O.on_host:  # NumPy / torch CPU out: computed on the device, copied back into it
        arrays.write_back(c, out, O)
    return out
