"""`gemm`: the tensor-core entry point, with the precisions, scales and epilogue `matmul` leaves out.

    c = gemm(a, b)                                   # fp16/bf16 in, same out, FP32 accumulation
    c = gemm(a32, b32, precision="tf32")             # TF32: inputs rounded to 10-bit mantissas
    c = gemm(a8, b8, scale_a=sa, scale_b=sb)          # FP8 e4m3/e5m2, per-tensor scales, bf16 out
    c = gemm(a, b, alpha=2.0, beta=1.0, c=c0)        # c0 ← 2·A@B + c0, in place
    c = gemm(a3, b3)                                 # batched: B×M×K @ B×K×N (or a 2-D b, broadcast)

Precisions: "fp16", "bf16" (FP32 accumulation), "tf32" (FP32 inputs rounded to TF32 inside the
tensor cores: about 1e-3 relative error, NOT IEEE FP32), "ieee" (exact FP32 arithmetic, no tensor
cores, slow), "fp8" (float8_e4m3fn / float8_e5m2 inputs; other inputs are quantised with a
per-tensor scale, their finite amax / finfo.max, a NaN or ±Inf element to NaN; the tensor cores'
fast accumulation unless fast_accum=False, see `gemm`). "auto" takes the
precision the inputs' dtype implies, and FP32 inputs mean "ieee", never TF32 behind the caller's
back. Inputs of another dtype are converted on every call (FP32 at "bf16": a cast, as torch's
`.to()`; at "fp8": the quantisation above); a dense CUDA operand's conversion is a Triton kernel
(`kernels.tensorcore._convert`) that a repeated call's launch plan runs ahead of the GEMM's.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import struct
import sys

import numpy as np

from . import arrays, dispatch
from .errors import DeviceError, DTypeError, LayoutError, ShapeError

PRECISION_NAMES = ("auto", "fp16", "bf16", "tf32", "ieee", "fp8")


def _torch_in(x, what, torch, interpreted: bool = False):
    """(torch CUDA tensor, the caller's Operand); a torch CUDA tensor passes straight through
    (Operand None: the caller's kind is that tensor's). Under Triton's interpreter without a GPU:
    a torch CPU tensor, NumPy arrays taken as such."""
    if isinstance(x, torch.Tensor) and (x.is_cuda or interpreted):
        return x.resolve_neg(), None  # (a lazy negation's values, made real: the kernels read memory)
    op = arrays.describe(x, what)
    if op.kind == "numpy" and x.dtype.kind not in "biufc":  # (complex: refused by its precision, in words)
        raise DTypeError(f"gemm: {what} is a NumPy array of {x.dtype}; gemm multiplies numbers")
    if interpreted:
        if op.kind != "numpy":
            raise DeviceError(f"gemm: under Triton's interpreter {what} must be a torch CPU tensor or a NumPy array")
        return torch.from_numpy(arrays.host_view(op, torch_ok=True)), op
    return arrays.to_torch_cuda(op), op


def interpreted() -> bool:
    """Triton's interpreter on a machine without a GPU (TRITON_INTERPRET=1): the tensor-core
    kernels run on the CPU, in NumPy, for learning and tests; FP16 and FP32 only (it computes
    BF16 and FP8 dots wrongly without an error)."""
    import os

    import torch

    return os.environ.get("TRITON_INTERPRET") == "1" and not torch.cuda.is_available()


def gemm(a, b, *, precision: str = "auto", out_dtype=None, alpha: float = 1.0, beta: float = 0.0, c=None,
         scale_a=None, scale_b=None, kernel: str = "auto", fast_accum: bool = True):
    """C = alpha·(scale_a·A) @ (scale_b·B) + beta·C on the tensor cores (Triton).

    a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N); a 2-D operand broadcasts over the batch.
    Any strides (transposed views run without copies). Arrays of any kind tilegemm accepts; CUDA
    arrays are used in place, host arrays are copied to the GPU and the result back.
    precision: see the module docstring. out_dtype: "float16", "bfloat16", "float32" or a torch
    dtype; default: the input dtype for fp16/bf16, bfloat16 for fp8, float32 for tf32/ieee.
    c: existing output (beta ≠ 0 reads it); written in place and returned, in the caller's kind.
    alpha = 0 (either sign) computes no product, as BLAS (and torch.addmm on the CPU): C = beta·C
    (zeros with beta 0), whatever A and B hold (a NaN or inf in them does not reach C).
    scale_a, scale_b: per-tensor scales (float or one-element tensor), FP8 only.
    fast_accum: FP8 only (other precisions accumulate in FP32 anyway). True: the tensor cores'
    own accumulation, of fewer bits than FP32, as torch._scaled_mm(use_fast_accum=True) does: a
    long sum of one-signed products loses its small terms (the error of cuBLAS's fast mode, to the
    digit). False: the MMA's partial sum joins an FP32 accumulator every 128 of K, as
    torch._scaled_mm's default does, with its error, and slower: the promotion's adds, and but in
    t05's OVERLAP form a wait for the MMAs in flight at each. It has configurations of its own
    ("fp8-promoted" in the tuning database: `tilegemm tune --dtypes fp8-promoted`), from this
    GPU's database or, where it has none, that of the GPU most like it (same compute capability),
    else FP8's (which ran it at up to 2.2x its own tuning's time; docs/perf-notes.md, 145-147,
    have the figures).
    kernel: "auto" (the rung and configuration tilegemm.tuning gives the shape: see
    `tilegemm.explain`) or "tc_tiled", "tc_persistent", "tc_tma_persistent", "tc_splitk",
    "tc_warp_specialized", "tc_gemv" (M ≤ 4; past it t04 runs).
    A repeated call with the same shapes, strides, dtypes and arguments on torch CUDA tensors is
    served by its launch plan (tilegemm.dispatch): one allocation and one driver call per kernel,
    the kernels of a dense operand's conversion to the precision's dtype included (their results
    in the plan's scratch, which the stream's arena keeps between calls).
    """
    done = dispatch.fast_gemm(a, b, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel, fast_accum)
    if done is not None:
        return done
    from .kernels import tensorcore as tc

    dispatch.refuse_transformed("gemm", (a, "a"), (b, "b"), (c, "c"), (scale_a, "scale_a"), (scale_b, "scale_b"))
    loaded = sys.modules.get("torch")  # (a torch tensor means torch is loaded)
    tensor = getattr(loaded, "Tensor", None)  # (None while another thread's `import torch` is under way)
    traced = dispatch.traced(a, b)  # (these checks read sizes: under a trace, with the tracer paused)
    with dispatch.checked_in_trace() if traced else contextlib.nullcontext():
        for x, what in ((a, "a"), (b, "b"), (c, "c"), (scale_a, "scale_a"), (scale_b, "scale_b")):
            arrays.refuse_masked(x, what)
            if tensor is not None and isinstance(x, tensor):
                if x.is_nested or x.layout is not loaded.strided or x.device.type not in ("cuda", "cpu"):
                    arrays.describe(x, what)  # a sparse, nested or meta tensor: its LayoutError or DeviceError (a
                    # CUDA or interpreted one skips describe below)
                arrays.refuse_memoryless(x, what)  # (a ZeroTensor, a freed storage: describe's words, which a CUDA
                # one skips)
    if not isinstance(precision, str) or precision not in PRECISION_NAMES:  # (an array's `in`: ambiguous truth)
        raise DTypeError(f"gemm: precision must be one of {', '.join(PRECISION_NAMES)}; got {precision!r}")
    if not isinstance(kernel, str) or (kernel != "auto" and kernel not in tc.RUNGS):
        raise DTypeError(f"gemm: kernel must be 'auto' or one of {', '.join(tc.RUNGS)}; got {kernel!r}")
    if fast_accum.__class__ is not bool:  # (as torch._scaled_mm's use_fast_accum: a number or string is a mistake)
        raise DTypeError(f"gemm: fast_accum must be True or False; got {type(fast_accum).__name__} "
                         f"{fast_accum!r}"[:200])
    for v, what in ((alpha, "alpha"), (beta, "beta")):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise DTypeError(f"gemm: {what} must be a real number; got {type(v).__name__} {v!r}")
        if what == "beta" and c is None and v != 0:  # (the mistake itself, before its range: beta = 1e39 with no c
            raise ShapeError(f"gemm: beta = {beta} scales c, and no c was given")  # was said as past FP32's range)
        _check_fp32(v, what)
    if not tc.load():
        raise DeviceError(f"gemm: needs triton and torch ({tc.IMPORT_ERROR})")
    import torch

    _check_scale(scale_a, "scale_a", torch)
    _check_scale(scale_b, "scale_b", torch)

    interp = interpreted()
    if not torch.cuda.is_available() and not interp:
        raise DeviceError("gemm: needs a CUDA GPU (or, to learn and test on a CPU, Triton's interpreter: "
                          "TRITON_INTERPRET=1, FP16 and FP32)")
    if dispatch.plain(a) and dispatch.plain(b) and (dispatch.wants_grad(a, b) or traced):  # (a trace after the
        # checks above: their refusals, a machine without a GPU's among them, are the call's own)
        return _differentiable(a, b, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel)
    _refuse_grad(a, b, c, torch)
    _check_kinds_and_c(a, b, c, scale_a, scale_b)
    from .kernels.tensorcore import _problem as P

    with dispatch.memory_for("gemm: copying a and b to the GPU", sum(getattr(x, "nbytes", 0) for x in (a, b))):
        ta, A = _torch_in(a, "a", torch, interp)
        tb, _ = _torch_in(b, "b", torch, interp)
    b_in = b  # what the GEMM reads for b when no torch operation converts it
    if tb is ta and not interp and dispatch.plain(a):  # gemm(x, x): B a tensor of its own over the same memory and
        tb = b_in = ta[...]  # strides, as a launch plan binds its operand slots by identity (it then serves gemm(x, y))
    _check_shapes(ta, tb)
    if ta.device != tb.device:
        raise DeviceError(f"gemm: operands on different devices: {ta.device}, {tb.device}")
    batch = _batch(ta, tb)
    prec = precision
    if prec == "auto":
        if ta.dtype != tb.dtype:
            raise DTypeError(f"gemm: mixed dtypes {ta.dtype}, {tb.dtype}; name a precision or cast one")
        if ta.dtype not in (torch.float16, torch.bfloat16, torch.float32, *P.FP8_DTYPES):
            raise DTypeError(f"gemm: the tensor cores take float16, bfloat16, float32 or float8 inputs; got "
                             f"{ta.dtype} (name a precision to have them converted)")
        prec = P.precision_of(ta.dtype)
    if interp and prec not in ("fp16", "ieee", "tf32"):
        raise DTypeError(f"gemm: precision {prec} needs a GPU: Triton's interpreter computes BF16 and FP8 dots "
                         "wrongly without an error (FP16 and FP32 run under it)")
    da, db = _converted_dtype(ta, prec, scale_a, "a"), _converted_dtype(tb, prec, scale_b, "b")
    if da != db:
        raise DTypeError(f"gemm: mixed FP8 formats {da}, {db}; use one")
    odt = _out_dtype(out_dtype, prec, da)
    m, n = ta.shape[-2], tb.shape[-1]
    shape = (m, n) if batch is None else (batch, m, n)
    if c is not None:
        if arrays.self_overlapping(c):  # the caller's c: a host c's device copy is contiguous
            raise LayoutError(f"gemm: c {tuple(arrays.describe(c, 'c').shape)} has strides under which its "
                              "elements share memory (a broadcast view, stride 0, or strides shorter than the "
                              "dimensions inside them), and gemm writes C into c; pass a whole c (a bias row: "
                              "bias.expand(m, n).clone())")
        tc_out, O = _torch_in(c, "c", torch, interp)
        if tuple(tc_out.shape) != shape:
            raise ShapeError(f"gemm: c has shape {tuple(tc_out.shape)}; the product is {shape}")
        if tc_out.dtype != odt:
            raise DTypeError(f"gemm: c is {tc_out.dtype} but the result is {odt} "
                             f"({'out_dtype' if out_dtype is not None else 'the default for precision ' + repr(prec)})")
        if tc_out.device != ta.device:
            raise DeviceError(f"gemm: c is on {tc_out.device} but the operands are on {ta.device}")
    elif beta != 0:
        raise ShapeError(f"gemm: beta = {beta} scales c, and no c was given")
    else:
        with dispatch.memory_for(f"gemm: the {arrays.dims(shape)} {odt} result",
                                 math.prod(shape) * odt.itemsize):
            tc_out, O = torch.empty(shape, dtype=odt, device=ta.device), None
    if 0 in shape:
        return _back(tc_out, A, c, O)
    if ta.shape[-1] == 0 or alpha == 0:  # an empty sum; or alpha 0, where BLAS (and torch.addmm on the CPU) leave
        # A @ B uncomputed: a NaN or inf in A or B does not reach C, and -0.0 gives what 0.0 gives. Before the
        # operands' conversion: a strided one's copy (or FP8 quantisation) would be work, and memory, for nothing
        tc_out.mul_(beta) if beta != 0 else tc_out.zero_()
        return _back(tc_out, A, c, O)
    xa, sa, ka = _convert(ta, da, scale_a)
    xb, sb, kb = _convert(tb, db, scale_b)
    prologue = (*ka, *kb)
    if ka and kb:  # both converted: one launch a kernel for the two
        from .kernels.tensorcore._convert import paired

        prologue = paired(ka, kb)
    p = P.Problem(xa, xb, tc_out, prec, float(alpha), float(beta), tc_out if beta != 0 else None, sa, sb, fast_accum,
                  sources=(ta if ka else None, tb if kb else None), prologue=tuple(prologue))
    own = (False if ka and scale_a is None else _own_scale(scale_a, sa),  # (one the quantiser makes: scratch)
           False if kb and scale_b is None else _own_scale(scale_b, sb))
    planned = (not interp and (xa if not ka else ta) is a and (xb if not kb else tb) is b_in and dispatch.plain(a)
               and dispatch.plain(b) and None not in own and (c is None or (tc_out is c and dispatch.plain(c))))
    key = dispatch.gemm_key(a, b, a.data_ptr(), b.data_ptr(), precision, out_dtype, alpha, beta, c, scale_a,
                            scale_b, kernel, fast_accum) if planned else None
    with dispatch.on_device(xa.device):
        dispatch.run_problem(p, kernel, key, own_scales=own)
    return _back(tc_out, A, c, O)


def _refuse_grad(a, b, c, torch) -> None:
    """What gemm records no gradient of, refused while grad mode is on (plain a and b that require
    grad went to the operator): a c that requires grad (of any class), which gemm writes in place,
    and an a or b that requires grad beside one that is not a plain tensor (a subclass of the
    user's, another kind), whose product the kernels would run and return with no grad_fn,
    the operand's gradient through it silently left out."""
    if not torch.is_grad_enabled():
        return
    from .errors import AutogradError

    if isinstance(c, torch.Tensor) and c.requires_grad:
        raise AutogradError("gemm: c requires grad, and gemm writes C into c in place, recording no gradient; "
                            "pass c.detach(), or call under torch.no_grad()")
    for x, what in ((a, "a"), (b, "b")):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            raise AutogradError(f"gemm: {what} requires grad, and gemm records a gradient only of two plain torch "
                                f"tensors (torch.Tensor, nn.Parameter), not of a {type(a).__name__} and a "
                                f"{type(b).__name__}; pass {what}.detach(), or call under torch.no_grad()")


def _check_scale(s, what, torch) -> None:
    """A per-tensor scale is None, a real number, or one real element of a tensor or array; the
    products take no gradient to a scale (torch._scaled_mm has none either). A bool or a string
    was taken by float() as 1.0 or its number, a complex tensor lost its imaginary part with a
    warning, a list raised float()'s TypeError."""
    if s is None:
        return
    if isinstance(s, numbers.Real) and not isinstance(s, (bool, np.bool_)):
        _check_fp32(s, what)
        return
    if isinstance(s, torch.Tensor):
        real, size = not (s.dtype.is_complex or s.dtype is torch.bool), s.numel()
    elif isinstance(getattr(s, "dtype", None), np.dtype) and hasattr(s, "size") and hasattr(s, "item"):
        real, size = s.dtype.kind in "iuf", s.size  # (NumPy, CuPy)
    else:
        raise DTypeError(f"gemm: {what} must be a real number or a one-element tensor or array; got "
                         f"{type(s).__name__} {s!r}"[:200])
    if not real:
        raise DTypeError(f"gemm: {what} is of {s.dtype}; a scale is a real number")
    if size != 1:
        raise ShapeError(f"gemm: {what} has {size} elements; scales are per tensor (one element)")
    if s.dtype.itemsize > 4:  # a float64 (or int64) scale: its value is read, as FP32 is what the kernels scale
        # by (past float32's range a NumPy one raised torch.full's RuntimeError and a tensor became inf, below its
        # smallest subnormal 0). On a GPU that read is a sync, which a float32 scale, torch._scaled_mm's, never costs
        _check_fp32(s.item(), what)
    if isinstance(s, torch.Tensor) and s.requires_grad and torch.is_grad_enabled():
        from .errors import AutogradError

        raise AutogradError(f"gemm: {what} requires grad, and gemm records no gradient to a scale; pass "
                            f"{what}.detach(), or call under torch.no_grad()")


def _check_fp32(v, what) -> None:
    """alpha, beta and a number scale reach the kernels as FP32: one past its range would be inf
    (torch.addmm refuses it), a nonzero one below its smallest subnormal 0; NaN and ±inf are as given."""
    try:
        f = float(v)
    except OverflowError:
        raise DTypeError(f"gemm: {what} = {v} is past a float64's range") from None
    if isinstance(v, np.floating) and (math.isinf(f) and np.isfinite(v) or f == 0 and v != 0):  # (a longdouble:
        # float() gives inf or 0, silently)
        raise DTypeError(f"gemm: {what} = {v!s} is " + ("past a float64's range" if f else
                                                         "nonzero but smaller in magnitude than float32's smallest "
                                                         "subnormal, 1.4e-45 (the kernels scale in FP32: it would be 0)"))
    if f != 0 and math.isfinite(f):
        try:
            zero = struct.unpack("<f", struct.pack("<f", f))[0] == 0
        except OverflowError:
            raise DTypeError(f"gemm: {what} = {f!r} is past float32's range (the kernels scale in FP32: it would "
                             "be inf)") from None
        if zero:
            raise DTypeError(f"gemm: {what} = {f!r} is nonzero but smaller in magnitude than float32's smallest "
                             "subnormal, 1.4e-45 (the kernels scale in FP32: it would be 0)")


def _check_kinds_and_c(a, b, c, scale_a=None, scale_b=None) -> None:
    """What matmul refuses, refused here too: host operands of two kinds (the result's kind would be
    a guess), a c that shares memory with a, b or a scale tensor (C would overwrite what the product
    still reads) or that cannot be written."""
    if type(a) is not type(b):  # (operands of one type are of one kind: nothing to describe)
        arrays.refuse_two_host_kinds(arrays.describe(a, "a"), arrays.describe(b, "b"), "gemm")
    if c is None:
        return
    arrays.refuse_negated(c, "gemm: c")
    arrays.refuse_inference(c, "gemm: c")
    for x, what in ((a, "a"), (b, "b"), (scale_a, "scale_a"), (scale_b, "scale_b")):
        if arrays.overlaps(c, x):  # (None or a float scale: no memory, no overlap)
            raise LayoutError(f"gemm: c shares memory with {what}; C would overwrite {what} while the product reads it")
    if isinstance(c, np.ndarray) and not c.flags.writeable:
        raise LayoutError("gemm: c is read-only, and gemm writes C into it")


def _check_shapes(ta, tb) -> None:
    """gemm's shape rules: 2-D or 3-D operands whose inner dimensions agree."""
    if ta.dim() not in (2, 3) or tb.dim() not in (2, 3):
        raise ShapeError(f"gemm: a and b must be 2-D or 3-D; got {tuple(ta.shape)} and {tuple(tb.shape)}")
    if ta.shape[-1] != tb.shape[-2]:
        raise ShapeError(f"gemm: inner dimensions differ: a {tuple(ta.shape)}, b {tuple(tb.shape)}")


def _batch(ta, tb) -> int | None:
    """The product's batch (None: 2-D @ 2-D). A 2-D operand, or one of batch 1, broadcasts over the
    other's; batches of two other sizes do not broadcast."""
    sizes = [x.shape[0] for x in (ta, tb) if x.dim() == 3]
    if not sizes:
        return None
    if len(sizes) == 2 and sizes[0] != sizes[1] and 1 not in sizes:
        raise ShapeError(f"gemm: batches {sizes[0]} and {sizes[1]} do not broadcast (a {tuple(ta.shape)}, b "
                         f"{tuple(tb.shape)}): they must be equal, or one of them 1")
    return sizes[-1] if sizes[0] == 1 else sizes[0]


def _differentiable(a, b, precision, out_dtype, alpha, beta, c, scale_a, scale_b, kernel):
    """gemm on tensors that require grad, or under torch.jit.trace: the plain product (precision
    auto, FP16/BF16/FP32 inputs of one dtype, no alpha, beta, c, scales or output dtype) through
    tilegemm's operator, which autograd and the tracer see; anything else is refused rather than
    returned without its gradient, or recorded in the trace as a constant."""
    from .errors import AutogradError

    grad = dispatch.wants_grad(a, b)
    on = "on tensors that require grad" if grad else "under torch.jit.trace"
    with dispatch.checked_in_trace() if dispatch.tracing() else contextlib.nullcontext():  # (they read sizes)
        _check_shapes(a, b)  # (gemm's own contract, before the operator's)
        _batch(a, b)
        if a.dtype != b.dtype or str(a.dtype) not in ("torch.float16", "torch.bfloat16", "torch.float32"):
            raise DTypeError(f"gemm: {on}, float16, bfloat16 or float32 operands of one dtype; "
                             f"got {a.dtype} and {b.dtype}")
    plain = (precision == "auto" and out_dtype is None and alpha == 1.0 and beta == 0.0 and c is None
             and scale_a is None and scale_b is None and kernel == "auto")
    if not plain:
        raise AutogradError(f"gemm: {on} only the plain product is recorded (precision auto, no alpha, beta, c, "
                            "scales or out_dtype): " + ("detach the inputs, or use tilegemm.matmul" if grad
                                                        else "call it outside the trace"))
    from . import torchop

    return torchop.matmul(a, b)


def _own_scale(given, used):
    """Whether the scale tensor used is the API's own (from a float, or 1 for FP8 inputs without
    one): False where it is the caller's tensor (same memory), None where it is a converted copy
    of the caller's (a plan could not follow the caller's tensor)."""
    if used is None:
        return False
    if given is None or isinstance(given, (int, float)):
        return True
    return False if getattr(given, "data_ptr", lambda: -1)() == used.data_ptr() else None


def _converted_dtype(t, precision, scale, what):
    """The dtype `_convert` gives t at this precision, nothing converted yet; what no conversion
    gives (a complex operand, an FP8 one at another precision, a scale but for FP8) refused here."""
    import torch

    from .kernels.tensorcore import _problem as P

    if t.is_complex():  # (.to() and .float() would keep the real part, warning once a process)
        raise DTypeError(f"gemm: {what} is {t.dtype}; the tensor cores multiply real numbers")
    if precision == "fp8":
        return t.dtype if t.dtype in P.FP8_DTYPES else torch.float8_e4m3fn
    if scale is not None:
        raise DTypeError(f"gemm: scale_{what} is for precision='fp8' only")
    if t.dtype in P.FP8_DTYPES:
        raise DTypeError(f"gemm: {what} is {t.dtype}; use precision='fp8'")
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, "ieee": torch.float32}[precision]


