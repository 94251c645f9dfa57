"""The bad-input table: calls a user may get wrong, and what tilegemm does with each, on a machine
without a GPU. tests/test_bad_inputs.py checks every row (the outcome, and the inputs unchanged);
scripts/update_docs.py runs the same rows and writes docs/bad-input.md from what they did.

A row's expectation is either an error (a tilegemm.errors type, which is also what NumPy or
torch raise in that case, and a fragment of its message) or "as numpy"/"as torch": the value,
type, dtype and shape that np.matmul / torch.matmul give for the same call (NaN where they give
NaN), warnings included where the row says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Outcome:
    raised: str | None = None  # the exception's class name
    message: str = ""  # its first line
    mro: tuple = ()  # the class's bases that a caller may catch
    value: object = None
    warned: str = ""  # the first warning's first line


@dataclass
class Case:
    group: str
    what: str
    run: Callable[[], tuple]  # () -> (fn, args, kwargs): the call to make (in this process)
    error: str | None = None  # the class name it must raise, or None: it must give what `like` gives
    match: str = ""  # a fragment of the message (or of the warning, with `like`)
    like: Callable | None = None  # (args, kwargs) -> NumPy's / torch's result
    env: dict | None = None  # run in a fresh process with these environment variables
    cpu_only: bool = False  # what a machine without a GPU does (with one, the call runs)
    code: str = ""  # the call, as Python, for a case run in a fresh process


def _f32(*shape, fill=None, seed=0):
    if fill is not None:
        return np.full(shape, fill, np.float32)
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _mm(*args, **kw):
    import tilegemm

    return tilegemm.matmul, args, kw


def _gemm(*args, **kw):
    import tilegemm

    return tilegemm.gemm, args, kw


def _np(args, kw):
    return np.matmul(*args)


def _torch(args, kw):
    import torch

    return torch.matmul(*args)


class _Sub(np.ndarray):
    """A NumPy subclass, as a user's own."""


def _TorchSub():
    """A subclass of torch.Tensor, as a user's own (made when a case runs: torch is imported late)."""
    import torch

    return type("Tagged", (torch.Tensor,), {})


class _OwnUfunc(np.ndarray):
    """A subclass that takes NumPy's ufuncs over itself, as a units library's does."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented


def _memmap():
    import tempfile

    m = np.memmap(tempfile.NamedTemporaryFile(delete=False).name, dtype=np.float32, mode="w+", shape=_A)
    m[:] = _f32(*_A)
    return m


def _torch_t(*shape, grad=False, dtype="float32", device="cpu"):
    import torch

    return torch.ones(*shape, dtype=getattr(torch, dtype), device=device, requires_grad=grad)


def _grad_fn(args, kw):
    """torch.matmul's result keeps a gradient graph; so must ours."""
    return "grad_fn" if _torch(args, kw).grad_fn is not None else "no grad_fn"


def _out_under_negated_a():
    """matmul multiplies a lazy negation's values in a copy; out over a's memory is still a's."""
    import torch

    a = torch.arange(16.0).reshape(4, 4)
    return _mm(torch._neg_view(a), torch.ones(4, 4), out=a)


def _under_vmap():
    """matmul(x, b) for each x of a batch, under torch.func.vmap."""
    import torch

    import tilegemm

    b = torch.ones(4, 5)
    return (lambda a: torch.func.vmap(lambda x: tilegemm.matmul(x, b))(a)), (torch.ones(2, 3, 4),), {}


def _dual():
    """matmul of a dual tensor, in a forward-mode AD dual level."""
    import torch
    import torch.autograd.forward_ad as fwad

    import tilegemm

    def call(a, b):
        with fwad.dual_level():
            return tilegemm.matmul(fwad.make_dual(a, torch.ones_like(a)), b)

    return call, (torch.ones(3, 4), torch.ones(4, 5)), {}


def _neg_view(*shape):
    """A torch tensor whose negative bit is set: x.conj().imag, x complex (its values: -x.imag)."""
    import torch

    return torch.complex(torch.zeros(shape), torch.arange(float(np.prod(shape))).reshape(shape)).conj().imag


def _inference(*shape):
    """A torch tensor made under torch.inference_mode (an inference tensor)."""
    import torch

    with torch.inference_mode():
        return torch.zeros(shape)


def _read_only():
    out = np.empty((3, 5), np.float32)
    out.flags.writeable = False
    return _mm(_f32(3, 4), _f32(4, 5), out=out)


