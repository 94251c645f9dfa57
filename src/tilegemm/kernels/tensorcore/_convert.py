"""gemm's conversions of an operand on the GPU, as KernelCalls a launch plan keeps ahead of the GEMM's
(`tilegemm.dispatch`): a cast to the precision's dtype, and FP8 quantisation. Each reads the operand
as stored, in any dense layout (row- or column-major, `dense`), and writes its result laid out as the
input (`torch.empty_like`). Deterministic (no atomics).

*Cast* (`cast_calls`: FP32 operands at precision "bf16", say): one kernel, R·(s_in + s_out) bytes for R
elements, rounded to nearest even as torch's `.to()` rounds.

*FP8 quantisation* (`fp8_calls`; `tensorcore_api._convert`'s rule in torch operations on the GPU, to the
byte): the per-tensor scale is s = max(amax · fp32(1/448), tiny) (torch's CUDA `amax / 448` multiplies by
the inverse), amax the largest finite |x| in FP32 (448: e4m3's largest finite value; tiny: float32's
smallest normal, for an all-zero operand), or the caller's scale; each element becomes e4m3(x / s),
rounded to nearest even, and NaN where x / s is not finite (e4m3 has no Inf; a saturated Inf would make
a product finite that is not) or past 464, the midpoint of 448 and the next step, as torch 2.11's cast
gives it (0x7F with x's sign; torch 2.13's CPU cast saturates there instead, and so does Triton's, which
this kernel overrides). Only a caller's scale reaches past 448.

Written with torch's elementwise operations that rule was nine kernels an operand (to FP32, abs,
nan_to_num, amax, the scale's divide and clamp, the divide, nan_to_num, the cast), each reading and
most writing the whole operand in FP32: for R elements of s_in bytes,
    traffic ≈ R·(s_in + 4) + 3·R·8 + R·4 + R·8 + R·(4 + 1) ≈ R·(s_in + 45) bytes,
and nine launches. Here:
- `partial_amax`: each program the largest finite |x| of its stretch (one read, R·s_in bytes);
- `quantise`: each program folds those partial maxima (P floats, from L2) into amax and s itself
  (program 0 also stores s), then writes its stretch in e4m3: R·(s_in + 1) bytes.
So traffic ≈ R·(2·s_in + 1) bytes (BF16: 5 bytes an element against 47) in two launches, one
with the caller's scale.

gemm converts both operands with one launch a kernel (`paired`: the pair kernels run A's programs,
then B's), so a call that quantises both takes two launches before the GEMM's, not four, and one
that casts both takes one; each launch costs the host a few µs, which a small product's call feels.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from . import launch_calls
from ._problem import KernelCall, named, ordered

E4M3_MAX = 448.0
INV_MAX = float(np.float32(1) / np.float32(E4M3_MAX))  # 1/448 in FP32, as torch's CUDA `amax / 448` takes it
OVER = 464.0  # the midpoint of 448 and 480: above it torch's cast (2.11) gives NaN, at it 448 (ties to even)
BLOCK = 4096  # elements a program takes at each step of its stretch
MAX_PROGRAMS = 1024  # partial maxima at most: quantise's programs each fold them all (4 KB from L2)
TINY = 1.1754943508222875e-38  # float32's smallest normal (torch.finfo(torch.float32).tiny)


@triton.jit
def _cast_stretch(x_ptr, y_ptr, n, steps, pid, BLOCK: tl.constexpr):
    """y = x in y's dtype, elements [pid·steps·BLOCK, (pid+1)·steps·BLOCK)."""
    first = pid.to(tl.int64) * steps * BLOCK
    for i in range(steps):
        offs = first + i * BLOCK + tl.arange(0, BLOCK)
        keep = offs < n
        v = tl.load(x_ptr + offs, mask=keep)
        if x_ptr.dtype.element_ty == tl.float64:  # (torch casts a double to FP16 or BF16 through float: two roundings)
            v = v.to(tl.float32)
        tl.store(y_ptr + offs, v.to(y_ptr.dtype.element_ty), mask=keep)


@triton.jit
def _amax_stretch(x_ptr, part_ptr, n, steps, pid, BLOCK: tl.constexpr):
    """part[pid] = the largest finite |x| (in FP32) of elements [pid·steps·BLOCK, (pid+1)·steps·BLOCK)."""
    first = pid.to(tl.int64) * steps * BLOCK
    best = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(steps):
        offs = first + i * BLOCK + tl.arange(0, BLOCK)
        v = tl.abs(tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32))
        best = tl.maximum(best, tl.where(v < float("inf"), v, 0.0))  # (NaN and Inf: 0, as nan_to_num's)
    tl.store(part_ptr + pid, tl.max(best, axis=0))


