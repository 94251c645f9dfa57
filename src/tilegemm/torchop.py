"""tilegemm as torch operators: `torch.ops.tilegemm.matmul` and `torch.ops.tilegemm.linear`.

They are registered with `torch.library` (each with a fake implementation, so `torch.compile`
traces them without a graph break, and an autograd formula whose backward runs tilegemm's own
GEMMs), and `patch(model)` routes a model's `nn.Linear` layers (and, opted in, its
`torch.matmul`/`bmm` calls) through them:

    with tilegemm.patch(model) as p:      # or p = tilegemm.patch(model); …; p.undo()
        logits = model(tokens)
    print(p.counts)                        # {'tilegemm': 128, 'torch': 2}: who ran each product

A product tilegemm serves (float32/float64 on the host; float16, bfloat16, float32 and float64 on
a CUDA GPU, operands of one dtype and device) runs on tilegemm; any other (bfloat16 on the host,
mixed dtypes, …) runs on torch, and `counts` says how many went each way. In eager inference
(no gradient to record, not being compiled) a patched layer calls tilegemm directly, without the
operator's dispatch; a call that must record a gradient or is being traced goes through the
operator. Importing this module imports torch: `tilegemm.patch` imports it on first use.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import api, arrays, dispatch

COUNTS = {"tilegemm": 0, "torch": 0}  # every product the operators and patched layers ran, by who ran it


_HOST = frozenset((torch.float32, torch.float64))
_fast_linear = dispatch.fast_linear
_CUDA = frozenset((torch.float16, torch.bfloat16, torch.float32, torch.float64))


def served(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Does tilegemm run a product of these (one dtype and device, a dtype it has a kernel for)?
    (Asked before every patched layer's product: dtypes and layouts are singletons, compared by
    identity; devices by index and kind, without building torch.device objects.)"""
    dtype = a.dtype
    if dtype is not b.dtype or a.layout is not torch.strided or b.layout is not torch.strided:
        return False
    if a.is_cuda:
        return b.is_cuda and a.get_device() == b.get_device() and dtype in _CUDA
    return a.is_cpu and b.is_cpu and dtype in _HOST


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b on tilegemm where it serves them, else on torch (the operator's body runs it under
    no_grad; the eager path calls it only where nothing requires grad)."""
    if served(a, b):
        COUNTS["tilegemm"] += 1
        return api.matmul(a, b)
    COUNTS["torch"] += 1
    return torch.matmul(a, b)


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """x @ weight.T (+ bias), as nn.functional.linear, on tilegemm where it serves them (no
    gradient recorded: as _matmul). On the tensor cores a bias that is a contiguous row of x's
    dtype on x's device is added in the kernel's epilogue (`dispatch.linear_bias`); any other
    bias, and any on the SIMT path, by torch after the product. A repeated call (x's shape and
    strides, the weight's and the bias's, their dtype and device) goes by its linear plan
    (`dispatch.fast_linear`): no view is made of either."""
    y = _fast_linear(x, weight, bias)
    if y is not None:
        COUNTS["tilegemm"] += 1
        return y
    if not served(x, weight):
        COUNTS["torch"] += 1
        return torch.nn.functional.linear(x, weight, bias)
    COUNTS["tilegemm"] += 1
    flat = x.dim() == 2
    rows, wt = x if flat else x.reshape(-1, x.shape[-1]), weight.t()  # a view for a contiguous activation
    kern = None if bias is None else _epilogue(x, rows, wt, bias)
    if kern is not None:
        return dispatch.linear_bias(x, weight, bias, rows, wt, kern)
    y = api.matmul(rows, wt)
    if x.is_cuda:
        dispatch.remember_linear(x, weight, rows, wt, bias)
    y = y if flat else y.view(*x.shape[:-1], weight.shape[0])
    return y if bias is None else _add_bias(y, bias)


_EPILOGUE = frozenset((torch.float16, torch.bfloat16))


def _epilogue(x: torch.Tensor, rows: torch.Tensor, wt: torch.Tensor, bias: torch.Tensor):
    """The rung that adds this bias to x's product in its epilogue, or None: matmul's own choice
    for x's rows on a GPU (K > 0) where it is a tensor-core rung and x FP16/BF16, or a SIMT rung
    that reads the weight's rows in place and adds a bias (`reads_wt`: FP32) where x's rows and
    the weight are C-contiguous; the bias a plain contiguous row of N of x's dtype on x's device."""
    if not (x.is_cuda and x.shape[-1] > 0 and dispatch.plain(bias) and bias.dtype is x.dtype and bias.dim() == 1
            and bias.shape[0] == wt.shape[1] and bias.stride(0) == 1 and bias.is_cuda
            and bias.get_device() == x.get_device()):
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
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b (numpy.matmul's semantics) on tilegemm, differentiable."""
    with torch.no_grad():
        return _matmul(a, b)