def _broadcast_out():
    """A writeable view of one row repeated (stride 0): its elements share memory."""
    row = np.zeros(5, np.float32)
    return _mm(_f32(3, 4), _f32(4, 5), out=np.lib.stride_tricks.as_strided(row, (3, 5), (0, 4), writeable=True))


def _aliased():
    x = _f32(4, 4)
    return _mm(x, x, out=x)


def _overlapping():
    buf = _f32(4, 8)
    return _mm(buf[:, :4], _f32(4, 4, seed=1), out=buf[:, 2:6])


_A, _B = (3, 4), (4, 5)
_SUB = "import numpy as np, tilegemm; a = np.ones((4, 4), np.float32)"

CASES = [
    # ---- shapes and ranks
    Case("shapes", "inner dimensions differ (3×4 @ 3×4)", lambda: _mm(_f32(3, 4), _f32(3, 4)), "ShapeError",
         "inner dimensions differ"),
    Case("shapes", "inner dimensions differ, batched ((2,3,4) @ (2,5,6))", lambda: _mm(_f32(2, 3, 4), _f32(2, 5, 6)),
         "ShapeError", "inner dimensions differ"),
    Case("shapes", "batch dimensions that do not broadcast ((2,3,4) @ (3,4,5))",
         lambda: _mm(_f32(2, 3, 4), _f32(3, 4, 5)), "ShapeError", "do not broadcast"),
    Case("shapes", "a 0-D array operand", lambda: _mm(np.array(2.0, np.float32), _f32(*_B)), "ShapeError",
         "at least one dimension"),
    Case("shapes", "a NumPy scalar operand (np.float32(2), 0-D as np.matmul takes it)",
         lambda: _mm(np.float32(2.0), _f32(4)), "ShapeError", "at least one dimension"),
    Case("shapes", "1-D · 1-D of different lengths", lambda: _mm(_f32(3), _f32(4)), "ShapeError",
         "inner dimensions differ"),
    Case("shapes", "1-D · 1-D (a dot product: a 0-D result)", lambda: _mm(_f32(7), _f32(7, seed=1)), like=_np),
    Case("shapes", "1-D · 2-D", lambda: _mm(_f32(4), _f32(*_B)), like=_np),
    Case("shapes", "2-D · 1-D", lambda: _mm(_f32(*_A), _f32(4)), like=_np),
    Case("shapes", "batches that broadcast ((2,1,3,4) @ (5,4,2))", lambda: _mm(_f32(2, 1, 3, 4), _f32(5, 4, 2)),
         like=_np),
    Case("empty", "M = 0 (0×4 @ 4×5)", lambda: _mm(_f32(0, 4), _f32(*_B)), like=_np),
    Case("empty", "K = 0 (an empty sum: zeros)", lambda: _mm(_f32(3, 0), _f32(0, 5)), like=_np),
    Case("empty", "a zero batch ((0,3,4) @ (4,5))", lambda: _mm(_f32(0, 3, 4), _f32(*_B)), like=_np),
    # ---- what is passed
    Case("kinds", "a Python list", lambda: _mm([[1.0, 2.0], [3.0, 4.0]], _f32(2, 2)), "DTypeError",
         "expected a NumPy array"),
    Case("kinds", "a Python float (a scalar)", lambda: _mm(2.0, _f32(*_B)), "DTypeError", "got builtins.float"),
    Case("kinds", "None", lambda: _mm(None, _f32(*_B)), "DTypeError", "got builtins.NoneType"),
    Case("kinds", "a string", lambda: _mm("ab", _f32(*_B)), "DTypeError", "got builtins.str"),
    Case("kinds", "a NumPy masked array", lambda: _mm(np.ma.masked_array(_f32(*_A)), _f32(*_B)), "MaskedArrayError",
         "np.ma.dot"),
    Case("kinds", "an ndarray subclass (the result is of that subclass)", lambda: _mm(_f32(*_A).view(_Sub), _f32(*_B)),
         like=_np),
    Case("kinds", "np.matrix operands", lambda: _mm(np.asmatrix(_f32(*_A)), np.asmatrix(_f32(*_B))), like=_np),
    Case("kinds", "a np.memmap operand (the result is a plain array, as np.matmul's)", lambda: _mm(_memmap(), _f32(*_B)),
         like=_np),
    Case("kinds", "a subclass with its own __array_ufunc__ (units, lazy arrays)",
         lambda: _mm(_f32(*_A).view(_OwnUfunc), _f32(*_B)), "DTypeError", "overrides __array_ufunc__"),
    Case("kinds", "a subclass with its own __array_ufunc__, with out=",
         lambda: _mm(_f32(*_A).view(_OwnUfunc), _f32(*_B), out=np.zeros((3, 5), np.float32), kernel="cpu_naive"),
         "DTypeError", "overrides __array_ufunc__"),
    Case("kinds", "a CPU tensor of the user's subclass of torch.Tensor (said to be no torch tensor)",
         lambda: _mm(_torch_t(3, 4).as_subclass(_TorchSub()), _torch_t(4, 5)), "DTypeError",
         "a CPU tensor of a subclass of torch.Tensor"),
    Case("kinds", "a masked tensor, torch's own subclass (taken for a plain tensor: .numpy()'s RuntimeError)",
         lambda: _mm(__import__("torch").masked.as_masked_tensor(_torch_t(3, 4), _torch_t(3, 4) > 0), _torch_t(4, 5)),
         "DTypeError", "subclass of torch.Tensor, torch.masked.maskedtensor.core.MaskedTensor; tilegemm reads plain "
         "ones: use torch.matmul"),
    Case("kinds", "an nn.Linear passed for its weight (taken for a tensor: AttributeError 'is_nested')",
         lambda: _mm(_torch_t(3, 4), __import__("torch").nn.Linear(4, 5)), "DTypeError",
         "b: expected a NumPy array, a torch tensor"),
    Case("kinds", "out a torch.Size (AttributeError)",
         lambda: _mm(_torch_t(3, 4), _torch_t(4, 5), out=__import__("torch").Size([3, 5])), "DTypeError",
         "out: expected a NumPy array, a torch tensor"),
    Case("kinds", "a torch sparse tensor", lambda: _mm(_torch_t(3, 4).to_sparse(), _torch_t(4, 5)), "LayoutError",
         "layout torch.sparse_coo"),
    Case("kinds", "a lazily negated torch tensor (x.conj().imag: its memory holds x.imag)",
         lambda: _mm(_neg_view(3, 4), _torch_t(4, 5)), like=_torch),
    Case("kinds", "out a lazily negated torch tensor", lambda: _mm(_torch_t(3, 4), _torch_t(4, 5), out=_neg_view(3, 5)),
         "LayoutError", "lazy negation"),
    Case("kinds", "out the memory of a, a lazily negated torch tensor", lambda: _out_under_negated_a(), "LayoutError",
         "out shares memory with a"),
    Case("kinds", "a tensor inside torch.func.vmap (a wrapper with no memory of its own)",
         lambda: _under_vmap(), "AutogradError", "torch.func transform's tensor"),
    Case("kinds", "a forward-mode AD dual tensor (tilegemm carries no tangent)", lambda: _dual(), "AutogradError",
         "dual tensor"),
    Case("kinds", "Fortran order and negative strides", lambda: _mm(np.asfortranarray(_f32(*_A)), _f32(5, 4)[::-1].T),
         like=_np),
    Case("kinds", "a NumPy array with a torch CPU tensor", lambda: _mm(_f32(*_A), __import__("torch").from_numpy(
        _f32(*_B))), "DTypeError", "pass both of one kind"),
    Case("kinds", "torch tensors on the meta device", lambda: _mm(_torch_t(3, 4, device="meta"),
                                                                  _torch_t(4, 5, device="meta")),
         "DeviceError", "meta are not supported"),
    # ---- dtypes
    *[Case("dtypes", f"{dt} operands", lambda dt=dt: _mm(_f32(*_A).astype(dt), _f32(*_B).astype(dt)), "DTypeError",
           f"no kernel supports dtype {dt}") for dt in ("int32", "int64", "bool", "complex64", "object")],
    Case("dtypes", "torch int32 tensors", lambda: _mm(_torch_t(3, 4, dtype="int32"), _torch_t(4, 5, dtype="int32")),
         "DTypeError", "no kernel supports dtype int32"),
    Case("dtypes", "float32 with float64", lambda: _mm(_f32(*_A), _f32(*_B).astype(np.float64)), "DTypeError",
         "mixed dtypes"),
    Case("dtypes", "float16 NumPy arrays on a machine without a GPU (the tensor cores' dtype)",
         lambda: _mm(_f32(*_A).astype(np.float16), _f32(*_B).astype(np.float16)), "DTypeError",
         "float16 runs on a CUDA GPU", cpu_only=True),
    Case("dtypes", "bfloat16 torch CPU tensors on a machine without a GPU",
         lambda: _mm(_torch_t(3, 4, dtype="bfloat16"), _torch_t(4, 5, dtype="bfloat16")), "DTypeError",
         "bfloat16 runs on a CUDA GPU", cpu_only=True),
    # ---- out=
    Case("out", "out of the wrong shape", lambda: _mm(_f32(*_A), _f32(*_B), out=np.empty((3, 4), np.float32)),
         "ShapeError", "the product needs (3, 5)"),
    Case("out", "out of another dtype", lambda: _mm(_f32(*_A), _f32(*_B), out=np.empty((3, 5), np.float64)),
         "DTypeError", "out has dtype float64"),
    Case("out", "out read-only", _read_only, "LayoutError", "read-only"),
    Case("out", "out is an input (x @ x into x)", _aliased, "LayoutError", "shares memory with a"),
    Case("out", "out overlapping an input (another view of one buffer)", _overlapping, "LayoutError",
         "shares memory with a"),
    Case("out", "out a broadcast view (one row repeated: stride 0; torch refuses the same)", _broadcast_out,
         "LayoutError", "its elements share memory"),
    Case("out", "out of another kind (a torch tensor for NumPy operands)",
         lambda: _mm(_f32(*_A), _f32(*_B), out=__import__("torch").empty(3, 5)), "DTypeError", "they must match"),
    Case("out", "out a Python list", lambda: _mm(_f32(*_A), _f32(*_B), out=[[0.0] * 5] * 3), "DTypeError",
         "expected a NumPy array"),
    Case("out", "out a NumPy scalar, for a vector · vector product (np.matmul refuses the same)",
         lambda: _mm(_f32(4), _f32(4, seed=1), out=np.float32(7)), "DTypeError", "out is a NumPy scalar"),
    Case("out", "out not contiguous (every other column of a wider array)",
         lambda: _mm(_f32(*_A), _f32(*_B), out=np.zeros((3, 10), np.float32)[:, ::2]), like=_np),
    Case("out", "out an inference tensor (made under torch.inference_mode), written outside it (torch refuses the "
         "same)", lambda: _mm(_torch_t(3, 4), _torch_t(4, 5), out=_inference(3, 5)), "AutogradError",
         "inference tensor"),
    # ---- autograd
    Case("autograd", "a torch tensor that requires grad", lambda: _mm(_torch_t(3, 4, grad=True), _torch_t(4, 5)),
         like=_grad_fn),
    Case("autograd", "requires grad, float32 with float64 (torch refuses the same)",
         lambda: _mm(_torch_t(3, 4, grad=True), _torch_t(4, 5, dtype="float64")), "DTypeError", "mixed dtypes"),
    Case("autograd", "requires grad with a kernel named", lambda: _mm(_torch_t(3, 4, grad=True), _torch_t(4, 5),
                                                                      kernel="naive"),
         "AutogradError", "kernel='naive' with tensors that require grad"),
    Case("autograd", "requires grad with out= (torch refuses the same)",
         lambda: _mm(_torch_t(3, 4, grad=True), _torch_t(4, 5), out=_torch_t(3, 5)), "AutogradError",
         "out= with tensors that require grad"),
    Case("autograd", "out= that requires grad (torch refuses the same)",
         lambda: _mm(_torch_t(3, 4), _torch_t(4, 5), out=_torch_t(3, 5, grad=True)), "AutogradError",
         "out requires grad"),
    # ---- kernel names
    Case("kernels", "an unknown kernel name", lambda: _mm(_f32(*_A), _f32(*_B), kernel="nope"), "UnknownKernel",
         "no kernel named 'nope'"),
    Case("kernels", "a kernel name that is not a string", lambda: _mm(_f32(*_A), _f32(*_B), kernel=3), "UnknownKernel",
         "no kernel named 3"),
    Case("kernels", "a kernel name that is a list", lambda: _mm(_f32(*_A), _f32(*_B), kernel=["naive"]), "UnknownKernel",
         "no kernel named ['naive']"),
    Case("kernels", "a tensor-core kernel for float32", lambda: _mm(_f32(*_A), _f32(*_B), kernel="tc_persistent"),
         "DTypeError", "supports float16, bfloat16"),
    Case("kernels", "an FP32-only SIMT kernel for float64",
         lambda: _mm(_f32(*_A).astype(np.float64), _f32(*_B).astype(np.float64), kernel="vectorized"),
         "DTypeError", "supports float32"),
    Case("kernels", "gemm with a SIMT kernel's name", lambda: _gemm(_f32(*_A), _f32(*_B), kernel="naive"),
         "DTypeError", "kernel must be 'auto' or one of"),
    Case("gemm", "gemm with an unknown precision", lambda: _gemm(_f32(*_A), _f32(*_B), precision="fp4"), "DTypeError",
         "precision must be one of"),
    Case("gemm", "gemm with a string alpha", lambda: _gemm(_f32(*_A), _f32(*_B), alpha="2"), "DTypeError",
         "alpha must be a real number"),
    Case("gemm", "gemm with a 0-D tensor beta (a plan would keep its first value)",
         lambda: _gemm(_f32(*_A), _f32(*_B), beta=__import__("torch").tensor(1.0), c=_f32(3, 5)), "DTypeError",
         "beta must be a real number"),
    Case("gemm", "gemm with alpha True (it equals 1.0)", lambda: _gemm(_f32(*_A), _f32(*_B), alpha=True), "DTypeError",
         "alpha must be a real number"),
    *[Case("gemm", what, lambda kw=kw: _gemm(_f32(*_A), _f32(*_B), precision="fp8", **kw()), error, match)
      for what, kw, error, match in (
        ("gemm with a scale True (float() took it as 1.0)", lambda: dict(scale_a=True), "DTypeError",
         "scale_a must be a real number or a one-element tensor or array; got bool"),
        ("gemm with a scale given as a string", lambda: dict(scale_b="2"), "DTypeError",
         "scale_b must be a real number or a one-element tensor or array; got str"),
        ("gemm with a scale of two elements", lambda: dict(scale_a=np.array([1.0, 2.0], np.float32)), "ShapeError",
         "scale_a has 2 elements; scales are per tensor"),
        ("gemm with a complex scale (a cast would keep the real part)",
         lambda: dict(scale_b=__import__("torch").tensor(2 + 1j)), "DTypeError", "a scale is a real number"),
        ("gemm with a scale that requires grad (gemm records none to it)",
         lambda: dict(scale_a=__import__("torch").tensor(2.0, requires_grad=True)), "AutogradError",
         "scale_a requires grad"),
    )],
    Case("gemm", "gemm with alpha past float32's range (the kernels scale in FP32: it was inf)",
         lambda: _gemm(_f32(*_A), _f32(*_B), alpha=1e39), "DTypeError", "alpha = 1e+39 is past float32's range"),
    Case("gemm", "gemm with beta and no c", lambda: _gemm(_f32(*_A), _f32(*_B), beta=2.0), "ShapeError",
         "gemm: beta = 2.0 scales c, and no c was given"),
    Case("gemm", "gemm with beta past float32's range and no c (said as the range)",
         lambda: _gemm(_f32(*_A), _f32(*_B), beta=1e39), "ShapeError", "gemm: beta = 1e+39 scales c, and no c was given"),
    Case("gemm", "gemm with beta below float32's smallest subnormal (the kernels scale in FP32: it was 0)",
         lambda: _gemm(_f32(*_A), _f32(*_B), beta=1e-46, c=_f32(3, 5)), "DTypeError",
         "beta = 1e-46 is nonzero but smaller in magnitude than float32's smallest subnormal"),
    Case("gemm", "gemm with a scale past float64's range (float() raised OverflowError on a GPU)",
         lambda: _gemm(_f32(*_A), _f32(*_B), precision="fp8", scale_a=10 ** 400), "DTypeError",
         "scale_a = 1000"),
    Case("gemm", "gemm with a scale past float32's range (torch.full raised RuntimeError on a GPU)",
         lambda: _gemm(_f32(*_A), _f32(*_B), precision="fp8", scale_b=1e39), "DTypeError",
         "scale_b = 1e+39 is past float32's range"),
    Case("gemm", "gemm with a scale a NumPy float64 array past float32's range (torch.full raised RuntimeError on a "
         "GPU)",
         lambda: _gemm(_f32(*_A), _f32(*_B), precision="fp8", scale_a=np.array([1e39])), "DTypeError",
         "scale_a = 1e+39 is past float32's range"),
    Case("gemm", "gemm with a scale a float64 torch tensor below float32's smallest subnormal (it became 0)",
         lambda: _gemm(_f32(*_A), _f32(*_B), precision="fp8", scale_b=__import__("torch").tensor(1e-50,
                                                                                    dtype=__import__("torch").float64)),
         "DTypeError", "scale_b = 1e-50 is nonzero but smaller in magnitude than float32's smallest subnormal"),
    *([Case("gemm", "gemm with alpha a NumPy longdouble past a float64's range (float() made it inf)",
            lambda: _gemm(_f32(*_A), _f32(*_B), alpha=np.longdouble("1e4000")), "DTypeError",
            "alpha = 1e+4000 is past a float64's range"),
       Case("gemm", "gemm with beta a NumPy longdouble below a float64's smallest subnormal (float() made it 0)",
            lambda: _gemm(_f32(*_A), _f32(*_B), beta=np.longdouble("1e-4000"), c=_f32(3, 5)), "DTypeError",
            "beta = 1e-4000 is nonzero but smaller in magnitude")]
      if np.finfo(np.longdouble).maxexp > 1024 else []),  # (a longdouble wider than a float64: x86's 80 bits)
    Case("gemm", "gemm with the precision a NumPy array of names (its `in` raised ValueError)",
         lambda: _gemm(_f32(*_A), _f32(*_B), precision=np.array(["ieee", "fp16"])), "DTypeError",
         "precision must be one of"),
    Case("gemm", "gemm with a sparse torch operand (nbytes raised RuntimeError)",
         lambda: _gemm(__import__("torch").ones(3, 4).to_sparse(), __import__("torch").ones(4, 5)), "LayoutError",
         "a: a torch tensor of layout torch.sparse_coo"),
    Case("gemm", "gemm with a sparse torch c (data_ptr raised RuntimeError)",
         lambda: _gemm(__import__("torch").ones(3, 4), __import__("torch").ones(4, 5), precision="ieee",
                       c=__import__("torch").zeros(3, 5).to_sparse()), "LayoutError",
         "c: a torch tensor of layout torch.sparse_coo"),
    Case("gemm", "gemm with c a broadcast bias row (gemm writes C into c)", None, "LayoutError",
         "its elements share memory", env={"TRITON_INTERPRET": "1"},
         code="import torch, tilegemm; a = torch.ones(3, 4); tilegemm.gemm(a, torch.ones(4, 5), precision='ieee', "
              "beta=1.0, c=torch.zeros(5).expand(3, 5))"),
    Case("gemm", "gemm with c a writeable NumPy view of one row repeated (its copy on the GPU would not be)", None,
         "LayoutError", "its elements share memory", env={"TRITON_INTERPRET": "1"},
         code="import numpy as np, tilegemm; c = np.lib.stride_tricks.as_strided(np.zeros(5, np.float32), (3, 5), "
              "(0, 4), writeable=True); tilegemm.gemm(np.ones((3, 4), np.float32), np.ones((4, 5), np.float32), "
              "precision='ieee', beta=1.0, c=c)"),
    *[Case("gemm", what, None, error, match, env={"TRITON_INTERPRET": "1"},
           code="import numpy as np, torch, tilegemm; a, b = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32); "
                + call) for what, error, match, call in (
        ("gemm with complex operands and a named precision (a cast would keep the real part)", "DTypeError",
         "multiply real numbers", "tilegemm.gemm(a.astype(np.complex64), b.astype(np.complex64), precision='ieee')"),
        ("gemm with object arrays", "DTypeError", "gemm multiplies numbers", "tilegemm.gemm(a.astype(object), b)"),
        ("gemm with alpha past a float64's range", "DTypeError", "past a float64's range",
         "tilegemm.gemm(a, b, alpha=10 ** 400)"),
        ("gemm with a kernel name that is a list", "DTypeError", "kernel must be 'auto'",
         "tilegemm.gemm(torch.ones(3, 4), torch.ones(4, 5), kernel=['tc_tiled'])"),
        ("gemm with c that requires grad (gemm writes into it)", "AutogradError", "c requires grad",
         "tilegemm.gemm(torch.ones(3, 4), torch.ones(4, 5), precision='ieee', c=torch.zeros(3, 5, requires_grad=True))"),
        ("gemm with a 1-D operand that requires grad", "ShapeError", "must be 2-D or 3-D",
         "tilegemm.gemm(torch.ones(4, requires_grad=True), torch.ones(4, 5))"),
        ("gemm with float64 operands that require grad", "DTypeError", "on tensors that require grad",
         "tilegemm.gemm(torch.ones(3, 4, dtype=torch.float64, requires_grad=True), torch.ones(4, 5, dtype=torch.float64))"),
        ("gemm with out_dtype a torch tensor (np.dtype raised ValueError)", "DTypeError", "out_dtype must be",
         "tilegemm.gemm(a, b, out_dtype=torch.ones(2))"),
        ("gemm with a CSR torch operand under the interpreter (a kernel's stride() raised RuntimeError)",
         "LayoutError", "b: a torch tensor of layout torch.sparse_csr",
         "tilegemm.gemm(torch.ones(3, 4), torch.ones(4, 5).to_sparse_csr(), precision='ieee')"),
        ("gemm with out_dtype a NumPy type (np.float16)", None, "",
         "c = tilegemm.gemm(a, b, out_dtype=np.float16); assert c.dtype == np.float16 and float(c[0, 0]) == 4.0"),
    )],
    Case("gemm", "gemm on a machine without a GPU (and without TRITON_INTERPRET=1)",
         lambda: _gemm(_f32(*_A), _f32(*_B)), "DeviceError", "needs a CUDA GPU", cpu_only=True),
    # ---- values
    Case("memory", "a host result larger than the memory available (200,000² float64 from stride-0 operands)",
         lambda: _mm(*(lambda v: (v, v.T))(np.lib.stride_tricks.as_strided(np.ones(1), (200_000, 1), (0, 0)))),
         "OutOfHostMemory", "GiB of host memory", cpu_only=True),
    Case("memory", "a batched host result larger than the memory available (NumPy allocated it unchecked)",
         lambda: _mm(*(lambda v: (v[None], v.T))(np.lib.stride_tricks.as_strided(np.ones(1), (200_000, 1), (0, 0)))),
         "OutOfHostMemory", "GiB of host memory", cpu_only=True),
    Case("values", "NaN in A (propagates as in the float64 product)",
         lambda: _mm(np.where(np.eye(3, 4) > 0, np.nan, _f32(*_A)).astype(np.float32), _f32(*_B)), like=_np),
    Case("values", "Inf · 0 (NaN, as IEEE and NumPy)",
         lambda: _mm(np.array([[np.inf, 1.0]], np.float32), np.array([[0.0], [1.0]], np.float32)), like=_np),
    Case("values", "±Inf in both (Inf − Inf: NaN)",
         lambda: _mm(np.array([[np.inf, np.inf]], np.float32), np.array([[1.0], [-1.0]], np.float32)), like=_np),
    Case("values", "a product past float32's range (Inf, with NumPy's overflow warning)",
         lambda: _mm(_f32(2, 2, fill=1e30), _f32(2, 2, fill=1e30)), like=_np, match="overflow", cpu_only=True),
    # ---- the environment and the files tilegemm reads (each in a fresh process)
    Case("environment", "TILEGEMM_SIMULATOR=maybe", None, "ConfigError", "TILEGEMM_SIMULATOR='maybe'",
         env={"TILEGEMM_SIMULATOR": "maybe"}, code=f"{_SUB}; tilegemm.matmul(a, a)"),
    Case("environment", "TILEGEMM_SIMULATOR=0 (never the simulator) with NUMBA_ENABLE_CUDASIM=1", None, "ConfigError",
         "forbids Numba's CUDA simulator, which NUMBA_ENABLE_CUDASIM='1' asks for",
         env={"TILEGEMM_SIMULATOR": "0", "NUMBA_ENABLE_CUDASIM": "1"}, code=f"{_SUB}; tilegemm.matmul(a, a)"),
    Case("environment", "TILEGEMM_SIMULATOR=0 after the caller imported numba.cuda with its simulator", None,
         "ConfigError", "numba.cuda was imported with its simulator before tilegemm",
         env={"TILEGEMM_SIMULATOR": "0", "NUMBA_ENABLE_CUDASIM": "1"},
         code=f"from numba import cuda; {_SUB}; tilegemm.matmul(a, a)"),
    Case("environment", "TILEGEMM_AUTOTUNE=maybe (read by the autotuned SIMT kernel)", None, "ConfigError",
         "TILEGEMM_AUTOTUNE='maybe'", env={"TILEGEMM_AUTOTUNE": "maybe"},
         code=f"{_SUB}; tilegemm.matmul(a, a, kernel='autotuned')"),
    Case("environment", "a corrupt tuning cache file (the autotuned kernel's): a warning, then the default",
         None, None, "ignoring k11's tuning cache", env={"TILEGEMM_CACHE_DIR": "{tmp}"},
         code=f"{_SUB}; open('{{tmp}}/autotune.json', 'w').write('{{bad'); "
              "r = tilegemm.matmul(a, a, kernel='autotuned'); assert (r == 4).all()"),
]