@triton.jit
def _quantise_stretch(x_ptr, q_ptr, s_ptr, part_ptr, parts, n, steps, pid, INV_MAX: tl.constexpr,
                      OVER: tl.constexpr, TINY: tl.constexpr, GIVEN: tl.constexpr, PARTS: tl.constexpr,
                      BLOCK: tl.constexpr):
    """q = e4m3(x / s) over program pid's stretch, its bytes made as uint8: where x / s is not finite 0x7F
    (NaN), and where it is finite but past OVER the NaN torch's cast writes, 0x7F with x's sign (0xFF
    below -OVER); s from part's maxima (stored by program 0), or the caller's at s_ptr (GIVEN)."""
    if GIVEN:
        s = tl.load(s_ptr)
    else:
        i = tl.arange(0, PARTS)
        amax = tl.max(tl.load(part_ptr + i, mask=i < parts, other=0.0), axis=0)
        s = tl.maximum(amax * INV_MAX, TINY)  # (torch's CUDA division by a number multiplies by its inverse)
        if pid == 0:
            tl.store(s_ptr, s)
    first = pid.to(tl.int64) * steps * BLOCK
    for j in range(steps):
        offs = first + j * BLOCK + tl.arange(0, BLOCK)
        keep = offs < n
        r = tl.math.div_rn(tl.load(x_ptr + offs, mask=keep, other=0.0).to(tl.float32), s)
        b = r.to(tl.float8e4nv).to(tl.uint8, bitcast=True)  # (Triton's cast saturates at ±448)
        a = tl.abs(r)
        nan = tl.where((r < 0) & (a < float("inf")), 0xFF, 0x7F).to(tl.uint8)  # (±Inf and NaN: 0x7F, nan_to_num's)
        b = tl.where(a <= OVER, b, nan)  # (a NaN r is not <= OVER)
        tl.store(q_ptr + offs, b.to(tl.float8e4nv, bitcast=True), mask=keep)


# One operand's kernels, and the pair's (A's programs first, then B's: one launch where there were two).

@triton.jit(do_not_specialize=["steps"])  # (n specialised: n % 16 == 0 lets the loads be 16-byte vectors)
def cast(x_ptr, y_ptr, n, steps, BLOCK: tl.constexpr):
    _cast_stretch(x_ptr, y_ptr, n, steps, tl.program_id(0), BLOCK)


