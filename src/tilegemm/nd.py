"""`matmul` beyond two dimensions, as NumPy, torch and the Python array API standard define it.

    matmul(x1, x2): a 1-D x1 (k,) is promoted to (1, k) and a 1-D x2 (k,) to (k, 1), the added
    dimension removed from the result; all leading dimensions are batch dimensions, broadcast
    against each other; the last two are multiplied. 0-D operands are refused (ValueError).

On top of the 2-D product (`api.matmul`), a batch runs as one launch where it can:
- host operands with the CPU's BLAS chosen: one `numpy.matmul`, which has these semantics;
- a 2-D B (after promotion) and an A whose batch dimensions fold into its rows without a copy
  (a contiguous activation against a weight, as in a linear layer): one 2-D product of
  (batch·M)×K by K×N;
- FP16/BF16 (the tensor cores) and FP32 on a GPU: one batched `gemm` launch (FP32 exactly,
  `precision="ieee"`: the batched SIMT rungs do not exist), the operands broadcast to the common
  batch (a 2-D B, or one of batch 1, is passed as such: stride 0, no copy);
- anything else (FP64 on a GPU, a kernel asked for by name, and Numba's simulated device arrays
  on a machine without a GPU): one 2-D product per batch entry.
Where the one call of the first two routes had a launch plan and read the caller's torch CUDA
tensors in place, a repeated call like it goes by that plan (`dispatch.remember_view`), without
coming here.
"""

from __future__ import annotations

import numpy as np

from . import arrays
from .errors import DeviceError, DTypeError, ShapeError


def result_shape(sa: tuple, sb: tuple) -> tuple[tuple, int | None, int | None, tuple]:
    """(batch shape, M or None for a 1-D a, N or None for a 1-D b, result shape), or ShapeError."""
    if len(sa) == 0 or len(sb) == 0:
        raise ShapeError(f"matmul: operands must have at least one dimension; got shapes {tuple(sa)} and {tuple(sb)} "
                         "(a 0-D operand is a scalar: multiply instead)")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka != kb:
        raise ShapeError(f"matmul: inner dimensions differ: a has shape {tuple(sa)}, b has shape {tuple(sb)} "
                         f"(a's last dimension {ka} must equal b's {'only' if len(sb) == 1 else 'second-to-last'} "
                         f"dimension {kb})")
    try:
        batch = tuple(np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])))
    except ValueError:
        raise ShapeError(f"matmul: batch dimensions {tuple(sa[:-2])} and {tuple(sb[:-2])} do not broadcast "
                         f"(shapes {tuple(sa)} and {tuple(sb)})") from None
    m = sa[-2] if len(sa) >= 2 else None
    n = sb[-1] if len(sb) >= 2 else None
    return batch, m, n, batch + ((m,) if m is not None else ()) + ((n,) if n is not None else ())


def inner(A: arrays.Operand, B: arrays.Operand):
    """(batch, M or None, N or None, result shape, and the Operands of the 2-D product whose kernel
    a product of these gets: its matrices, the 1-D ones promoted); matmul's errors for shapes."""
    batch, m, n, shape = result_shape(A.shape, B.shape)
    k = A.shape[-1]
    return (batch, m, n, shape, arrays.Operand(None, A.kind, (m or 1, k), A.dtype, A.device, True),
            arrays.Operand(None, B.kind, (k, n or 1), B.dtype, B.device, True))


