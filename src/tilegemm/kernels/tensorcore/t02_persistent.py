"""t02 persistent tensor-core GEMM: one program per SM, each walking tiles strided by the SM count.

Changes against t01: the grid is min(#SMs, tiles) programs instead of one per tile; program p
computes tiles p, p + #SMs, p + 2·#SMs, … (over all batches). The tile order inside the walk is
t01's grouped order, so at any moment the #SMs tiles in flight form a compact block of C and
share their A and B panels in L2. Launch and block-scheduling costs are paid once per SM instead
of once per tile, and a program issues the next tile's first loads right after the previous
tile's stores, with no launch between them (the software pipeline still fills and drains once per
tile: t03's FLAT option removes that). Wave quantization stays: where the tile count is not a
multiple of #SMs, some programs take one tile more than the others, and the last round is as
partly idle as t01's last wave.

Attacks: per-tile launch and block-scheduling overhead; not bytes.

Global traffic is t01's (the tiles and their order are the same):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N   (elements)
Arithmetic intensity ≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte for large K. How much of the re-read
traffic L2 absorbs comes from the grouped order, as in t01: #SMs consecutive grouped tiles (132
on an H200: GROUP_M rows of tiles by 132/GROUP_M columns) touch about
(GROUP_M·BM + (132/GROUP_M)·BN)·K elements of A and B (near sqrt(132)·(BM + BN)·K when
GROUP_M ≈ sqrt(132)) instead of the 132·(BM + BN)·K they load in all.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...registry import ceil_div
from . import _problem as P
from ._jit import grouped_tile, mainloop_ptr, scale_acc, store_ptr

NAME = "tc_persistent"


@triton.jit
def persistent_kernel(a_ptr, b_ptr, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K, BATCH,
                      sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sib, sim, sin_, alpha, beta,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                      NUM_SMS: tl.constexpr, PRECISION: tl.constexpr, HAS_BETA: tl.constexpr,
                      HAS_SCALE: tl.constexpr, WIDE: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    tiles = num_pid_m * num_pid_n
    for t in tl.range(start, tiles * BATCH, NUM_SMS):
        bid = (t // tiles).to(tl.int64)
        pid_m, pid_n = grouped_tile(t % tiles, num_pid_m, num_pid_n, GROUP_M)
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
    """One launch of min(#SMs, tiles) programs."""
    c_in, sa, sb = P.epilogue_args(p)
    sms = P.num_sms(p.a.device)
    tiles = ceil_div(p.m, cfg["BM"]) * ceil_div(p.n, cfg["BN"]) * p.batch
    args = [p.a, p.b, p.c, c_in, sa, sb, p.m, p.n, p.k, p.batch,
            p.bstride(p.a), *p.mat_strides(p.a), p.bstride(p.b), *p.mat_strides(p.b),
            p.bstride(p.c), *p.mat_strides(p.c), p.bstride(c_in), *p.mat_strides(c_in),
            float(p.alpha), float(p.beta),
            cfg["BM"], cfg["BN"], cfg["BK"], cfg["GROUP_M"], sms, p.dot_precision, p.has_beta, p.scale_a is not None,
            p.too_large, p.promote(cfg["BK"])]
    return [P.KernelCall(persistent_kernel, (min(sms, tiles),), args,
                         dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))]


def traffic(m, n, k, s, bm=128, bn=128):
    return (m * k * ceil_div(n, bn) + k * n * ceil_div(m, bm) + m * n) * float(s)
