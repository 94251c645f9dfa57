"""tilegemm as torch operators: `torch.ops.tilegemm.matmul` and `torch.ops.tilegemm.linear`.

They are registered with `torch.library` (each with a fake implementation, so `torch.compile`
traces them without a graph break, and an autograd formula whose backward runs tilegemm's own
GEMMs), and `patch(model)` routes a model's `nn.Linear` layers (and, opted in, its
`torch.matmul`/`bmm` calls) through them:

    with tilegemm.patch(model) as p:      # or p = tilegemm.patch(model); …; p.undo()
        logits = model(tokens)
    print(p.counts)                        # {'tilegemm': 128, 'torch': 2}: who ran each product

A product tilegemm serves (float32/float64 on the host; float16, bfloat16, float32 and float64 on
a CUDA GPU, plain tensors of one dtype and device) runs on tilegemm; any other (bfloat16 on the
host, mixed dtypes, a tensor subclass, a product inside a `torch.func` transform) runs on torch,
and `counts` says how many of the model's forward products went each way. Under autocast a layer's
operands are cast to the autocast dtype first, as `nn.functional.linear`'s are. In eager inference
(no gradient to record, not being compiled or traced) a patched layer calls tilegemm directly,
without the operator's dispatch; a call that must record a gradient or is being compiled or traced
goes through the operator (whose backward's products `COUNTS` counts). Importing this module
imports torch: `tilegemm.patch` imports it on first use.
"""

from __future__ import annotations

import copyreg
import itertools
import random
import weakref
from typing import Optional

import torch

from . import api, arrays, dispatch

COUNTS = {"tilegemm": 0, "torch": 0}  # every product the operators ran (a patch counts its model's own), by who ran it
_COUNTERS = {0: COUNTS}  # the operators' `counter` argument → where its products are counted (each patch's own)
_TAGS = itertools.count(random.SystemRandom().getrandbits(48) + 1)  # (a tag is saved in exported and traced
# graphs: another process's patches do not reuse this one's)
_KEPT = weakref.WeakKeyDictionary()  # model → (tag, {(layer class, matmul): its patched class}) of its patches:
# the next patch of the model, once they are undone, takes them again (torch.compile guards on a layer's class and
# on the tag: new ones each time compiled the model again at each patch, and past its recompile limit, not at all)
_LIVE = weakref.WeakKeyDictionary()  # model → how many of its patches are on (none: the kept ones may be taken)


_HOST = frozenset((torch.float32, torch.float64))
HOST_KERNEL = "cpu_blas"  # a CPU layer's product, where its tensors are, as torch's: api.matmul's "auto" would copy
# host operands to a GPU and back on every call where the machine has one
_STRIDED = torch.strided
_fast_linear = dispatch.fast_linear
_CUDA = frozenset((torch.float16, torch.bfloat16, torch.float32, torch.float64))
_AUTOCAST_FROM = frozenset((torch.float32, torch.float16, torch.bfloat16))  # what autocast casts
_PLAIN = (torch.Tensor, torch.nn.Parameter)  # a subclass (DTensor, a quantised weight) has its own rules: torch's
_compiling, _tracing = torch.compiler.is_compiling, torch._C._is_tracing
_any_autocast, _functorch = torch._C._is_any_autocast_enabled, torch._C._are_functorch_transforms_active
_fwad = torch.autograd.forward_ad  # (its _current_level: -1 outside a dual level)
_einsum = torch._VF.einsum  # (torch.einsum's parsing of its arguments, without it)
_modes, _mode_at, _no_torch_function = (torch._C._len_torch_function_stack, torch._C._get_function_stack_at,
                                        torch._C.DisableTorchFunction)