def matmul(a, b, A: arrays.Operand, B: arrays.Operand, kernel: str, out, plan_2d, matmul_2d):
    """a @ b for operands that are not both 2-D. plan_2d(A, B, kernel) chooses the kernel for a
    2-D product of these operands, with api's checks of dtypes and devices (its errors, its words);
    matmul_2d is api.matmul. (Both come in as arguments: nd importing api would be a circle.)"""
    batch, m, n, shape, probe_a, probe_b = inner(A, B)
    p = plan_2d(probe_a, probe_b, kernel)  # the kernel a 2-D product of these would get (dtype checks)
    if out is not None:
        from .api import _check_out

        _check_out(out, A, shape, A.dtype, (a, b))
    elif A.on_host or _simulated_arrays(A, B):  # (the 2-D path's refusal, before NumPy or torch allocates a result
        arrays.check_host_memory(shape, A.dtype)  # the host cannot hold, which overcommit lets through until a write)
    if _on_host_blas(A, kernel, p):
        return _host(A, B, out, shape)
    from . import _cuda

    if _simulated_arrays(A, B):
        run = _simulated
    else:
        _need_torch(A, B, kernel)
        run = _torch
    if not _cuda.SIMULATOR or p.kernel.backend == "cpu" or _cuda.SIMULATED_SAID.get():
        return run(a, b, A, B, kernel, out, batch, m, n, shape, p, matmul_2d)
    # the simulator: its warning is for the whole product (a batch run as one product per entry would
    # warn per entry, or never where each entry is small and the batch large), said once, at the caller
    mnk = int(np.prod(batch)) * (1 if m is None else m) * (1 if n is None else n) * A.shape[-1]
    if mnk > _cuda.SIMULATED_MNK:
        _cuda.warn_simulated(f"{tuple(A.shape)} @ {tuple(B.shape)}", p.kernel.name, mnk,
                             stacklevel=5)  # (warn_simulated, here, api._matmul, api.matmul, the caller)
    said = _cuda.SIMULATED_SAID.set(True)  # (its 2-D products do not warn again, each for its part)
    try:
        return run(a, b, A, B, kernel, out, batch, m, n, shape, p, matmul_2d)
    finally:
        _cuda.SIMULATED_SAID.reset(said)


def describe(A: arrays.Operand, B: arrays.Operand, kernel: str, p) -> tuple[str, tuple | None]:
    """What `matmul` does with these operands (not both 2-D), in words, decided as it decides, and
    the operands of the one 2-D product it runs (torch views), or None where it runs no single one.
    p: the plan of the 2-D product `inner` forms."""
    batch, m, n, shape, _, _ = inner(A, B)
    if _on_host_blas(A, kernel, p):
        return "one numpy.matmul: the CPU's BLAS, batched and broadcast by NumPy", None
    if _simulated_arrays(A, B):
        k = A.shape[-1]
        return (f"{int(np.prod(batch))} simulated launches, one 2-D product {m or 1}×{k} @ {k}×{n or 1} per batch "
                "entry (Numba's simulated device arrays: torch, which batches the other kinds, has no GPU here)"), None
    _need_torch(A, B, kernel)
    import torch

    ta, tb = _views(A, B, m, n)
    mm, k, nn_ = ta.shape[-2], ta.shape[-1], tb.shape[-1]
    if _moved(A, kernel, p):  # routed as the run routes the device copies, whose strides `.cuda()` chooses
        # (`empty_like` on the meta device chooses them alike, copying nothing); the product explained: host views'
        how, ops = route(*(torch.empty_like(t, device="meta") for t in (ta, tb)), batch, kernel, True)
        ops = (ta.reshape(-1, k), tb.reshape(k, nn_)) if how == "mm" else ops
    else:
        how, ops = route(ta, tb, batch, kernel, ta.is_cuda)
    count = int(np.prod(batch))
    if how == "empty":
        return ("nothing to multiply (an empty batch, M or N): the empty result is made, no kernel runs" if k else
                "K = 0, an empty sum: the result is zeros, no kernel runs"), None
    if how == "mm":
        x, y = ops
        said = (f"A's batch folds into its rows without a copy: one {x.shape[0]}×{k} @ {k}×{nn_} product"
                if batch else f"one {mm}×{k} @ {k}×{nn_} product")
        return said + ", explained below", ops
    shared = "; B, shared by every entry, is not copied" if _b_shared(tb) else ""
    if how == "gemm":
        return (f"one batched tilegemm.gemm launch of {count} products {mm}×{k} @ {k}×{nn_}, "
                f"precision={ops[0]!r}{shared}"), None
    why = "a kernel asked for by name" if kernel != "auto" else f"{A.dtype} has no batched kernel"
    return f"{count} launches, one 2-D product {mm}×{k} @ {k}×{nn_} per batch entry ({why}{shared})", None


def _on_host_blas(A: arrays.Operand, kernel: str, p) -> bool:
    """One numpy.matmul for the whole batch: the host's choice, or the kernel that is numpy.matmul
    named (a patched CPU layer names it: a loop of 2-D products per batch entry ran 2-5x slower)."""
    return A.on_host and p.kernel.backend == "cpu" and kernel in ("auto", "cpu_blas")


def _moved(A: arrays.Operand, kernel: str, p) -> bool:
    """Host operands, a GPU kernel: copied there once, the result back once."""
    return A.on_host and p.kernel.backend != "cpu" and kernel == "auto"