@matmul.register_fake
def _matmul_fake(a, b):
    from .nd import result_shape

    *_, shape = result_shape(tuple(a.shape), tuple(b.shape))
    return a.new_empty(shape)


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, grad):
    """d(a @ b): grad @ bᵀ and aᵀ @ grad, each summed over the batch dimensions an operand was
    broadcast along, on tilegemm's GEMMs (through the operator: differentiable again)."""
    a, b = ctx.saved_tensors
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    g = grad  # back to the promoted shapes: b's dimension first, so that a 0-D grad of vector·vector works
    if b.dim() == 1:
        g = g.unsqueeze(-1)
    if a.dim() == 1:
        g = g.unsqueeze(-2)
    ga = gb = None
    if ctx.needs_input_grad[0]:
        ga = matmul(g, b2.transpose(-1, -2)).sum_to_size(a2.shape).reshape(a.shape)
    if ctx.needs_input_grad[1]:
        gb = matmul(a2.transpose(-1, -2), g).sum_to_size(b2.shape).reshape(b.shape)
    return ga, gb


matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup)


@torch.library.custom_op("tilegemm::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """nn.functional.linear(x, weight, bias) on tilegemm, differentiable."""
    with torch.no_grad():
        return _linear(x, weight, bias)


@linear.register_fake
def _linear_fake(x, weight, bias=None):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None


def _linear_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    g = grad.reshape(-1, grad.shape[-1])
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        gx = matmul(g, weight).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        gw = matmul(g.t(), x.reshape(-1, x.shape[-1]))
    if ctx.has_bias and ctx.needs_input_grad[2]:
        gb = g.sum(0)
    return gx, gw, gb


linear.register_autograd(_linear_backward, setup_context=_linear_setup)


def _needs_operator(*tensors) -> bool:
    """A call that must record a gradient, or is being traced by torch.compile, goes through the
    operator; eager inference calls tilegemm directly (the operator's dispatch costs microseconds)."""
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


# ---- patch(model) -----------------------------------------------------------------------------------


class _MatmulMode(torch.overrides.TorchFunctionMode):
    """Inside a patched model's forward: torch.matmul, torch.bmm and `@` on tensors through tilegemm."""

    FUNCS = {torch.matmul, torch.bmm, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.bmm}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.FUNCS and len(args) == 2 and not kwargs and all(isinstance(x, torch.Tensor) for x in args):
            a, b = args
            if func in (torch.bmm, torch.Tensor.bmm) and (a.dim() != 3 or b.dim() != 3):
                return func(*args)  # torch's own error for bmm's shape rule
            if _needs_operator(a, b):
                return matmul(a, b)
            return _matmul(a, b)
        return func(*args, **kwargs)


class Patch:
    """What `patch(model)` did, and how to undo it. A context manager: the model is unpatched on exit."""

    def __init__(self, model: torch.nn.Module, matmul_too: bool):
        self.model, self.layers, self.hooks = model, [], []
        self.start = dict(COUNTS)
        for module in model.modules():
            if type(module) is torch.nn.Linear or (isinstance(module, torch.nn.Linear) and "forward" not in vars(type(module))):
                module.forward = _patched_forward.__get__(module)
                self.layers.append(module)
        if matmul_too:
            mode = _MatmulMode()

            def enter(module, args):  # a hook's return value would replace the arguments: return None
                mode.__enter__()

            def leave(module, args, out):
                mode.__exit__(None, None, None)

            self.hooks.append(model.register_forward_pre_hook(enter))
            self.hooks.append(model.register_forward_hook(leave, always_call=True))  # popped even if forward raises

    @property
    def counts(self) -> dict:
        """Products since the patch: how many ran on tilegemm, how many on torch."""
        return {k: COUNTS[k] - self.start[k] for k in COUNTS}

    def undo(self) -> None:
        for module in self.layers:
            vars(module).pop("forward", None)
        for h in self.hooks:
            h.remove()
        self.layers, self.hooks = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.undo()
        return False


def _patched_forward(self, x):
    try:  # what self.weight and self.bias give (Module.__getattr__ reads _parameters first), without
        # its two Python calls; a parametrized or re-registered weight is not there: asked for by name
        params = self._parameters
        weight, bias = params["weight"], params["bias"]
    except KeyError:
        weight, bias = self.weight, self.bias
    if _needs_operator(x, weight, bias):
        return linear(x, weight, bias)
    return _linear(x, weight, bias)


def patch(model: torch.nn.Module, *, matmul: bool = False) -> Patch:
    """Route every nn.Linear of `model` (and with matmul=True its torch.matmul/bmm/@ calls) through
    tilegemm, for the dtypes and devices it serves; returns the Patch (a context manager; .undo(),
    .counts)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"patch: expected a torch.nn.Module; got {type(model).__module__}.{type(model).__name__}")
    return Patch(model, matmul)