def served(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Does tilegemm run a product of these (one dtype and device, a dtype it has a kernel for)?
    (Asked before every patched layer's product: dtypes and layouts are singletons, compared by
    identity; devices by index and kind, without building torch.device objects.)"""
    if type(a) not in _PLAIN or type(b) not in _PLAIN:  # (first: a list or None has no dtype; torch says so)
        return False
    dtype = a.dtype
    if (dtype is not b.dtype or a.layout is not torch.strided or b.layout is not torch.strided
            or a.is_nested):  # (a nested tensor of strided layout: torch's)
        return False
    if ((pa := a.data_ptr()) < dispatch.LOW_ADDRESS and a.numel() and dispatch.no_memory(a, pa)) or (
            (pb := b.data_ptr()) < dispatch.LOW_ADDRESS and b.numel() and dispatch.no_memory(b, pb)):
        return False  # (a ZeroTensor, a functionalization wrapper, a freed storage: no memory holding the values,
        # which torch knows how to read and tilegemm refuses)
    if a.is_cuda:
        return b.is_cuda and a.get_device() == b.get_device() and dtype in _CUDA
    return a.is_cpu and b.is_cpu and dtype in _HOST


def _matmul(a: torch.Tensor, b: torch.Tensor, counts: dict = COUNTS) -> torch.Tensor:
    """a @ b on tilegemm where it serves them, else on torch (the operator's body runs it under
    no_grad; the eager path calls it only where nothing requires grad), counted in `counts` once
    it has run."""
    c = dispatch.fast_matmul(a, b)  # (a repeated call by its plan, without served's questions: a plan serves
    if c is not None:  # only what served would)
        counts["tilegemm"] += 1
        return c
    who = "tilegemm" if served(a, b) else "torch"
    c = (api.matmul(a, b) if a.is_cuda else api.matmul(a, b, kernel=HOST_KERNEL)) if who == "tilegemm" \
        else torch.matmul(a, b)
    counts[who] += 1
    return c


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], counts: dict = COUNTS) -> torch.Tensor:
    """x @ weight.T (+ bias), as nn.functional.linear, on tilegemm where it serves them (no
    gradient recorded: as _matmul), counted in `counts` once it has run. A repeated call (x's
    shape and strides, the weight's and the bias's, their dtype and device) goes by its linear
    plan (`dispatch.fast_linear`): no view is made of either."""
    y = _fast_linear(x, weight, bias)
    if y is not None:
        counts["tilegemm"] += 1
        return y
    # torch runs what tilegemm does not serve; a bias of another dtype (torch's error, or the promotion its
    # addition makes); a 0-D x; a 1-D weight (x @ w, whose result has no N); a 1-D x with a bias of more
    # dimensions ((1, N), added to its one row: the result is still (N,))
    if (not served(x, weight) or (bias is not None and bias.dtype is not weight.dtype) or x.dim() == 0
            or weight.dim() != 2 or (x.dim() == 1 and bias is not None and bias.dim() > 1)):
        y = torch.nn.functional.linear(x, weight, bias)
        counts["torch"] += 1
        return y
    y = _linear_on_tilegemm(x, weight, bias)
    counts["tilegemm"] += 1
    return y


def _linear_on_tilegemm(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """_linear where no plan serves the call (its first of its kind on a GPU; every call on the
    host). On the tensor cores a bias that is a contiguous row of
    x's dtype on x's device is added in the kernel's epilogue (`dispatch.linear_bias`); any other
    bias, and any on the SIMT path, by torch after the product."""
    flat = x.dim() == 2
    rows, wt = x if flat else _rows(x), weight.t()  # a view for a contiguous activation
    kern = None if bias is None else _epilogue(x, rows, wt, bias)
    if kern is not None:
        return dispatch.linear_bias(x, weight, bias, rows, wt, kern)
    y = api.matmul(rows, wt) if x.is_cuda else api.matmul(rows, wt, kernel=HOST_KERNEL)
    if x.is_cuda:
        dispatch.remember_linear(x, weight, rows, wt, bias)
    y = y if flat else y.view(*x.shape[:-1], weight.shape[0])
    return y if bias is None else _add_bias(y, bias)


_EPILOGUE = frozenset((torch.float16, torch.bfloat16))


def _rows(t: torch.Tensor) -> torch.Tensor:
    """t as a matrix of its last dimension's rows (t.reshape(-1, K), which refuses K = 0: -1 is then
    ambiguous; an empty layer, in or out, has 0 there)."""
    return t.reshape(t.shape[:-1].numel(), t.shape[-1])


def _epilogue(x: torch.Tensor, rows: torch.Tensor, wt: torch.Tensor, bias: torch.Tensor):
    """The rung that adds this bias to x's product in its epilogue, or None: matmul's own choice
    for x's rows on a GPU (K > 0) where it is a tensor-core rung and x FP16/BF16, or a SIMT rung
    that reads the weight's rows in place and adds a bias (`reads_wt`: FP32) where x's rows and
    the weight are C-contiguous; the bias a plain contiguous row of N of x's dtype on x's device.
    None where one of them is a lazy negation (its memory, which the epilogue's launch reads as it
    lies, holds the negated values): api.matmul multiplies the values, and torch adds the bias."""
    if not (x.is_cuda and x.shape[-1] > 0 and dispatch.plain(bias) and bias.dtype is x.dtype and bias.dim() == 1
            and bias.shape[0] == wt.shape[1] and bias.stride(0) == 1 and bias.is_cuda
            and bias.get_device() == x.get_device() and not (x.is_neg() or wt.is_neg() or bias.is_neg())):
        return None
    kern = api.plan(rows, wt).kernel
    if kern.backend == "tensorcore" and x.dtype in _EPILOGUE:
        return kern
    if kern.reads_wt and rows.is_contiguous() and dispatch.transposed_contiguous(arrays.describe(wt, "b")):
        return kern
    return None


def _add_bias(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """y + bias, in place where y is ours to write and of bias's dtype and device."""
    return y.add_(bias) if y.dtype is bias.dtype and y.get_device() == bias.get_device() else y + bias


