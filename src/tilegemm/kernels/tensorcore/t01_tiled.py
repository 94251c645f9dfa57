"""t01 tiled tensor-core GEMM: one program per BM×BN tile of C, tl.dot on BK-deep slices, grouped order.

Against the SIMT ladder: the inner product of a tile is one `tl.dot`, which Triton lowers to the
tensor cores (wgmma on sm_90 when BM ≥ 64, mma.sync below), with FP32 accumulation for FP16,
BF16 and TF32 inputs; FP8's wgmma sums into a narrower accumulator unless PROMOTE (gemm's
fast_accum=False) has its partial sums added into FP32 every PROMOTE of K (`_jit.dot`, which every
rung's MMA goes through; t05's twin is `_mma`). Triton stages the A and B slices in shared memory and software-
pipelines the K loop over `num_stages` buffers. Programs are numbered in GROUP_M-row groups of
tiles (walking down a group's columns first), so programs running together share A rows and B
columns in L2 instead of streaming all of B once per row of tiles.

Loads are masked (zeros past the M, N, K edges), and A, B, C are addressed through their strides,
so transposed views, any M, N, K and batched 3-D operands (grid axis 1) need no copies.

Global traffic (elements of size s for A, B; s_c for C), with perfect L2 reuse left out:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM)      (each A row-panel once per column of tiles, …)
    writes = M·N   (plus M·N reads of C_in when beta ≠ 0)
Arithmetic intensity against DRAM ≈ 2·M·N·K / (s·(M·K·N/BN + K·N·M/BM) + s_c·M·N)
    ≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte for large K: 85 FLOP/B at 128×256, FP16.
Grouped order lowers the effective re-reads further, since a group's tiles hit in L2.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...registry import ceil_div
from . import _problem as P
from ._jit import grouped_tile, mainloop_ptr, scale_acc, store_ptr

NAME = "tc_tiled"


@triton.jit
def tiled_kernel(a_ptr, b_ptr, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K,
                 sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sib, sim, sin_, alpha, beta,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                 PRECISION: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr,
                 WIDE: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    pid = tl.program_id(0)
    bid = tl.program_id(1).to(tl.int64)
    pid_m, pid_n = grouped_tile(pid, tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    off_m = pid_m * BM
    off_n = pid_n * BN
    if WIDE:  # an operand spans past 2^31 elements: every offset derived from these is 64-bit
        off_m = off_m.to(tl.int64)
        off_n = off_n.to(tl.int64)
    acc = mainloop_ptr(a_ptr + bid * sab, b_ptr + bid * sbb, M, N, K, sam, sak, sbk, sbn, off_m, off_n,
                       BM, BN, BK, PRECISION, WIDE, PROMOTE)
    acc = scale_acc(acc, i_ptr + bid * sib, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, off_m, off_n,
                    BM, BN, HAS_BETA, HAS_SCALE)
    store_ptr(acc, c_ptr + bid * scb, M, N, scm, scn, off_m, off_n, BM, BN)


def launches(p: P.Problem, cfg: dict) -> list[P.KernelCall]:
    """One launch: a program per tile of C (grid axis 0) and per batch (axis 1)."""
    c_in, sa, sb = P.epilogue_args(p)
    grid = (ceil_div(p.m, cfg["BM"]) * ceil_div(p.n, cfg["BN"]), p.batch)
    args = [p.a, p.b, p.c, c_in, sa, sb, p.m, p.n, p.k,
            p.bstride(p.a), *p.mat_strides(p.a), p.bstride(p.b), *p.mat_strides(p.b),
            p.bstride(p.c), *p.mat_strides(p.c), p.bstride(c_in), *p.mat_strides(c_in),
            float(p.alpha), float(p.beta),
            cfg["BM"], cfg["BN"], cfg["BK"], cfg["GROUP_M"], p.dot_precision, p.has_beta, p.scale_a is not None,
            p.too_large, p.promote(cfg["BK"])]
    return [P.KernelCall(tiled_kernel, grid, args, dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))]


def traffic(m, n, k, s, bm=128, bn=128):
    return (m * k * ceil_div(n, bn) + k * n * ceil_div(m, bm) + m * n) * float(s)
