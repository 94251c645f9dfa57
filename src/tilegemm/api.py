"""The library API: `matmul`, `explain`, `kernels`.

    c = tilegemm.matmul(a, b)                        # NumPy in, NumPy out
    c = tilegemm.matmul(a_cuda, b_cuda, kernel="smem_tiled_32")   # torch/CuPy/Numba in, same out

Data flows one way: a repeated call on torch CUDA tensors is served by its launch plan
(`dispatch.fast_matmul`). Otherwise: normalise the operands (arrays.py), check them, choose a
kernel from the registry, and hand them to `dispatch`, which moves them to the kernel's array
kind (no copy for CUDA arrays), launches (keeping a plan for next time), and hands back the
caller's kind.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import _cuda, arrays, dispatch, registry
from .arrays import Operand
from .errors import AutogradError, DeviceError, DTypeError, LayoutError, ShapeError


@dataclass
class Plan:
    kernel: registry.Kernel
    m: int
    n: int
    k: int
    dtype: str
    reasons: list[str] = field(default_factory=list)
    nd: str = ""  # for operands that are not both 2-D: the product as asked, "(2, 3, 4) @ (4,) → (2, 3)"


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
    """Check the operands as `matmul` checks them (its errors) and choose the kernel, without
    running anything. For 1-D or N-D operands: the kernel a 2-D product of their matrices gets,
    as tilegemm.nd asks it (m, n, k are that product's; nd says the product asked for)."""
    A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
    arrays.refuse_two_host_kinds(A, B, "matmul")
    if kernel != "auto" and A.kind == "torch" and B.kind == "torch":  # (matmul hands these to its operator)
        grad = dispatch.plain(a) and dispatch.wants_grad(a, b)
        if grad or dispatch.traced(a, b):
            _refuse_named(kernel, grad)
    if len(A.shape) == 2 and len(B.shape) == 2:
        return _plan(A, B, kernel)
    from . import nd

    batch, m, n, shape, inner_a, inner_b = nd.inner(A, B)
    k = A.shape[-1]
    p = _plan(inner_a, inner_b, kernel)
    p.nd = f"{tuple(A.shape)} @ {tuple(B.shape)} → {tuple(shape)}"
    form = f"a batch of {int(np.prod(batch))} products" if batch else "a 1-D operand promoted"
    p.reasons.insert(0, f"not 2-D: {form}, run by tilegemm.nd as one launch where it can; the kernel is the one a "
                        f"{m or 1}×{k} @ {k}×{n or 1} product gets")
    if (batch and not A.on_host and kernel == "auto" and p.dtype in ("float16", "bfloat16", "float32")
            and not nd._simulated_arrays(A, B)):
        p.reasons.insert(1, "on a GPU a batch runs as that 2-D product only where it folds into rows (a 2-D b, a's "
                            "batch contiguous); any other as one batched tilegemm.gemm launch on the tensor cores' "
                            "rungs (float32: precision='ieee', exact)")
    return p


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
    if not pool:  # a dtype served elsewhere (float16 on a GPU's tensor cores) is not served here
        if A.on_host and not gpu:
            raise DTypeError(f"matmul: {dtype} runs on a CUDA GPU, and this machine has none; cast the operands "
                             "to float32")
        why = "; ".join(f"{kk.name}: {kk.runnable()[1]}" for kk in cands if kk.backend != "cpu")
        raise DeviceError(f"matmul: no kernel for {dtype} can run on {A.device} here ({why or 'none of its kernels'})")
    best = max(pool, key=lambda kk: kk.auto_rank)
    reasons.append(f"{best.name!r} ranks highest for {dtype} among: {', '.join(kk.name for kk in pool)}")
    _AUTO[key] = (best, list(reasons))
    return Plan(best, m, n, k, dtype, reasons)


def explain(a, b, kernel: str = "auto") -> str:
    """Say which kernel `matmul(a, b)` would run, and why; for the tensor cores also which rung
    and configuration, and where the configuration comes from (tuning cache, shipped database,
    heuristic). Beyond 2-D: how tilegemm.nd runs the product, and the one 2-D product it runs
    (A's batch folded into its rows, or a 1-D operand promoted), explained as one."""
    p = plan(a, b, kernel)
    head = lambda k: f"{p.nd or f'{p.m}×{p.k} @ {p.k}×{p.n}'}, {p.dtype}: {k.name} ({k.label})"  # noqa: E731
    lines = [head(p.kernel)]
    lines += [f"  - {r}" for r in p.reasons]
    if p.nd:  # how nd runs it; the one 2-D product it runs, where it runs one, explained as one
        from . import nd

        said, product = nd.describe(arrays.describe(a, "a"), arrays.describe(b, "b"), kernel, p)
        lines.append(f"  - {said}")
        if product is not None:
            lines += [f"    {line}" for line in explain(*product, kernel).splitlines()]
        return "\n".join(lines)
    if not (p.m and p.n and p.k):  # (matmul makes the result before any kernel, as nd says of its own)
        lines.append("  - " + ("K = 0, an empty sum: the result is zeros, no kernel runs" if p.m and p.n else
                               "nothing to multiply (M or N is 0): the empty result is made, no kernel runs"))
        return "\n".join(lines)
    if p.kernel.backend == "tensorcore" and p.kernel.runnable()[0]:
        import torch

        from .kernels.tensorcore import _problem as P

        ta, tb = (_as_matmul_takes(arrays.describe(x, what)) for x, what in ((a, "a"), (b, "b")))
        c = torch.empty((p.m, p.n), dtype=ta.dtype, device=ta.device)
        rung, said = dispatch.explain_problem(P.problem_2d(ta, tb, c), "auto" if kernel == "auto" else p.kernel.name)
        if rung != p.kernel.name:  # "auto": the registry's entry stands for the tensor cores, whose rung is
            # chosen per shape; the first line names what runs (it named the entry, then a line the rung)
            lines[0] = head(registry.get(rung))
            said.insert(0, f"the tensor cores' rung for this shape (the registry ranks {p.kernel.name} first for "
                           "the tensor cores; tilegemm.tuning chooses the rung per shape)" if kernel == "auto" else
                        f"asked for {p.kernel.name}; this shape runs on {rung} (the configuration's source says why)")
        lines += [f"  - {x}" for x in said]
    elif p.kernel.backend == "simt":
        module = importlib.import_module(p.kernel.module)
        itemsize = np.dtype(p.dtype).itemsize
        A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
        if p.kernel.reads_wt and dispatch.transposed_contiguous(B):  # x @ W.t(), in place
            lines.append(f"  - {module.describe_linear(p.m, p.n, p.k, itemsize)}")
        elif getattr(module, "describe", None) is not None:  # the FP32 auto rung: which of its forms, by its wave model
            from .kernels.simt import k10_warptile as k10

            # (16-byte rows as the launch finds them: a CUDA operand is read in place, at its own address; a host
            # or strided one is copied, contiguous and aligned)
            vector = k10.vector_shape_ok(p.k, p.n, itemsize) and all(
                X.on_host or not X.contiguous or k10.aligned16(X.obj) for X in (A, B))
            lines.append(f"  - {module.describe(p.m, p.n, p.k, itemsize, vector)}")
    return "\n".join(lines)


def _as_matmul_takes(X: Operand, device: str = "cuda"):
    """The torch CUDA tensor matmul computes operand X as (`arrays.to_torch_cuda`), for explain,
    without copying X's values: a CUDA operand itself (used in place, no copy), a host one's
    uninitialised twin with the strides its copy keeps (`.cuda()` preserves a dense operand's
    layout: W.t() of nn.Linear stays column-major, and the layout is part of the configuration's class)."""
    import torch

    if not X.on_host:
        return arrays.to_torch_cuda(X)
    if X.kind == "torch":
        return torch.empty_like(X.obj, device=device)
    host = arrays.host_layout(X)
    if host is None:  # (host_view's copy, in C order)
        return torch.empty(X.shape, dtype=getattr(torch, X.dtype), device=device)
    return torch.empty_like(torch.from_numpy(host), device=device)


def _check_out(out, A: Operand, shape, dtype: str, inputs) -> Operand:
    if isinstance(out, np.generic):  # (describe makes a 0-D array of it: a copy, which the result would go into)
        raise DTypeError(f"matmul: out is a NumPy scalar ({type(out).__name__}), which cannot be written; pass an "
                         "array (np.empty(()) for a 0-D result), as np.matmul's out= asks")
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
    if arrays.self_overlapping(out):
        raise LayoutError(f"matmul: out {tuple(O.shape)} has strides under which its elements share memory (a "
                          "broadcast view, stride 0, or strides shorter than the dimensions inside them); the "
                          "results would overwrite each other")
    arrays.refuse_negated(out, "matmul: out")
    arrays.refuse_inference(out, "matmul: out")
    _refuse_overlap(out, inputs)
    return O


def _refuse_overlap(out, inputs) -> None:
    for x, what in zip(inputs, ("a", "b")):
        if arrays.overlaps(out, x):
            raise LayoutError(f"matmul: out shares memory with {what}; the result would overwrite its own input")


def matmul(a, b, *, kernel: str = "auto", out=None, devices=None):
    """a @ b, as `numpy.matmul` and `torch.matmul` define it, for float32/float64 operands (and
    float16/bfloat16 on the tensor cores).

    a: (..., M, K) or (K,); b: (..., K, N) or (K,): a 1-D operand is promoted to a matrix and the
    added dimension removed from the result; leading (batch) dimensions broadcast; 0-D operands
    are refused (ValueError). Same dtype, same device. NumPy arrays and torch CPU tensors are
    copied to the GPU and back when a GPU kernel runs; torch CUDA tensors, CuPy arrays, Numba
    device arrays and other `__cuda_array_interface__` objects are used in place. Any strides
    are accepted. A batch runs as one launch where it can (tilegemm.nd says where).
    kernel: "auto" or a registered name (see `tilegemm.kernels()`).
    out: optional array of the caller's kind, dtype and the result's shape, written and returned.
    devices: "all" or a list of GPU ids: A's rows split over those GPUs of this host, each running
    what `kernel` names there (2-D operands; tilegemm.multigpu says how). CUDA operands' C comes
    back on A's device, in the order of its current stream; host operands' C in host memory.
    Returns the caller's kind. The inputs are never modified. A bad shape raises ShapeError (a
    ValueError and a RuntimeError, as NumPy and torch raise), a dtype not served DTypeError (a
    TypeError and a RuntimeError).
    """
    if kernel == "auto" and devices is None:
        c = dispatch.fast_matmul(a, b, out)
        if c is not None:
            return c
    c = _matmul(a, b, kernel, out, devices)
    if out is not None:
        dispatch.written(out)
    return c


def _matmul(a, b, kernel: str, out, devices):
    """matmul by the slow path: its checks, the plan made or found, the kernels run."""
    if dispatch.traced(a, b):  # (the call's checks with the tracer paused, then tilegemm's operator)
        if devices is not None:  # (the GPUs' products, which the tracer does not see, would be recorded as a constant)
            raise AutogradError("matmul: devices= under torch.jit.trace records the product as a constant; call it "
                                "outside the trace")
        return _by_operator(a, b, kernel, out, dispatch.wants_grad(a, b))
    dispatch.refuse_transformed("matmul", (a, "a"), (b, "b"), (out, "out"))
    if arrays.negated(a) or arrays.negated(b):
        return _of_values(a, b, kernel, out, devices)
    if devices is not None:
        return _on_devices(a, b, devices, kernel, out)
    sub = _numpy_subclass(a, b)  # (refuses one with its own __array_ufunc__, out= or not)
    if sub is not None and out is None:  # np.matmul's result goes through the subclass's __array_wrap__ (np.matrix: a
        # matrix; np.memmap: a plain array); so does ours
        c = matmul(np.asarray(a) if isinstance(a, np.ndarray) else a,
                   np.asarray(b) if isinstance(b, np.ndarray) else b, kernel=kernel)
        if not isinstance(c, (np.ndarray, np.generic)):
            return c
        try:
            return sub.__array_wrap__(np.asarray(c), None, np.ndim(c) == 0)  # (0-D: return_scalar, as np.matmul says)
        except TypeError:  # a wrap of NumPy 1's signature (obj, context), which np.matmul still calls so, and warns
            warnings.warn("__array_wrap__ must accept context and return_scalar arguments (positionally) in the future. "
                          "(Deprecated NumPy 2.0)", DeprecationWarning, stacklevel=3)
            return sub.__array_wrap__(np.asarray(c), None)
    if isinstance(out, np.ndarray) and not out.dtype.isnative and isinstance(a, np.ndarray):  # the kernels
        # write this machine's byte order: the product, checked against out, then cast into it (as np.matmul's
        # out= does). out is checked first, as any out is: a wrong one costs no product (minutes in the simulator)
        p = plan(a, b, kernel)  # (the operands' own errors first, as without out)
        A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
        from . import nd

        _check_out(out, A, nd.result_shape(A.shape, B.shape)[3], p.dtype, (a, b))
        out[...] = np.asarray(matmul(a, b, kernel=kernel))  # (NumPy operands: a 0-D result is a NumPy scalar)
        return out
    A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
    if out is not None and A.kind == "torch":
        _refuse_grad_out(out)
    arrays.refuse_two_host_kinds(A, B, "matmul")
    if A.kind == "torch" and B.kind == "torch" and dispatch.plain(a) and dispatch.wants_grad(a, b):
        return _by_operator(a, b, kernel, out, True)
    for x, X, other, what in ((a, A, B, "a"), (b, B, A, "b")):  # a CUDA tensor that requires grad beside a CuPy or
        if X.kind == "torch" and dispatch.plain(x) and dispatch.wants_grad(x, x):  # Numba array: the product would come
            # back with no grad_fn, x's gradient through it silently left out
            raise AutogradError(f"matmul: {what} requires grad, and a product with a {other.kind} array records no "
                                f"gradient; pass {what}.detach(), or call under torch.no_grad()")
    if len(A.shape) != 2 or len(B.shape) != 2:
        from . import nd

        return nd.matmul(a, b, A, B, kernel, out, _plan, matmul)
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
    if _cuda.SIMULATOR and p.kernel.backend != "cpu" and p.m * p.n * p.k > _cuda.SIMULATED_MNK \
            and not _cuda.SIMULATED_SAID.get():
        _cuda.warn_simulated(f"{p.m}×{p.k} @ {p.k}×{p.n}", p.kernel.name, p.m * p.n * p.k,
                             stacklevel=4)  # (warn_simulated, _matmul, matmul, the caller)
    return dispatch.execute_matmul(p.kernel, kernel == "auto", A, B, O, out, shape, dtype)


def _by_operator(a, b, kernel: str, out, grad: bool):
    """a @ b of two torch tensors through tilegemm's operator (torch.ops.tilegemm.matmul), which
    autograd and torch.jit.trace see: differentiable (grad: a or b requires it), its backward on
    tilegemm's GEMMs; and recorded in a trace as the operator, where a product the tracer did not
    see was recorded as a constant (the trace gave the traced inputs' product for any others). The
    operator's body, which no trace is on in, makes the product's checks; a traced call (not grad)
    first makes the call's own, whose refusals (a dtype or device no kernel serves, an out that
    requires grad or overlaps an input) the body would hand to torch."""
    if out is not None and grad:
        raise AutogradError("matmul: out= with tensors that require grad records no gradient (as torch.matmul: "
                            "functions with out= don't support automatic differentiation)")
    if a.dtype != b.dtype:
        raise DTypeError(f"matmul: mixed dtypes a={str(a.dtype)[6:]}, b={str(b.dtype)[6:]}; cast one of them "
                         "explicitly")
    _refuse_named(kernel, grad)
    if not grad:  # (traced: the call's checks, which read sizes, with the tracer paused)
        with dispatch.checked_in_trace():
            p = plan(a, b)
            if out is not None:
                from . import nd

                _refuse_grad_out(out)
                A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
                _check_out(out, A, nd.result_shape(A.shape, B.shape)[3], p.dtype, (a, b))
    from . import torchop

    if grad:  # (the operator's body hands what tilegemm does not serve to torch: a patched model's layers want
        # that, a call of tilegemm.matmul its refusal, as without grad; in a trace asked with the tracer paused: a
        # size read there names its value in the graph, which check_trace's run, under no_grad, does not)
        with dispatch.checked_in_trace() if dispatch.tracing() else contextlib.nullcontext():
            if not torchop.served(a, b):
                plan(a, b)
    c = torchop.matmul(a, b)
    return c if out is None else out.copy_(c)  # (in the trace: the operator, then the copy)


def _refuse_named(kernel, grad: bool) -> None:
    """A kernel named for a product that tilegemm's operator runs (grad: the tensors require it;
    else under torch.jit.trace), which chooses its own kernels: refused, by matmul and plan alike."""
    if kernel != "auto":
        why = "with tensors that require grad: the differentiable" if grad else "under torch.jit.trace: the traced"
        raise AutogradError(f"matmul: kernel={kernel!r} {why} operator chooses its kernels (kernel='auto'); "
                            + ("detach the inputs to name one" if grad else "call it outside the trace to name one"))


def _refuse_grad_out(out) -> None:
    """An out (of torch operands) that requires grad, with grad mode on, refused: the kernels
    write it in place where autograd does not see them (torch refuses an in-place write into a
    leaf that requires grad, and out= of its own products)."""
    if dispatch.plain(out) and dispatch.wants_grad(out, out):
        raise AutogradError("matmul: out requires grad, and out= records no gradient (as torch.matmul: functions "
                            "with out= don't support automatic differentiation); pass out.detach(), or call under "
                            "torch.no_grad()")


def _of_values(a, b, kernel: str, out, devices):
    """matmul where a or b is a lazy negation (torch's neg bit), whose memory, which the kernels
    read, holds the negated values: the product of its values, made real (a copy). out is checked
    against the caller's operands first: the copy shares no memory with them."""
    if out is not None:
        _refuse_overlap(out, (a, b))
    return matmul(arrays.resolved(a), arrays.resolved(b), kernel=kernel, out=out, devices=devices)


def _on_devices(a, b, devices, kernel: str, out):
    """matmul(devices=...): the operands checked as for one GPU (a mistake in them is said on any
    machine), then the GPUs named, then tilegemm.multigpu."""
    from . import multigpu

    A, B = arrays.describe(a, "a"), arrays.describe(b, "b")
    if len(A.shape) != 2 or len(B.shape) != 2:
        raise ShapeError(f"matmul: devices= takes 2-D operands (M×K @ K×N); got {A.shape} @ {B.shape}")
    m, n, k = _check_operands(A, B)
    if A.kind != B.kind:
        raise DeviceError(f"matmul: a is a {A.kind} array and b a {B.kind} array; pass both of one kind")
    if dispatch.plain(a) and dispatch.plain(b) and dispatch.wants_grad(a, b):
        raise AutogradError("matmul: devices= records no gradient; call it under torch.no_grad() or without devices=")
    if out is not None:
        if A.kind == "torch":  # (multigpu writes out through a detached view: as without devices=)
            _refuse_grad_out(out)
        _check_out(out, A, (m, n), A.dtype, (a, b))
    return multigpu.matmul(A, B, (m, n, k), multigpu.device_ids(devices), kernel, out, matmul)


def _numpy_subclass(a, b):
    """The operand, of an ndarray subclass, whose __array_wrap__ np.matmul gives its result to (the
    highest __array_priority__), or None. A subclass with its own __array_ufunc__ (units, lazy
    arrays) takes np.matmul over itself: refused, not imitated. A masked array is refused first
    (its masked values would be multiplied in): beside a subclass, the other operand reaches the
    product through np.asarray, which drops its mask."""
    for x, what in ((a, "a"), (b, "b")):
        arrays.refuse_masked(x, what)
    subs = [x for x in (a, b) if isinstance(x, np.ndarray) and type(x) is not np.ndarray]
    for x in subs:
        if type(x).__array_ufunc__ is not np.ndarray.__array_ufunc__:
            raise DTypeError(f"matmul: {type(x).__module__}.{type(x).__name__} overrides __array_ufunc__, so "
                             "np.matmul would hand it the product (its units or rules); pass np.asarray(x) to "
                             "multiply the values")
    return max(subs, key=lambda x: getattr(x, "__array_priority__", 0.0)) if subs else None


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