@torch.library.custom_op("tilegemm::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor, counter: int = 0) -> torch.Tensor:
    """a @ b (numpy.matmul's semantics) on tilegemm, differentiable. counter: where the product
    is counted (a patch's tag; 0: COUNTS), at run time, so that a compiled graph counts its calls
    without guarding on a count."""
    with torch.no_grad():
        return _matmul(a, b, _COUNTERS.get(counter, COUNTS))


@matmul.register_fake
def _matmul_fake(a, b, counter=0):
    """The result's shape from the operands' (symbolic under torch.compile and torch.export): matmul's
    errors for 0-D operands and inner dimensions, the batch dimensions broadcast by torch, which keeps
    a symbolic size symbolic (NumPy's broadcast_shapes made it an int: compiled again for each batch
    size, and an export with a dynamic batch dimension refused)."""
    from .nd import result_shape

    sa, sb = tuple(a.shape), tuple(b.shape)
    *_, shape = result_shape(sa[-2:], sb[-2:])
    try:
        batch = torch.broadcast_shapes(sa[:-2], sb[:-2])
    except RuntimeError:
        result_shape(sa, sb)  # (its ShapeError for batch dimensions that do not broadcast)
        raise
    return a.new_empty((*batch, *shape))


def _matmul_setup(ctx, inputs, output):
    """What the backward reads: each operand only where the other's gradient is asked for (a's
    gradient reads b, b's reads a; a frozen weight's product kept its activation until the
    backward, as torch's does not), and both shapes."""
    a, b = inputs[:2]
    ctx.shapes = a.shape, b.shape
    ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)


def _matmul_backward(ctx, grad):
    """d(a @ b): grad @ bᵀ and aᵀ @ grad, each summed over the batch dimensions an operand was
    broadcast along, on tilegemm's GEMMs (through the operator: differentiable again)."""
    a, b = ctx.saved_tensors
    sa, sb = ctx.shapes
    g = grad  # back to the promoted shapes: b's dimension first, so that a 0-D grad of vector·vector works
    if len(sb) == 1:
        g = g.unsqueeze(-1)
    if len(sa) == 1:
        g = g.unsqueeze(-2)
    ga = gb = None
    if ctx.needs_input_grad[0]:
        b2 = b.unsqueeze(-1) if b.dim() == 1 else b
        ga = matmul(g, b2.transpose(-1, -2).conj()).sum_to_size((1, *sa) if len(sa) == 1 else sa).reshape(sa)
        # (conj: complex operands, which torch runs, have b^H there; on real ones it is the tensor itself)
    if ctx.needs_input_grad[1]:
        a2 = a.unsqueeze(0) if a.dim() == 1 else a
        gb = matmul(a2.transpose(-1, -2).conj(), g).sum_to_size((*sb, 1) if len(sb) == 1 else sb).reshape(sb)
    return ga, gb, None


matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)


@torch.library.custom_op("tilegemm::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           counter: int = 0) -> torch.Tensor:
    """nn.functional.linear(x, weight, bias) on tilegemm, differentiable; counter as matmul's."""
    if _fwad._current_level >= 0:  # (the operator has no forward-AD formula: a dual input's tangent would be
        # dropped by a plan or the bias epilogue, which ask nothing)
        dispatch.refuse_transformed("linear", (x, "x"), (weight, "weight"), (bias, "bias"))
    with torch.no_grad():
        return _linear(x, weight, bias, _COUNTERS.get(counter, COUNTS))


@linear.register_fake
def _linear_fake(x, weight, bias=None, counter=0):
    """nn.functional.linear's own result on the fake (or meta) operands: its shape, dtype and errors
    (inner dimensions that differ, a 0-D x, a bias that does not broadcast), as the eager call's. A
    result shaped from x and the weight alone let a meta model's wrong input through, and
    torch.compile failed in its backward's trace, far from the cause."""
    return torch.nn.functional.linear(x, weight, bias)


def _linear_setup(ctx, inputs, output):
    """As _matmul_setup: x only for the weight's gradient, the weight only for x's (a frozen layer
    keeps no activation), and the shapes."""
    x, weight, bias, _ = inputs
    ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight if ctx.needs_input_grad[0] else None)
    ctx.shapes = x.shape, weight.shape
    ctx.bias_shape = None if bias is None else bias.shape  # (any shape nn.functional.linear broadcasts: (1, N) too)


def _linear_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    x_shape, w_shape = ctx.shapes
    vector = len(w_shape) == 1  # (x @ w, which the forward hands to torch: w as a (1, K) weight, grad as N = 1)
    g = grad.reshape(-1, 1) if vector else _rows(grad)
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:  # (conj: as _matmul_backward's, for a complex layer, which torch runs)
        gx = matmul(g, (weight.unsqueeze(0) if vector else weight).conj()).reshape(x_shape)
    if ctx.needs_input_grad[1]:
        gw = matmul(g.t(), _rows(x).conj()).reshape(w_shape)
    if ctx.bias_shape is not None and ctx.needs_input_grad[2]:
        shape = ctx.bias_shape
        if len(shape) == 1:
            gb = g.sum(0)
        else:  # (any other shape nn.functional.linear broadcasts: (1, N), (M, N), 0-D, whose gradient autograd
            # wants in that shape; a 1-D x's output is its one row, to which torch adds a (1, N) bias: grad has
            # a dimension fewer than it)
            gb = grad.reshape((1,) * max(0, len(shape) - grad.dim()) + tuple(grad.shape)).sum_to_size(shape)
    return gx, gw, gb, None


linear.register_autograd(_linear_backward, setup_context=_linear_setup)


def _needs_operator(*tensors) -> bool:
    """A call that must record a gradient, or is being compiled or traced (torch.jit.trace records
    the operator; a direct call would be recorded as a constant), goes through the operator; eager
    inference calls tilegemm directly (the operator's dispatch costs microseconds)."""
    if _compiling() or _tracing():
        return True
    if not torch.is_grad_enabled():
        return False
    wants = False
    for t in tensors:  # (one pass; the class first: a subclass, DTensor's or a jagged nested tensor's, has no rule
        if t is None:  # for the operator and goes to torch, which records its gradient; so does an fx Proxy, whose
            continue  # requires_grad would be a Proxy that symbolic_trace cannot branch on; and a sparse or MKL-DNN
            # tensor, which the operator's forward hands to torch and whose rows its backward cannot take)
        if type(t) not in _PLAIN or t.is_nested or t.layout is not _STRIDED:
            return False
        wants = wants or t.requires_grad
    return wants


def _autocast(device: torch.device, *tensors):
    """The operands as autocast gives them to nn.functional.linear, torch.matmul and bmm where it
    is on for their device (floating tensors in its dtype), else as they are."""
    kind = device.type
    if not torch.is_autocast_enabled(kind):
        return tensors
    dtype = torch.get_autocast_dtype(kind)  # (float64 is left as it is, as autocast leaves it)
    return tuple(_cast(t, dtype) if t is not None and t.dtype in _AUTOCAST_FROM and t.device.type == kind
                 and t.dtype is not dtype else t for t in tensors)