def _convert(t, want, scale):
    """t in dtype want (`_converted_dtype`'s, which has checked it), the scale tensor (an FP8 want
    only), and the KernelCalls that fill both, not yet launched (a dense CUDA operand's cast or FP8
    quantisation: `kernels.tensorcore._convert`; the GEMM's launches follow them, in its launch plan
    too), else () with both made already."""
    import torch

    from .kernels.tensorcore import _problem as P

    if want in P.FP8_DTYPES:
        if t.dtype == want:
            return t, P.scale_tensor(1.0 if scale is None else scale, t.device), ()
        given = None if scale is None else P.scale_tensor(scale, t.device)
        conv = _kernels_for(t, torch)
        if conv:  # the same rule in two kernels, not nine
            return conv.fp8_calls(t, given)
        tf = t.detach().float()  # (a float64 element past float32's range is Inf from here on)
        if given is not None:
            s = given
        elif t.numel() == 0:  # nothing to quantise (amax of no elements is undefined)
            s = P.scale_tensor(1.0, t.device)
        else:  # quantise: per-tensor scale so that the finite amax maps to the e4m3 maximum (at least float32's
            # smallest normal, for an all-zero operand: a floor of amax at 1e-12 flushed operands below ~1e-15 to 0;
            # one NaN or Inf made the scale NaN or Inf, and every element 0 or NaN, not only its own row's products)
            amax = tf.abs().nan_to_num_(nan=0.0, posinf=0.0).amax()
            s = (amax / torch.finfo(torch.float8_e4m3fn).max).clamp(min=torch.finfo(torch.float32).tiny).reshape(1)
        nan = float("nan")  # (e4m3 has no Inf, and torch's cast saturates one to ±448: a product with it would be
        # finite; NaN, which e4m3 has, keeps it not)
        return (tf / s).nan_to_num_(nan=nan, posinf=nan, neginf=nan).to(torch.float8_e4m3fn), s, ()
    if t.dtype == want:
        return t, None, ()
    conv = _kernels_for(t, torch)
    if conv:  # one kernel, which a launch plan keeps ahead of the GEMM's
        y, calls = conv.cast_calls(t, want)
        return y, None, calls
    return t.to(want), None, ()


