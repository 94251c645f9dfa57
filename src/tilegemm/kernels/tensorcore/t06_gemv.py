"""t06 GEMV form for decode (M ≤ 4): each weight read once, straight into registers, no tensor cores.

Changes against t04: at M = 1…4 (a decode step's batch) the product is a matrix-vector product per
row of A; the tensor cores' work is nothing beside reading B (the weight, K·N·s bytes), so what
counts is how many bytes stand in flight and how few instructions each one costs. t04 stages B's
tiles through shared memory for the MMA and splits K so that enough programs run; here a program
takes BN columns of C (BN rows of W when B = Wᵀ, K-major) and ROWS rows of A (all of M at M ≤ 4),
walks the whole of K in steps of BK, loads its BN×BK tile of B with 16-byte loads into registers,
converts it to FP32 once, and multiplies it by each row's BK elements (FMA) into that row's
accumulator, reduced over K once, at the end: no split of K, so nothing is summed twice and the
result is deterministic. FOLD > 1 sums each FOLD neighbours along K (one 16-byte load's
elements, within a thread) every step, so an accumulator is BN×BK/FOLD registers, not BN×BK:
at four rows that is what keeps a program's registers, and so the bytes in flight, up. It is
taken only where those neighbours are one thread's (`fold`): elsewhere the sum would cross
lanes, by shuffles whose first add Triton fuses with the product (an FMA), so lanes of one
group hold results a rounding apart and all store them to one shared slot (racecheck's WAW,
triton-lang/triton#7264).

The counts behind it (docs/perf-notes.md, 41 and 42; sm_90, BF16, K-major B, BN = 4, BK = 1024,
4 warps): one row, FOLD = 1, 134 loop instructions per 8 KB of B (5 LDG.128, 32 FFMA, no shared
memory), 4.2 a weight, 64 registers; four rows 8.9 a weight at 203 registers, with FOLD = 8 10.8
a weight at 95. A weight costs about 2.5 + 1.6·ROWS instructions (FOLD = 1), so the form reads B
at the memory's pace while that stays a fraction of the issue rate; past M = 4 t04's MMA does
better (on the H200 it already ties t06 at M = 4 on the largest weights).

Global traffic (elements; s input size, s_c output size):
    reads  = K·N (B, once) + M·K·ceil(N/BN) (A's rows, from L2)
    writes = M·N
DRAM traffic ≈ K·N·s + M·N·s_c bytes; arithmetic intensity ≈ 2·M/s FLOP/byte (1 at M = 1 in
BF16): the floor is reading B once at the memory's read bandwidth.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...registry import ceil_div
from . import _problem as P
from ._jit import scale_acc, store_ptr

NAME = "tc_gemv"
MAX_M = 4  # past this, a weight's 2.5 + 1.6·M instructions cost more than t04's MMA


@triton.jit
def _fma_row(acc, w, x_ptrs, k_ok, BN: tl.constexpr, BK: tl.constexpr, FOLD: tl.constexpr, EVEN_K: tl.constexpr):
    """acc + W's tile times one row of A's BK elements (FP32), each FOLD neighbours along K summed
    first (with B K-major, within a thread: one 16-byte load's elements), so acc is BN×(BK/FOLD)."""
    if EVEN_K:
        x = tl.load(x_ptrs)
    else:
        x = tl.load(x_ptrs, mask=k_ok, other=0.0)
    prod = w * x.to(tl.float32)[None, :]
    if FOLD > 1:
        prod = tl.sum(tl.reshape(prod, (BN, BK // FOLD, FOLD)), axis=2)
    return acc + prod


@triton.jit
def _store_row(acc, c_ptr, i_ptr, sa_ptr, sb_ptr, N, scn, sin_, alpha, beta, off_n, BN: tl.constexpr,
               HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr):
    """One row of C's tile: acc reduced over K, scaled (+ beta·C_in), stored. c_ptr and i_ptr
    point at the row already."""
    row = tl.sum(acc, axis=1)[None, :]  # 1×BN
    row = scale_acc(row, i_ptr, sa_ptr, sb_ptr, 1, N, 0, sin_, alpha, beta, 0, off_n, 1, BN, HAS_BETA, HAS_SCALE)
    store_ptr(row, c_ptr, 1, N, 0, scn, 0, off_n, 1, BN)


@triton.jit
def gemv_kernel(a_ptr, b_ptr, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K,
                sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sib, sim, sin_, alpha, beta,
                BN: tl.constexpr, BK: tl.constexpr, FOLD: tl.constexpr, ROWS: tl.constexpr, EVEN_K: tl.constexpr,
                HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr, WIDE: tl.constexpr = False):
    blocks_m = M // ROWS
    off_n = (tl.program_id(0) // blocks_m) * BN
    m0 = (tl.program_id(0) % blocks_m) * ROWS  # the fastest index: a column of tiles' row blocks run together
    bid = tl.program_id(1).to(tl.int64)
    offs_k = tl.arange(0, BK)
    k_off = offs_k
    step_a = BK * sak
    step_b = BK * sbk
    if WIDE:  # an operand spans past 2^31 elements: every offset in 64 bits
        off_n = off_n.to(tl.int64)
        m0 = m0.to(tl.int64)
        k_off = offs_k.to(tl.int64)
        step_a = tl.cast(BK, tl.int64) * sak
        step_b = tl.cast(BK, tl.int64) * sbk
        sam = tl.cast(sam, tl.int64)
        scm = tl.cast(scm, tl.int64)
        sim = tl.cast(sim, tl.int64)
    offs_n = off_n + tl.arange(0, BN)
    mask_n = offs_n < N
    b_ptrs = b_ptr + bid * sbb + offs_n[:, None] * sbn + k_off[None, :] * sbk  # B's tile, as BN×BK
    a_ptrs = a_ptr + bid * sab + m0 * sam + k_off * sak  # row m0 of A; the block's others sam apart
    acc0 = tl.zeros((BN, BK // FOLD), dtype=tl.float32)
    acc1 = acc0
    acc2 = acc0
    acc3 = acc0
    for k0 in range(0, K, BK):
        k_ok = offs_k < K - k0  # all true where BK divides K (EVEN_K): then no load reads it
        if EVEN_K:
            w = tl.load(b_ptrs, mask=mask_n[:, None], other=0.0)
        else:
            w = tl.load(b_ptrs, mask=mask_n[:, None] & k_ok[None, :], other=0.0)
        w = w.to(tl.float32)  # converted once, used by each row of the block
        acc0 = _fma_row(acc0, w, a_ptrs, k_ok, BN, BK, FOLD, EVEN_K)
        if ROWS > 1:
            acc1 = _fma_row(acc1, w, a_ptrs + sam, k_ok, BN, BK, FOLD, EVEN_K)
        if ROWS > 2:
            acc2 = _fma_row(acc2, w, a_ptrs + 2 * sam, k_ok, BN, BK, FOLD, EVEN_K)
        if ROWS > 3:
            acc3 = _fma_row(acc3, w, a_ptrs + 3 * sam, k_ok, BN, BK, FOLD, EVEN_K)
        a_ptrs += step_a
        b_ptrs += step_b
    c_row = c_ptr + bid * scb + m0 * scm
    i_row = i_ptr + bid * sib + m0 * sim
    _store_row(acc0, c_row, i_row, sa_ptr, sb_ptr, N, scn, sin_, alpha, beta, off_n, BN, HAS_BETA, HAS_SCALE)
    if ROWS > 1:
        _store_row(acc1, c_row + scm, i_row + sim, sa_ptr, sb_ptr, N, scn, sin_, alpha, beta, off_n, BN, HAS_BETA,
                   HAS_SCALE)
    if ROWS > 2:
        _store_row(acc2, c_row + 2 * scm, i_row + 2 * sim, sa_ptr, sb_ptr, N, scn, sin_, alpha, beta, off_n, BN,
                   HAS_BETA, HAS_SCALE)
    if ROWS > 3:
        _store_row(acc3, c_row + 3 * scm, i_row + 3 * sim, sa_ptr, sb_ptr, N, scn, sin_, alpha, beta, off_n, BN,
                   HAS_BETA, HAS_SCALE)


def rows_per_program(m: int) -> int:
    """How many rows of A a program takes: the most, up to 4, that divide M (so no row is masked);
    at M ≤ 4 (t06's own range) all of them, and W's tile is read and converted once."""
    return next(r for r in (4, 3, 2, 1) if m % r == 0) if m > 0 else 1


def fold(p: P.Problem, cfg: dict) -> int:
    """The configuration's FOLD where each thread holds FOLD neighbours along K, else 1. Triton
    gives a thread up to 16 contiguous bytes of B's tile where K is B's contiguous axis and
    every row starts 16 bytes aligned (B's address, and its other strides multiples of 16
    elements: the divisibility Triton specialises on), and as many as the tile has for each of
    its 32·num_warps threads. Past that (a row-major B, unaligned rows, a tile smaller than its
    threads: K = 8 is a 4×16 tile for 128 threads, or FOLD elements wider than 16 bytes: FP32 with
    FOLD 8) the FOLD sum would cross lanes. The batch stride is the one the launch passes."""
    want = int(cfg.get("FOLD", 1))
    b = p.b
    aligned = (P.is_kmajor(b, "b") and b.data_ptr() % 16 == 0 and b.stride(-1) % 16 == 0
               and p.bstride(b) % 16 == 0)
    per_thread = cfg["BN"] * cfg["BK"] // (32 * cfg["num_warps"])
    return want if want > 1 and aligned and per_thread >= want and want * b.element_size() <= 16 else 1


def usable(p: P.Problem) -> str:
    """'' when this rung can run p, else why not."""
    if p.m > MAX_M:
        return f"M ≤ {MAX_M} only (M = {p.m}): past it t04's MMA costs less than an FMA per weight and row"
    if p.in_dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return "FP16, BF16 or FP32 inputs (FP32 multiplies exactly, TF32 or not)"
    return ""


def launches(p: P.Problem, cfg: dict) -> list[P.KernelCall]:
    """One launch: a program per ROWS rows of A and BN columns of C (axis 0, row blocks fastest), per
    batch (axis 1)."""
    c_in, sa, sb = P.epilogue_args(p)
    rows = rows_per_program(p.m)
    grid = (ceil_div(p.n, cfg["BN"]) * (p.m // rows), p.batch)  # M = 0: no program
    args = P.ordered(gemv_kernel, a_ptr=p.a, b_ptr=p.b, c_ptr=p.c, i_ptr=c_in, sa_ptr=sa, sb_ptr=sb, M=p.m, N=p.n,
                     K=p.k, sab=p.bstride(p.a), sam=p.a.stride(-2), sak=p.a.stride(-1), sbb=p.bstride(p.b),
                     sbk=p.b.stride(-2), sbn=p.b.stride(-1), scb=p.bstride(p.c), scm=p.c.stride(-2),
                     scn=p.c.stride(-1), sib=p.bstride(c_in), sim=c_in.stride(-2), sin_=c_in.stride(-1),
                     alpha=float(p.alpha), beta=float(p.beta), BN=cfg["BN"], BK=cfg["BK"],
                     FOLD=fold(p, cfg), ROWS=rows, EVEN_K=p.k % cfg["BK"] == 0, HAS_BETA=p.has_beta,
                     HAS_SCALE=p.scale_a is not None, WIDE=p.too_large)
    return [P.KernelCall(gemv_kernel, grid, args, dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))]


def traffic(m, n, k, s, bn=4):
    """Bytes the design moves: B once, A's rows once per column of tiles, C once (at the input
    size, as the other rungs count it)."""
    return (k * n + m * k * ceil_div(n, bn) + m * n) * float(s)


def compile_for_sm90(p: P.Problem, cfg: dict):
    """p's launch compiled for sm_90 without a GPU (`P.compile_for_sm90`: specialised as a launch
    is): the CompiledKernel, whose .asm["ptx"] shows what the K loop does."""
    return P.compile_for_sm90(launches(p, cfg)[0])