def outcome_here(case: Case) -> tuple[Outcome, tuple]:
    """Make the case's call in this process: (what happened, the call's (args, kwargs))."""
    fn, args, kw = case.run()
    out = Outcome()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out.value = fn(*args, **kw)
        except Exception as e:  # noqa: BLE001  (the table records what was raised)
            out.raised, out.message = type(e).__name__, (str(e).splitlines() or [""])[0]
            out.mro = tuple(c.__name__ for c in type(e).__mro__[1:] if c.__module__ == "builtins"
                            and c not in (Exception, BaseException, object))
    mine = [w for w in seen if "Numba" not in str(w.category.__name__) and "Performance" not in str(w.message)]
    out.warned = str(mine[0].message).splitlines()[0] if mine else ""
    return out, (args, kw)


def outcome_fresh(case: Case, tmp: str) -> Outcome:
    """Make the case's call in a fresh Python process with its environment variables."""
    code = case.code.replace("{tmp}", tmp)
    wrapper = ("import json, warnings\nwarnings.simplefilter('always')\nout = {}\n"
               "with warnings.catch_warnings(record=True) as seen:\n"
               "    warnings.simplefilter('always')\n    try:\n"
               + "".join(f"        {line}\n" for line in code.split("; ")) +
               "    except Exception as e:\n"
               "        out = dict(raised=type(e).__name__, message=(str(e).splitlines() or [''])[0],\n"
               "                   mro=[c.__name__ for c in type(e).__mro__[1:] if c.__module__ == 'builtins'\n"
               "                        and c not in (Exception, BaseException, object)])\n"
               "mine = [str(w.message) for w in seen if 'tilegemm' in str(w.message)]\n"
               "out['warned'] = mine[0].splitlines()[0] if mine else ''\n"
               "print('OUTCOME' + json.dumps(out))\n")
    path = os.pathsep.join(filter(None, [os.path.join(ROOT, "src"), os.environ.get("PYTHONPATH")]))  # (src first,
    # then the caller's path: the GPU machines' numpy wheel, which numba-cuda needs)
    env = dict(os.environ, PYTHONPATH=path, **{k: v.replace("{tmp}", tmp) for k, v in (case.env or {}).items()})
    env.setdefault("TILEGEMM_CACHE_DIR", tmp)
    proc = subprocess.run([sys.executable, "-c", wrapper], env=env, capture_output=True, text=True, timeout=300)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("OUTCOME")]
    if not line:
        return Outcome(raised="crash", message=(proc.stderr.strip().splitlines() or ["no output"])[-1])
    got = json.loads(line[0][len("OUTCOME"):].replace(tmp, "$TILEGEMM_CACHE_DIR"))
    return Outcome(raised=got.get("raised"), message=got.get("message", ""), mro=tuple(got.get("mro", ())),
                   warned=got.get("warned", ""))


def behaviour(case: Case, got: Outcome) -> str:
    """The table's words for what a case did."""
    if got.raised:
        bases = f" (a {' and a '.join(got.mro)})" if got.mro else ""
        return f"`{got.raised}`{bases}: {got.message}"
    ref = "torch.matmul" if case.like is _grad_fn or case.like is _torch else "np.matmul"
    said = "runs" if case.like is None else f"the result {ref} gives"
    if case.like is _grad_fn:
        said = "differentiable: the result has a grad_fn, as torch.matmul's (backward runs tilegemm's GEMMs)"
    elif got.value is not None and case.like is not None:
        v = got.value
        said += f" ({type(v).__name__}, {getattr(v, 'dtype', '')}, shape {tuple(getattr(v, 'shape', ()))})"
    return said + (f"; warns: {got.warned}" if got.warned else "")