def _need_torch(A: arrays.Operand, B: arrays.Operand, kernel: str = "auto") -> None:
    import importlib.util

    if A.kind == "torch":
        return
    if A.kind == "numpy":  # (torch's CPU views promote and batch them: torch is an optional dependency)
        if importlib.util.find_spec("torch") is None:
            other = "" if kernel == "auto" else ", or kernel='auto' (on a machine without a GPU: NumPy's matmul)"
            raise DTypeError(f"matmul: {len(A.shape)}-D and {len(B.shape)}-D NumPy operands on {kernel!r} run as torch "
                             f"tensors, and torch is not installed (pip install torch); pass 2-D operands{other}")
        return
    if importlib.util.find_spec("torch") is None:
        raise DTypeError(f"matmul: {len(A.shape)}-D and {len(B.shape)}-D {A.kind} operands need torch installed "
                         "(pip install 'tilegemm[gpu]'), or 2-D operands")
    import torch

    if not torch.cuda.is_available():  # (a CPU build of torch beside a GPU's arrays: it has no GPU to view them on)
        raise DeviceError(f"matmul: {len(A.shape)}-D and {len(B.shape)}-D {A.kind} operands run as torch CUDA "
                          "tensors, and torch sees no GPU here; pass 2-D operands (or NumPy arrays)")


def _simulated_arrays(A: arrays.Operand, B: arrays.Operand) -> bool:
    """Are both operands device arrays of Numba's CUDA simulator (no GPU: its device memory is the
    host's)?"""
    from . import _cuda

    return A.kind == B.kind == "numba" and _cuda.SIMULATOR


def _simulated(a, b, A, B, kernel, out, batch, m, n, shape, p, matmul_2d):
    """The product of Numba's simulated device arrays: one simulated 2-D product per batch entry, as
    the lab's kernels run there, gathered into a device array of the result (or into out). The
    simulator's arrays hold their memory as NumPy arrays (`_ary`), which are read and written as
    such; torch, which batches the other kinds, has no GPU here to view them on."""
    from . import _cuda

    ha = a._ary[None, :] if m is None else a._ary  # (k,) -> (1, k)
    hb = b._ary[:, None] if n is None else b._ary  # (k,) -> (k, 1)
    mm, k, nn_ = ha.shape[-2], ha.shape[-1], hb.shape[-1]
    c = np.zeros((*batch, mm, nn_), dtype=ha.dtype)  # (K = 0: an empty sum)
    if k and c.size:
        ab, bb = np.broadcast_to(ha, (*batch, mm, k)), np.broadcast_to(hb, (*batch, k, nn_))
        to_device = _cuda.cuda.to_device
        for i in np.ndindex(*batch):
            c[i] = matmul_2d(to_device(np.ascontiguousarray(ab[i])), to_device(np.ascontiguousarray(bb[i])),
                             kernel=kernel).copy_to_host()
    c = c.reshape(shape)  # the promoted dimensions dropped
    if out is not None:
        out._ary[...] = c
        return out
    return _cuda.cuda.to_device(c)


def _views(A: arrays.Operand, B: arrays.Operand, m, n):
    """Torch views of the operands (no copy for CUDA kinds), a 1-D one promoted to 2-D."""
    import torch

    ta = A.obj if A.kind == "torch" else (torch.from_numpy(arrays.host_view(A, torch_ok=True)) if A.on_host else arrays.to_torch_cuda(A))
    tb = B.obj if B.kind == "torch" else (torch.from_numpy(arrays.host_view(B, torch_ok=True)) if B.on_host else arrays.to_torch_cuda(B))
    return (ta.unsqueeze(0) if m is None else ta), (tb.unsqueeze(-1) if n is None else tb)  # (k,) -> (1, k), (k, 1)


def _host(A: arrays.Operand, B: arrays.Operand, out, shape):
    """One numpy.matmul (the CPU's BLAS, batched and broadcast by NumPy)."""
    a, b = arrays.host_view(A), arrays.host_view(B)
    if out is not None:
        arrays.host_target(arrays.describe(out, "out"))[...] = np.matmul(a, b)
        return out
    if A.kind != "torch":
        return np.matmul(a, b)  # (a 0-D result: NumPy's scalar, as np.matmul gives it)
    c, host = arrays.host_result(A, shape, A.dtype)  # (a tensor of torch's storage, as _run_host's; 0-D stays 0-D)
    np.matmul(a, b, out=host)
    return c