@triton.jit(do_not_specialize=["steps", "steps2", "first"])
def cast_pair(x_ptr, y_ptr, n, steps, x2_ptr, y2_ptr, n2, steps2, first, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid < first:
        _cast_stretch(x_ptr, y_ptr, n, steps, pid, BLOCK)
    else:
        _cast_stretch(x2_ptr, y2_ptr, n2, steps2, pid - first, BLOCK)


@triton.jit(do_not_specialize=["steps"])
def partial_amax(x_ptr, part_ptr, n, steps, BLOCK: tl.constexpr):
    _amax_stretch(x_ptr, part_ptr, n, steps, tl.program_id(0), BLOCK)


@triton.jit(do_not_specialize=["steps", "steps2", "first"])
def partial_amax_pair(x_ptr, part_ptr, n, steps, x2_ptr, part2_ptr, n2, steps2, first, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid < first:
        _amax_stretch(x_ptr, part_ptr, n, steps, pid, BLOCK)
    else:
        _amax_stretch(x2_ptr, part2_ptr, n2, steps2, pid - first, BLOCK)


@triton.jit(do_not_specialize=["parts", "steps"])
def quantise(x_ptr, q_ptr, s_ptr, part_ptr, parts, n, steps, INV_MAX: tl.constexpr, OVER: tl.constexpr,
             TINY: tl.constexpr, GIVEN: tl.constexpr, PARTS: tl.constexpr, BLOCK: tl.constexpr):
    _quantise_stretch(x_ptr, q_ptr, s_ptr, part_ptr, parts, n, steps, tl.program_id(0), INV_MAX, OVER, TINY, GIVEN,
                      PARTS, BLOCK)


@triton.jit(do_not_specialize=["parts", "steps", "parts2", "steps2", "first"])
def quantise_pair(x_ptr, q_ptr, s_ptr, part_ptr, parts, n, steps, x2_ptr, q2_ptr, s2_ptr, part2_ptr, parts2, n2,
                  steps2, first, INV_MAX: tl.constexpr, OVER: tl.constexpr, TINY: tl.constexpr,
                  GIVEN: tl.constexpr, GIVEN2: tl.constexpr, PARTS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid < first:
        _quantise_stretch(x_ptr, q_ptr, s_ptr, part_ptr, parts, n, steps, pid, INV_MAX, OVER, TINY, GIVEN, PARTS,
                          BLOCK)
    else:
        _quantise_stretch(x2_ptr, q2_ptr, s2_ptr, part2_ptr, parts2, n2, steps2, pid - first, INV_MAX, OVER, TINY,
                          GIVEN2, PARTS, BLOCK)


def dense(t: torch.Tensor) -> bool:
    """Are t's elements one run of memory with no gaps (C order, or its last two dimensions
    swapped: a transposed weight)? Then the kernels here read it as a flat array."""
    return t.is_contiguous() or (t.dim() >= 2 and t.transpose(-1, -2).is_contiguous())


def stretches(n: int) -> tuple[int, int]:
    """(programs, steps of BLOCK each) covering n elements: at most MAX_PROGRAMS programs."""
    programs = min(MAX_PROGRAMS, triton.cdiv(n, BLOCK))
    steps = triton.cdiv(n, programs * BLOCK)
    return triton.cdiv(n, steps * BLOCK), steps


def cast_calls(t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, list]:
    """(t in dtype, laid out as t; the KernelCall that fills it, not yet launched, its scratch that
    tensor): t a dense CUDA tensor of at least one element."""
    y = torch.empty_like(t, dtype=dtype)
    programs, steps = stretches(t.numel())
    return y, [KernelCall(cast, (programs,), ordered(cast, (t, y, t.numel(), steps), BLOCK=BLOCK), {}, (y,))]


def fp8_calls(t: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, list]:
    """(e4m3 tensor laid out as t, its float32 scale of one element, the KernelCalls that fill them,
    not yet launched): t a dense CUDA tensor of at least one element; scale None (from t's finite
    amax) or the caller's, a one-element float32 tensor on t's device. The e4m3 tensor, the scale
    made here and the partial maxima are the calls' scratch (written before they are read), so a
    launch plan (tilegemm.dispatch) keeps the calls ahead of the GEMM's, with its buffers in place."""
    n = t.numel()
    programs, steps = stretches(n)
    q = torch.empty_like(t, dtype=torch.float8_e4m3fn)
    given = scale is not None
    grid = (programs,)
    if given:
        s, part, out = scale, scale, []  # (part unread)
    else:
        s = torch.empty(1, dtype=torch.float32, device=t.device)
        part = torch.empty(programs, dtype=torch.float32, device=t.device)
        out = [KernelCall(partial_amax, grid, ordered(partial_amax, (t, part, n, steps), BLOCK=BLOCK), {}, (part,))]
    args = ordered(quantise, (t, q, s, part, programs, n, steps), INV_MAX=INV_MAX, OVER=OVER, TINY=TINY, GIVEN=given,
                   PARTS=MAX_PROGRAMS, BLOCK=BLOCK)
    out.append(KernelCall(quantise, grid, args, {}, (q,) if given else (q, s)))
    return q, s, out


_PAIRS = {cast: (cast_pair, ("x_ptr", "y_ptr", "n", "steps")),
          partial_amax: (partial_amax_pair, ("x_ptr", "part_ptr", "n", "steps")),
          quantise: (quantise_pair, ("x_ptr", "q_ptr", "s_ptr", "part_ptr", "parts", "n", "steps"))}


def paired(a: list, b: list) -> list:
    """A's and B's conversion calls (cast_calls', fp8_calls'), each kernel both run as one launch of its
    pair kernel (A's programs, then B's): a cast, or FP8's two kernels, one launch each where there were
    two. A call with no match in the other list (the amax of an operand whose scale the other's caller
    gave) goes first, before the quantise that reads it."""
    pairs, alone, left = [], [], list(b)
    for call in a:
        i = next((i for i, c in enumerate(left) if c.fn is call.fn), None)
        if i is None:
            alone.append(call)
            continue
        twin = left.pop(i)
        fn, own = _PAIRS[call.fn]
        x, y = named(call), named(twin)
        consts = {k: v for k, v in x.items() if k not in own}
        if "GIVEN" in y:
            consts["GIVEN2"] = y["GIVEN"]
        args = ordered(fn, (*(x[k] for k in own), *(y[k] for k in own), call.grid[0]), **consts)
        pairs.append(KernelCall(fn, (call.grid[0] + twin.grid[0],), args, call.options, call.scratch + twin.scratch))
    return alone + left + pairs


def fp8(t: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`fp8_calls`' e4m3 tensor and scale, filled now (on t's GPU, torch's current stream there)."""
    q, s, todo = fp8_calls(t, scale)
    with torch.cuda.device(t.device):  # (Triton launches on the current device's stream: t's, not another's)
        launch_calls(todo)
    return q, s