def _kernels_for(t, torch):
    """The conversion kernels' module (kernels.tensorcore._convert) where they take t: a dense CUDA
    operand of a float dtype, of at least one element, not under Triton's interpreter (its e4m3 cast
    mis-rounds); else None (torch's operations convert it)."""
    if not (t.is_cuda and t.numel() and t.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
            and os.environ.get("TRITON_INTERPRET") != "1"):
        return None
    from .kernels.tensorcore import _convert as conv

    return conv if conv.dense(t) else None


def _out_dtype(out_dtype, precision, in_dtype):
    import torch

    if out_dtype is None:
        return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.bfloat16}.get(precision, torch.float32)
    if isinstance(out_dtype, str):
        dt = getattr(torch, out_dtype, None)
    elif isinstance(out_dtype, torch.dtype):
        dt = out_dtype
    else:  # a NumPy dtype or type (np.float32): its name
        try:
            dt = getattr(torch, np.dtype(out_dtype).name, None)
        except (TypeError, ValueError):  # (np.dtype of a torch tensor: ValueError)
            dt = None
    if dt not in (torch.float16, torch.bfloat16, torch.float32):
        raise DTypeError(f"gemm: out_dtype must be float16, bfloat16 or float32; got {out_dtype}")
    return dt


def _back(t, A, c, O):
    """The caller's kind: c itself when given (copied back into a host c, O its description; a
    tensor's version counter moved on), else A's kind."""
    if c is not None:
        if O is not None and O.on_host:
            arrays.write_back(t, c, O)
        dispatch.written(c)
        return c
    if A is None:  # a torch CUDA tensor came in
        return t
    if A.kind == "numpy" and t.dtype == __import__("torch").bfloat16:
        return t.cpu()  # NumPy has no bfloat16: a torch CPU tensor
    return arrays.to_kind(t, A)