def _torch(a, b, A, B, kernel, out, batch, m, n, shape, p, matmul_2d):
    """The product in torch views of the operands (no copy for CUDA kinds), handed back as the
    caller's kind."""
    ta, tb = _views(A, B, m, n)
    moved = _moved(A, kernel, p)
    if moved:
        ta, tb = ta.cuda(), tb.cuda()
    c, inner = _batched(ta, tb, batch, kernel, matmul_2d)
    if moved:
        c = c.cpu()
    c = c.reshape(shape) if c.shape != shape else c  # drop the promoted dimensions
    if inner is not None and out is None and kernel == "auto" and A.kind == B.kind == "torch" and not A.on_host:
        from . import dispatch

        dispatch.remember_view(a, b, inner, c)  # the next call like it goes by the inner call's plan
    if out is not None:
        arrays.write_back(c, out, arrays.describe(out, "out"))
        return out
    if A.kind == "torch":
        return c
    if A.kind == "numpy":
        host = c.cpu().numpy()
        return host[()] if host.ndim == 0 else host  # NumPy gives a 0-D result as a scalar
    return arrays.to_kind(c, A)


def route(ta, tb, batch: tuple, kernel: str, on_gpu: bool) -> tuple[str, tuple]:
    """How ta @ tb (torch tensors of 2 or more dimensions, batch their common batch shape) runs,
    decided without running it and without a copy: ("empty", ()) nothing to multiply; ("mm", (x, y))
    one 2-D product of these views, A's batch folded into its rows where there is one; ("gemm",
    (precision,)) one batched gemm launch; ("each", ()) one 2-D product per batch entry. on_gpu:
    where it runs."""
    import torch

    mm, k, nn_ = ta.shape[-2], ta.shape[-1], tb.shape[-1]
    if 0 in batch or mm == 0 or nn_ == 0 or k == 0:
        return "empty", ()
    if not batch:
        return "mm", (ta.reshape(mm, k), tb.reshape(k, nn_))
    if _b_shared(tb) and tuple(ta.shape[:-2]) == batch:
        try:  # fold A's batch into its rows: one 2-D product, no copy
            return "mm", (ta.view(-1, k), tb.reshape(k, nn_))
        except RuntimeError:
            pass
    if kernel == "auto" and on_gpu and ta.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return "gemm", ("ieee" if ta.dtype == torch.float32 else "auto",)
    return "each", ()


def _b_shared(tb) -> bool:
    """Is B one matrix for every batch entry (2-D, or a batch of ones)?"""
    return tb.dim() == 2 or all(d == 1 for d in tb.shape[:-2])


def _stacks(ta, tb, batch: tuple):
    """A as (count, M, K) and B as (count, K, N), or (K, N) where every entry shares it: views where
    the batch allows, else copies."""
    mm, k, nn_ = ta.shape[-2], ta.shape[-1], tb.shape[-1]
    count = int(np.prod(batch))
    a3 = ta.expand(*batch, mm, k).reshape(count, mm, k)
    if _b_shared(tb):
        return a3, tb.reshape(k, nn_)
    return a3, tb.expand(*batch, k, nn_).reshape(count, k, nn_)


def _batched(ta, tb, batch: tuple, kernel: str, matmul_2d):
    """(*batch, M, N) = ta @ tb for torch tensors of 2 or more dimensions, and the one call it ran
    as (("mm", x, y): matmul(x, y); ("gemm", x, y, precision)), or None."""
    import torch

    how, ops = route(ta, tb, batch, kernel, ta.is_cuda)
    shape = (*batch, ta.shape[-2], tb.shape[-1])
    if how == "empty":  # nothing to multiply: an empty result, or an empty sum
        make = torch.zeros if ta.shape[-1] == 0 else torch.empty
        return make(shape, dtype=ta.dtype, device=ta.device), None
    if how == "mm":
        c = matmul_2d(*ops, kernel=kernel)
        return (c.view(shape) if batch else c), ("mm", *ops)
    a3, b3 = _stacks(ta, tb, batch)
    if how == "gemm":
        from .tensorcore_api import gemm

        return gemm(a3, b3, precision=ops[0]).view(shape), ("gemm", a3, b3, ops[0])
    c3 = torch.empty((a3.shape[0], *shape[-2:]), dtype=ta.dtype, device=ta.device)
    for i in range(a3.shape[0]):  # one 2-D product per batch entry (FP64 on a GPU, or a kernel asked for by name)
        c3[i] = matmul_2d(a3[i], b3 if b3.dim() == 2 else b3[i], kernel=kernel)
    return c3.view(shape), None