def _cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """t in dtype. A parameter's cast (an FP32 leaf that requires grad) is asked of autocast itself,
    through einsum's identity, one of the products CUDA autocast casts for: autocast keeps that cast
    for its region, as it does for nn.functional.linear, and einsum returns it as a view. A layer
    of a decode loop in one region reads its BF16 weight, where a cast of its own each call read
    the FP32 weight and wrote the BF16 one (4096² on the H200: 35 µs a layer against torch's 25;
    docs/perf-notes.md, 130). On the host, where autocast casts no einsum, the cast is made here."""
    if (t.is_cuda and t.is_leaf and t.requires_grad and t.dim() == 2 and t.dtype is torch.float32
            and type(t) in _PLAIN and not _compiling()):  # (a subclass, DTensor's, has its own rules for einsum)
        t = _einsum("ij->ij", [t])  # (dynamo cannot trace _VF's functions; a compiled graph casts in the graph)
    return t if t.dtype is dtype else t.to(dtype)


# ---- patch(model) -----------------------------------------------------------------------------------


def _batches_differ(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do 3-D a and b differ in batch (bmm's rule, which does not broadcast)? Under torch.jit.trace
    the sizes are read with the tracer paused (a traced size compared was its TracerWarning)."""
    if _compiling() or not _tracing():  # (compiling first: dynamo breaks its graph at the tracer's query)
        return a.shape[0] != b.shape[0]
    with dispatch.checked_in_trace():
        return a.shape[0] != b.shape[0]


class _MatmulMode(torch.overrides.TorchFunctionMode):
    """Inside a patched model's forward: torch.matmul, torch.bmm and `@` on tensors through tilegemm,
    counted in the patch's counts."""

    FUNCS = {torch.matmul, torch.bmm, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.bmm}
    BMM = (torch.bmm, torch.Tensor.bmm)

    def __init__(self, counts: dict, tag: int):
        super().__init__()
        self.counts, self.tag = counts, tag

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.FUNCS and len(args) == 2 and not kwargs and all(isinstance(x, torch.Tensor) for x in args):
            a, b = args
            if func in self.BMM and (a.dim() != 3 or b.dim() != 3 or _batches_differ(a, b)):
                return func(*args)  # torch's own error for bmm's shape rule (no broadcasting)
            if _any_autocast():
                a, b = _autocast(a.device, a, b)
            if _functorch() or _fwad._current_level >= 0:
                c = torch.matmul(a, b)
                if not _compiling():  # (a count in compiled code is a constant it would compile again for)
                    self.counts["torch"] += 1
            elif _needs_operator(a, b):
                c = matmul(a, b, self.tag)  # counted by the operator, when it runs
            else:
                c = _matmul(a, b, self.counts)
            return c
        return func(*args, **kwargs)


class _ModeHooks:
    """The hooks that put a model's forward (patched with matmul=True) in _MatmulMode. The model
    holds them while patched: a copy then would take the mode with it, so copying is refused."""

    def __init__(self, counts: dict, tag: int):
        self.mode = _MatmulMode(counts, tag)

    def enter(self, module, args):  # a pre-hook's return value would replace the arguments: None
        self.mode.__enter__()

    def leave(self, module, args, out):  # (it runs even where a pre-hook before enter raised: then the mode on
        top = _modes()  # top is not ours, and popping would take the caller's; read from the stack, as a count
        if top and _mode_at(top - 1) is self.mode:  # of our own would be state torch.compile guards on)
            self.mode.__exit__(None, None, None)

    def __reduce__(self):
        raise TypeError("tilegemm.patch(model, matmul=True): the model holds the patch's hooks until undo(); "
                        "copy, pickle or save it after undo (a model patched without matmul=True copies as it was)")


def _forward(self, input):
    """nn.Linear.forward on tilegemm: the patched layer's class has this forward (until undo, when
    another class made on top of it, a parametrization's, keeps it: then it is Linear's again)."""
    try:
        on = self._tilegemm_on
    except AttributeError:  # a forward bound while patched and called after undo (a hook library keeps the layer's
        return type(self).forward(self, input)  # bound forward): its class's own, as the layer's forward is now
    if not on:
        return self._tilegemm_base.forward(self, input)
    try:  # what self.weight and self.bias give (Module.__getattr__ reads _parameters first), without
        # its two Python calls; a parametrized or re-registered weight is not there: asked for by name, as it is
        # where the layer's class gives weight or bias its own way (a property, a __getattr__ of its own)
        if self._tilegemm_by_name:
            raise KeyError
        params = self._parameters
        weight, bias = params["weight"], params["bias"]
    except KeyError:
        weight, bias = self.weight, self.bias
    # (autocast, torch.func, the operator, else tilegemm directly: _MatmulMode.__torch_function__'s order too,
    # written out in each rather than shared, as a call more on every layer's eager path would cost host time)
    if _any_autocast():
        input, weight, bias = _autocast(input.device, input, weight, bias)
    if _functorch() or _fwad._current_level >= 0:  # vmap, grad, jacrev: their wrapped tensors have no memory of
        # their own to hand a kernel; forward-mode AD's dual tensors: their tangents are torch's to carry
        y = torch.nn.functional.linear(input, weight, bias)
        if not _compiling():  # (a count in compiled code is a constant it would compile again for)
            self._tilegemm_counts["torch"] += 1
        return y
    if _needs_operator(input, weight, bias):  # counted by the operator when it runs (a count made here would
        # be a constant that torch.compile guards on, and it would compile again at each call)
        return linear(input, weight, bias, self._tilegemm_tag)
    return _linear(input, weight, bias, self._tilegemm_counts)


def _forward_in_mode(self, input):
    """_forward for a patch with matmul=True, whose model's forward runs in _MatmulMode: every
    tensor access of the layer's own path (shapes, strides, pointers, allocations) would go
    through the mode's Python (a layer ran at a third of its speed), so the layer runs with torch
    functions off. Only where the patch's mode is the one there is: a mode of the caller's, a
    subclass's __torch_function__ and the compiler (which traces the mode) each see the layer's
    path as before."""
    try:
        by_name = self._tilegemm_by_name
    except AttributeError:  # (bound while patched, called after undo: as _forward's)
        return _forward(self, input)
    params = {} if by_name else self._parameters  # (a by-name class's own weight: unchecked here)
    weight, bias = params.get("weight"), params.get("bias")
    if (type(input) is torch.Tensor and type(weight) in _PLAIN and (bias is None or type(bias) in _PLAIN)
            and _modes() == 1 and type(_mode_at(0)) is _MatmulMode and not _compiling()):
        with _no_torch_function():
            return _forward(self, input)
    return _forward(self, input)


def _reduce_unpatched(self, protocol):
    """A copy of a patched layer (copy.deepcopy, pickle, torch.save) is of the layer as it was:
    its own class, unpatched, made as protocols 0 and 1 make an object (copyreg, so that loading
    it needs no tilegemm). A class another made on top of the patched one is its maker's to copy."""
    ours = next(c for c in type(self).__mro__ if "_tilegemm_base" in vars(c))
    rv = super(ours, self).__reduce_ex__(protocol)
    if type(self) is not ours or not isinstance(rv, tuple):
        return rv
    if rv[0] is ours:  # (a __reduce__ of the layer's own class that makes type(self): its class, unpatched)
        return (ours._tilegemm_base, *rv[1:])
    if rv[0] not in _MAKERS or rv[1][0] is not ours:  # (one of its own with another maker: its maker and
        return rv  # arguments, as they are; made again from the state alone, the copy would have none)
    return (copyreg._reconstructor, (ours._tilegemm_base, object, None), *rv[2:])


def _refuse_script(self):
    """torch.jit.script asks each module for this before it compiles it: a patched layer's forward
    is Python that TorchScript cannot compile (it said "try blocks aren't supported", pointing into
    tilegemm), so it is refused here, in words. A layer whose patch is off (undone under a class made
    on top of it) is scripted as it is."""
    if not self._tilegemm_on:
        return self
    raise TypeError(f"torch.jit.script: {type(self).__name__} layer patched by tilegemm.patch: a patched layer's "
                    "forward is no TorchScript; script the model after undo(), or use torch.jit.trace or "
                    "torch.compile, which run it patched")


_MAKERS = (copyreg.__newobj__, copyreg.__newobj_ex__, copyreg._reconstructor)  # object's own reductions, whose
# first argument is the object's class


_OWN_WAY = ("weight", "bias", "__getattr__", "__getattribute__")


def _by_name(cls: type) -> bool:
    """Does a class between cls and nn.Linear give weight or bias its own way (a property, such as an
    equalized learning rate's scaled weight, a __getattr__ or __getattribute__ of its own)? Then a
    patched layer asks for them by name, as Linear.forward does, not in _parameters."""
    return any(name in vars(c) for c in cls.__mro__ if c not in torch.nn.Linear.__mro__ for name in _OWN_WAY)


def _lazy(module: torch.nn.Module) -> bool:
    """A LazyLinear before its first call: that call makes it a Linear (its class replaced), so a
    patch of it would not hold; it runs on torch, uncounted."""
    return isinstance(module, torch.nn.modules.lazy.LazyModuleMixin) and module.has_uninitialized_params()


def _routes_linear(module: torch.nn.Module) -> bool:
    """Does the layer run nn.Linear's forward, as its class's (a subclass that keeps it)? One with
    a forward of its own, in its class or set on it (a hook library's wrapper), is left as it is."""
    return type(module).forward is torch.nn.Linear.forward and "forward" not in vars(module)


class Patch:
    """What `patch(model)` did, and how to undo it. A context manager: the model is unpatched on exit.

    Each nn.Linear the model holds (not one patched already: that one stays its patch's) gets a
    subclass of its class whose forward runs on tilegemm; undo gives each its class back (or, where
    another class has been made on top of it since, a parametrization's, switches it off). Copies
    made meanwhile (deepcopy, pickle) are of the model as it was, but for such a layer, whose
    class is its maker's to copy. Linear layers with a forward of their own (in their class, or set
    on them by a hook library) run as they are, on torch, and are not counted; so does a LazyLinear
    before its first call, which makes it a Linear, and so do the products a model makes through
    nn.functional.linear, baddbmm or scaled_dot_product_attention (nn.MultiheadAttention's
    projections and attention, which never call their out_proj layer's forward). A model patched
    again after undo gets the same classes back, so a compiled model is compiled once for them
    (and a layer left under a class made on top of a patched one, a parametrization's, runs on
    tilegemm again with them, counted in the new patch's counts).

    Counts are of products run: a CUDA graph's replays (torch.cuda.graph, torch.compile's
    "reduce-overhead") run no Python and are not counted, nor is a product inside a torch.func
    transform that torch.compile compiles. They are plain increments: threads that share a patched
    model may lose some."""

    def __init__(self, model: torch.nn.Module, matmul_too: bool):
        self.model, self.layers, self.hooks, self.classes = model, [], [], {}
        self._live = {"tilegemm": 0, "torch": 0}
        self._frozen = None
        tag, kept = _KEPT.get(model, (None, None))
        reuse = kept is not None and not _LIVE.get(model)  # (a patch still on keeps its tag and classes)
        _LIVE[model] = _LIVE.get(model, 0) + 1
        if not reuse:
            kept = {}
        self._tag = tag if reuse else next(_TAGS)
        _COUNTERS[self._tag] = self._live
        try:  # (a class that cannot be made halfway, an __init_subclass__ that refuses: the layers done so far
            # are given back, as undo gives them)
            for module in model.modules():
                if not isinstance(module, torch.nn.Linear):
                    continue
                cls = type(module)
                if "_tilegemm_base" in vars(cls) and not cls._tilegemm_on:  # a patch undone under a class made on top,
                    cls = _retype(module, cls._tilegemm_base)  # which has gone since: the layer's own class again
                if hasattr(cls, "_tilegemm_base"):  # another patch's (or under a class made on top of one)
                    continue
                if not _routes_linear(module) or _lazy(module):
                    continue
                base = type(module)
                if base not in self.classes:
                    cls = kept.get((base, matmul_too)) if reuse else None
                    if cls is None:
                        cls = type(base.__name__, (base,), dict(
                            forward=_forward_in_mode if matmul_too else _forward, __reduce_ex__=_reduce_unpatched,
                            __prepare_scriptable__=_refuse_script,
                            __module__=base.__module__, _tilegemm_base=base, _tilegemm_tag=self._tag,
                            _tilegemm_by_name=_by_name(base)))
                        kept[(base, matmul_too)] = cls
                    cls._tilegemm_counts, cls._tilegemm_on = self._live, True
                    self.classes[base] = cls
                _retype(module, self.classes[base])
                self.layers.append(module)
            if reuse or tag is None:
                _KEPT[model] = (self._tag, kept)
            if matmul_too:
                hooks = _ModeHooks(self._live, self._tag)  # entered before the model's other pre-hooks (one that
                # raises would leave it unentered, and leave, which runs even then, would pop another mode), left
                # after its hooks
                self.hooks.append(model.register_forward_pre_hook(hooks.enter, prepend=True))
                self.hooks.append(model.register_forward_hook(hooks.leave, always_call=True))
        except BaseException:
            self.undo()
            raise

    @property
    def counts(self) -> dict:
        """The model's forward products since the patch, until undo: how many ran on tilegemm, how
        many on torch. (A gradient's products run where their forward ran; torchop.COUNTS has them.)"""
        return dict(self._live if self._frozen is None else self._frozen)

    def undo(self) -> None:
        if self._frozen is not None:  # undone already (its classes may be a later patch's now)
            return
        if _LIVE.get(self.model):
            _LIVE[self.model] -= 1
        mine = set(self.classes.values())
        for module in self.layers:
            if type(module) in mine:
                _retype(module, type(module)._tilegemm_base)
        for cls in mine:  # a layer whose class another made on top of ours since: Linear's forward from now
            cls._tilegemm_on = False
        for h in self.hooks:
            h.remove()
        self.layers, self.hooks = [], []
        self._frozen = dict(self._live)
        if _COUNTERS.get(self._tag) is self._live:
            del _COUNTERS[self._tag]

    def __enter__(self):
        if self._frozen is not None:  # (a with-block of it again ran the model unpatched, counting nothing)
            raise RuntimeError("tilegemm.patch: this patch was undone (a with-block's end undoes it); patch the "
                               "model again: with tilegemm.patch(model): ...")
        return self

    def __exit__(self, *exc):
        self.undo()
        return False


def _retype(module: torch.nn.Module, cls: type) -> type:
    """module's class set to cls (returned), and its __dict__ written (an entry put in and taken
    out). torch.compile guards a layer's class beneath its instance dict, and torch 2.11 skips that
    subtree while the dict's version tag is unchanged, which a class assignment leaves alone: a model
    compiled unpatched ran torch's graph once patched (after an undo, every later patch did)."""
    module.__class__ = cls
    d = module.__dict__
    d["_tilegemm_retyped"] = None
    del d["_tilegemm_retyped"]
    return cls


def patch(model: torch.nn.Module, *, matmul: bool = False) -> Patch:
    """Route every nn.Linear of `model` (and with matmul=True its torch.matmul/bmm/@ calls) through
    tilegemm, for the dtypes and devices it serves; returns the Patch (a context manager; .undo(),
    .counts).

    matmul=True holds for the model's forward, entered and left by hooks on `model`: what runs
    outside it is torch's. So activation checkpointing inside the model with use_reentrant=False,
    whose recomputation runs in the backward, outside the forward, would recompute on torch and
    find other saved tensors than the forward's (torch's CheckpointError); there, use
    use_reentrant=True or leave matmul off (the layers are patched either way). torch.jit.script
    cannot compile a patched layer's forward (TypeError, saying so): script the model unpatched."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"patch: expected a torch.nn.Module; got {type(model).__module__}.{type(model).__name__}")
    if type(matmul) is not bool and not (type(matmul) is int and matmul in (0, 1)):  # ("no" is truthy: it patched)
        raise TypeError(f"patch: matmul is True or False; got {matmul!r}")
    return Patch(model, matmul)
