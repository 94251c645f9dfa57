"""t06 GEMV form for decode (M ≤ 4): each weight read once, straight into registers, no tensor cores.

Changes against t04: at M = 1…4 (a decode step's batch) the product is a matrix-vector product per
row of A; the tensor cores' work is nothing beside reading B (the weight, K·N·s bytes), so what
counts is how many bytes stand in flight and how few instructions each one costs. t04 stages B's
tiles through shared memory for the MMA and splits K so that enough programs run; here a program
takes BN columns of C (BN rows of W when B = Wᵀ, K-major) and one row of A, walks the whole of K
in steps of BK, loads its BN×BK tile of B with 16-byte loads into registers, multiplies it by
A's BK elements in FP32 (FMA) into a BN×BK accumulator, and reduces that over K once, at the
end: no split of K, so nothing is summed twice and the result is deterministic. The rows of A
are the fastest index of grid axis 0 (axis 1 is the batch), so the M programs of one column of
tiles run side by side and B's tile comes from DRAM once, for the first of them, and from L2 for
the others; A's row is re-read by every program (M·K·s·ceil(N/BN) bytes, from L2, small beside B).

The offline census behind the first candidate (docs/perf-notes.md, 41): at BN = 4, BK = 1024 and
4 warps the K loop compiles (sm_90, BF16, K-major B) to 140 instructions per 8 KB of B (5 LDG.128,
32 FFMA, no shared memory or barrier, 58 registers): about 4.4 instructions per weight. At most other tiles
Triton lays A's row out unlike B's tile and moves it through shared memory every step (2–4
barriers in the loop); the tuner times both kinds.

Global traffic (elements; s input size, s_c output size):
    reads  = K·N·M (B: from DRAM once, from L2 for the other rows of A) + M·K·ceil(N/BN) (A, L2)
    writes = M·N
DRAM traffic ≈ K·N·s + M·N·s_c bytes; arithmetic intensity ≈ 2·M/s FLOP/byte (1 at M = 1 in
BF16), so the floor is reading B once at the memory's read bandwidth, and the issue rate
(≈ 4.4·M instructions per weight, since each row of A re-converts B) is what bounds it past M ≈ 2.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...registry import ceil_div
from . import _problem as P
from ._jit import scale_acc, store_ptr

NAME = "tc_gemv"
MAX_M = 4  # past this, each row of A re-reading and re-converting B costs more than t04's MMA


@triton.jit
def gemv_kernel(a_ptr, b_ptr, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K,
                sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sib, sim, sin_, alpha, beta,
                BN: tl.constexpr, BK: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr,
                WIDE: tl.constexpr = False):
    off_n = (tl.program_id(0) // M) * BN
    m = tl.program_id(0) % M  # the fastest index: one column of tiles' rows run together (B from L2)
    bid = tl.program_id(1).to(tl.int64)
    offs_k = tl.arange(0, BK)
    k_off = offs_k
    step_a = BK * sak
    step_b = BK * sbk
    if WIDE:  # an operand spans past 2^31 elements: every offset in 64 bits
        off_n = off_n.to(tl.int64)
        m = m.to(tl.int64)
        k_off = offs_k.to(tl.int64)
        step_a = tl.cast(BK, tl.int64) * sak
        step_b = tl.cast(BK, tl.int64) * sbk
    offs_n = off_n + tl.arange(0, BN)
    mask_n = offs_n < N
    b_ptrs = b_ptr + bid * sbb + offs_n[:, None] * sbn + k_off[None, :] * sbk  # B's tile, as BN×BK
    a_ptrs = a_ptr + bid * sab + m * sam + k_off * sak
    acc = tl.zeros((BN, BK), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k_ok = offs_k < K - k0
        w = tl.load(b_ptrs, mask=mask_n[:, None] & k_ok[None, :], other=0.0)
        x = tl.load(a_ptrs, mask=k_ok, other=0.0)
        acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
        a_ptrs += step_a
        b_ptrs += step_b
    row = tl.sum(acc, axis=1)[None, :]  # 1×BN: this row of C's tile
    row = scale_acc(row, i_ptr + bid * sib, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, m, off_n, 1, BN,
                    HAS_BETA, HAS_SCALE)
    store_ptr(row, c_ptr + bid * scb, M, N, scm, scn, m, off_n, 1, BN)


def usable(p: P.Problem) -> str:
    """'' when this rung can run p, else why not."""
    if p.m > MAX_M:
        return f"M ≤ {MAX_M} only (M = {p.m}): past it t04's MMA costs less than re-reading B per row of A"
    if p.in_dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return "FP16, BF16 or FP32 inputs (FP32 multiplies exactly, TF32 or not)"
    return ""


def launches(p: P.Problem, cfg: dict) -> list[P.KernelCall]:
    """One launch: a program per row of A and BN columns of C (axis 0, rows fastest), per batch (axis 1)."""
    c_in, sa, sb = P.epilogue_args(p)
    grid = (ceil_div(p.n, cfg["BN"]) * p.m, p.batch)
    args = P.ordered(gemv_kernel, a_ptr=p.a, b_ptr=p.b, c_ptr=p.c, i_ptr=c_in, sa_ptr=sa, sb_ptr=sb, M=p.m, N=p.n,
                     K=p.k, sab=p.bstride(p.a), sam=p.a.stride(-2), sak=p.a.stride(-1), sbb=p.bstride(p.b),
                     sbk=p.b.stride(-2), sbn=p.b.stride(-1), scb=p.bstride(p.c), scm=p.c.stride(-2),
                     scn=p.c.stride(-1), sib=p.bstride(c_in), sim=c_in.stride(-2), sin_=c_in.stride(-1),
                     alpha=float(p.alpha), beta=float(p.beta), BN=cfg["BN"], BK=cfg["BK"], HAS_BETA=p.has_beta,
                     HAS_SCALE=p.scale_a is not None, WIDE=p.too_large)
    return [P.KernelCall(gemv_kernel, grid, args, dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))]


def traffic(m, n, k, s, bn=4):
    """Bytes the design moves: B once (its other rows of A read it from L2), A's row once per
    column of tiles, C once (at the input size, as the other rungs count it)."""
    return (k * n + m * k * ceil_div(n, bn) + m * n) * float(s)
