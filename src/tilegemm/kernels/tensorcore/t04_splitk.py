"""t04 split-K tensor-core GEMM: for small M (decode, M ≤ 128) and small products, split K too.

Changes against t03: when M is small, C has few tiles (16×4096 in 64-wide tiles: 64 tiles for 132
SMs), so t03 leaves most SMs idle and each busy SM streams a long K panel alone: the product is
bound by too few bytes in flight, not by DRAM. t04 cuts K into SPLIT slices of whole BK steps and
launches tiles × SPLIT programs (grid axis 1 = slice, axis 2 = batch). Each program reduces its
slice into an FP32 BM×BN partial tile and writes it to an FP32 workspace W[batch, SPLIT, M, N];
a second, element-wise kernel sums the SPLIT partials in a fixed order (deterministic, no atomics),
applies alpha·scale_a·scale_b and beta·C_in in FP32, casts once and stores C through its strides.
A slice with no K steps (SPLIT > K/BK) writes zeros, so any SPLIT is correct.

FUSED (a config option the tuner tries first): one launch instead of two. Each program stores its
partial, then takes a ticket from its tile's counter (atomic, release/acquire); the program with
the last ticket sums the tile's SPLIT partials in slice order (still deterministic: the order does
not depend on which slice finished last), applies the epilogue, stores C and resets the counter.
At decode sizes the whole product takes a few µs, so a second launch is a sizeable share of it.

Loads are masked pointer loads (Triton pipelines them with cp.async over num_stages buffers), so
every layout, alignment and batched operand runs without copies. TMA (a config option, for one
matrix each whose base and rows are 16-byte aligned: `tma_ready`) loads the tiles as t03 does,
through descriptors, with no address arithmetic or masks in registers: for a swapped TF32 tile
that was markedly faster at M = 128 (docs/perf-notes.md, 55). tl.dot uses wgmma for BM ≥ 64
and mma.sync below, unless the config swaps the product (SWAP, as t03: C^T = B^T·A^T, so a
16-row tile is wgmma's N; REG_A reads a row-major TF32 B into registers).

Global traffic (elements; s input size, 4 for the FP32 workspace, s_c for C):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM)     (as t01; for M ≤ BM: A re-read per column of tiles,
                                                  B exactly once)
    partials: SPLIT·M·N·4 bytes written + read back (stays in the 60 MB L2 for the shapes it is for)
    writes = M·N·s_c
Arithmetic intensity for M ≤ BM ≈ 2·M·N·K / (s·K·N + s·M·K·N/BN + (8·SPLIT + s_c)·M·N)
    ≈ 2·M/s FLOP/byte: 16 FLOP/B at M = 16 in FP16, far below the ~206 FLOP/B ridge, so the floor is
reading B once (K·N·s bytes at ~4.1 TB/s: 8.2 µs for 4096×4096 FP16) and the goal is enough
programs (≈ 2–4 per SM) to keep that stream saturated.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...registry import ceil_div
from . import _problem as P
from . import t03_tma_persistent as t03
from ._jit import dot, grouped_tile, load_tile, mma_a, scale_acc, scale_factors, store_ptr

NAME = "tc_splitk"
REDUCE_BLOCK = 1024


@triton.jit
def _slice_partial(a_ptr, b_ptr, M, N, K, K_PER_SPLIT, sab, sam, sak, sbb, sbk, sbn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   PRECISION: tl.constexpr, SWAP: tl.constexpr, REG_A: tl.constexpr, WIDE: tl.constexpr,
                   TMA: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr, PROMOTE: tl.constexpr):
    """This program's slice of K for its tile: the FP32 partial sum, with the tile's rows and
    columns, their mask and the tile's origin (64-bit with WIDE, as every offset made from them).
    TMA: a_ptr and b_ptr are TMA descriptors of one matrix each (stored transposed where A_T,
    B_T), and a tile is one bulk copy; a slice is whole BK steps, so a box never crosses into the
    next slice, and the copy engine fills what lies past K with zeros."""
    pid = tl.program_id(0)
    s = tl.program_id(1)
    bid = tl.program_id(2).to(tl.int64)
    pid_m, pid_n = grouped_tile(pid, tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    off_m = pid_m * BM
    off_n = pid_n * BN
    k_lo = s * K_PER_SPLIT
    k_hi = tl.minimum(k_lo + K_PER_SPLIT, K)
    if SWAP:  # C^T = B^T·A^T: a tile of BM < 64 rows becomes the MMA's N (wgmma takes N = 8…256)
        acc = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    if TMA:  # TMA's coordinates are 32-bit: these loads use off_m and off_n before WIDE widens them
        for k0 in range(k_lo, k_hi, BK):
            a = load_tile(a_ptr, 0, off_m, k0, BM, BK, A_T, False)
            b = load_tile(b_ptr, 0, k0, off_n, BK, BN, B_T, False)
            if SWAP:
                acc = dot(mma_a(b.T, REG_A), a.T, acc, PRECISION, PROMOTE)
            else:
                acc = dot(mma_a(a, REG_A), b, acc, PRECISION, PROMOTE)
    if WIDE:  # an operand spans past 2^31 elements
        off_m = off_m.to(tl.int64)
        off_n = off_n.to(tl.int64)
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    mask_m = offs_m[:, None] < M
    mask_n = offs_n[None, :] < N
    if not TMA:
        offs_k = tl.arange(0, BK)
        k_first = k_lo + offs_k
        if WIDE:  # K's offsets (and steps, below) too
            k_first = k_first.to(tl.int64)
        a_ptrs = a_ptr + bid * sab + offs_m[:, None] * sam + k_first[None, :] * sak
        b_ptrs = b_ptr + bid * sbb + k_first[:, None] * sbk + offs_n[None, :] * sbn
        step_a = BK * sak
        step_b = BK * sbk
        if WIDE:
            step_a = tl.cast(BK, tl.int64) * sak
            step_b = tl.cast(BK, tl.int64) * sbk
        for k0 in range(k_lo, k_hi, BK):
            kk = k0 + offs_k
            a = tl.load(a_ptrs, mask=mask_m & (kk[None, :] < k_hi), other=0.0)
            b = tl.load(b_ptrs, mask=(kk[:, None] < k_hi) & mask_n, other=0.0)
            if SWAP:
                acc = dot(mma_a(b.T, REG_A), a.T, acc, PRECISION, PROMOTE)
            else:
                acc = dot(mma_a(a, REG_A), b, acc, PRECISION, PROMOTE)
            a_ptrs += step_a
            b_ptrs += step_b
    if SWAP:
        acc = acc.T
    return acc, offs_m, offs_n, mask_m & mask_n, off_m, off_n


@triton.jit
def splitk_partial_kernel(a_ptr, b_ptr, w_ptr, M, N, K, K_PER_SPLIT, SPLIT,
                          sab, sam, sak, sbb, sbk, sbn,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                          PRECISION: tl.constexpr, SWAP: tl.constexpr = False, REG_A: tl.constexpr = False,
                          WIDE: tl.constexpr = False, TMA: tl.constexpr = False, A_T: tl.constexpr = False,
                          B_T: tl.constexpr = False, PROMOTE: tl.constexpr = 0):
    acc, offs_m, offs_n, mask, _, _ = _slice_partial(a_ptr, b_ptr, M, N, K, K_PER_SPLIT, sab, sam, sak, sbb, sbk,
                                                     sbn, BM, BN, BK, GROUP_M, PRECISION, SWAP, REG_A, WIDE, TMA,
                                                     A_T, B_T, PROMOTE)
    s = tl.program_id(1)
    bid = tl.program_id(2).to(tl.int64)
    tl.store(w_ptr + ((bid * SPLIT + s) * M + offs_m[:, None]) * N + offs_n[None, :], acc, mask=mask)


@triton.jit
def _partial(tile_w, j, mn, mask, SPLIT):
    """Slice j's FP32 partial of the tile; past the last slice a zero, which adds nothing: -0.0 as
    written (x + -0.0 is x for every x); Triton 3.6's compiled load gives +0.0, also nothing to a
    sum that starts at +0.0 and so is never -0.0 (round to nearest), as the two-launch form's."""
    live = tl.full(mask.shape, j, tl.int32) < SPLIT  # a tensor: the interpreter refuses a scalar in a mask
    return tl.load(tile_w + j * mn, mask=mask & live, other=-0.0, cache_modifier=".cg")


@triton.jit
def _add_partials(total, tile_w, j, mn, mask, SPLIT, RED: tl.constexpr):
    """total plus slices j … j + RED − 1's partials, loaded before any is added, added in slice order."""
    p0 = _partial(tile_w, j, mn, mask, SPLIT)
    if RED >= 2:
        p1 = _partial(tile_w, j + 1, mn, mask, SPLIT)
    if RED >= 4:
        p2 = _partial(tile_w, j + 2, mn, mask, SPLIT)
        p3 = _partial(tile_w, j + 3, mn, mask, SPLIT)
    total += p0
    if RED >= 2:
        total += p1
    if RED >= 4:
        total += p2
        total += p3
    return total


@triton.jit
def splitk_fused_kernel(a_ptr, b_ptr, w_ptr, cnt_ptr, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K, K_PER_SPLIT, SPLIT,
                        sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sib, sim, sin_, alpha, beta,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                        PRECISION: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr,
                        SWAP: tl.constexpr = False, REG_A: tl.constexpr = False, WIDE: tl.constexpr = False,
                        TMA: tl.constexpr = False, A_T: tl.constexpr = False, B_T: tl.constexpr = False,
                        RED: tl.constexpr = 1, SUM_STAGES: tl.constexpr = 0, PROMOTE: tl.constexpr = 0):
    """splitk_partial_kernel, and the last slice of a tile to finish sums the tile: one launch.

    Each program stores its FP32 partial, then takes a ticket from the tile's counter (an atomic
    with release/acquire ordering, after a barrier so that every thread's stores come first).
    The program holding the last ticket adds the SPLIT partials in slice order (its own read back
    as well: holding it in registers beside the sum took two tiles of registers, which spilled at
    128×256), so the sum does not depend on which slice finished last, applies the epilogue,
    stores C and resets the counter for the next launch. The sum is a chain of L2 round trips, one
    tile wide, on one SM: it loads RED partials (1, 2 or 4: `reduce_width`) before adding any of
    them, and where that leaves 4 or more groups the loop is software-pipelined (`sum_stages`).
    On the H200 the sum of a TF32 64×64 tile in 12 slices took 8.5 µs of the kernel's 23.4 as a
    chain and 4.0 pipelined (docs/perf-notes.md, 124)."""
    acc, offs_m, offs_n, mask, off_m, off_n = _slice_partial(
        a_ptr, b_ptr, M, N, K, K_PER_SPLIT, sab, sam, sak, sbb, sbk, sbn, BM, BN, BK, GROUP_M, PRECISION, SWAP, REG_A,
        WIDE, TMA, A_T, B_T, PROMOTE)
    s = tl.program_id(1)
    bid = tl.program_id(2).to(tl.int64)
    tile_w = w_ptr + (bid * SPLIT * M + offs_m[:, None]) * N + offs_n[None, :]
    mn = M * N
    if WIDE:
        mn = tl.cast(M, tl.int64) * N  # M may be the constant 1
    tl.store(tile_w + s * mn, acc, mask=mask)
    tl.debug_barrier()  # every thread's partial is stored before the ticket is taken
    counter = cnt_ptr + bid * tl.cdiv(M, BM) * tl.cdiv(N, BN) + tl.program_id(0)
    ticket = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
    if ticket == SPLIT - 1:  # its own partial is read back too: acc is dead by now (one tile of registers, not two)
        total = tl.zeros((BM, BN), dtype=tl.float32)
        if SUM_STAGES:  # software-pipelined: later groups' loads in flight (cp.async into shared memory);
            # a plain range (below) is what Triton leaves unpipelined in a loop without a dot
            for j in tl.range(0, SPLIT, RED, num_stages=SUM_STAGES):
                total = _add_partials(total, tile_w, j, mn, mask, SPLIT, RED)
        else:
            for j in range(0, SPLIT, RED):
                total = _add_partials(total, tile_w, j, mn, mask, SPLIT, RED)
        total = scale_acc(total, i_ptr + bid * sib, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, off_m, off_n,
                          BM, BN, HAS_BETA, HAS_SCALE)
        store_ptr(total, c_ptr + bid * scb, M, N, scm, scn, off_m, off_n, BM, BN)
        tl.atomic_xchg(counter, 0)  # ready for the next launch


@triton.jit
def splitk_reduce_kernel(w_ptr, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, SPLIT,
                         scb, scm, scn, sib, sim, sin_, alpha, beta,
                         BLOCK: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr,
                         WIDE: tl.constexpr = False):
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    bid = tl.program_id(1).to(tl.int64)
    mn = M * N
    if WIDE:  # C past 2^31 elements: its element index, and every offset, in 64 bits
        e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mn = tl.cast(M, tl.int64) * N  # M may be the constant 1
    mask = e < mn
    w = w_ptr + bid * SPLIT * mn + e
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for _s in range(0, SPLIT):
        acc += tl.load(w, mask=mask, other=0.0)
        w += mn
    if HAS_SCALE:
        first, second = scale_factors(tl.load(sa_ptr), tl.load(sb_ptr))
        acc = acc * first * second
    acc = acc * alpha
    row = e // N
    col = e % N
    if HAS_BETA:
        c_in = tl.load(i_ptr + bid * sib + row * sim + col * sin_, mask=mask, other=0.0)
        acc += beta * c_in.to(tl.float32)
    tl.store(c_ptr + bid * scb + row * scm + col * scn, acc.to(c_ptr.dtype.element_ty), mask=mask)


# ---- host side --------------------------------------------------------------------------------


def k_per_split(k: int, bk: int, split: int) -> int:
    """Whole BK steps per slice; later slices may be empty when split > ceil(K/BK)."""
    return ceil_div(ceil_div(k, bk), split) * bk


def reduce_width(cfg: dict, split: int) -> int:
    """Partials the fused kernel's last slice loads at once (RED): as many as keep 32 FP32 values a
    thread in flight (a partial is the tile's BM·BN over its threads each), at most 4, and no more
    than the slices rounded up to a power of two: 4 for 16×64 tiles on 4 warps, 2 for 32×64, 1 for
    64×64: on the cold clock the fastest of 1, 2 and 4 at 11 of 12 of the H200's fused entries,
    3% off it at the twelfth (docs/perf-notes.md, 123)."""
    per_thread = max(1, cfg["BM"] * cfg["BN"] // (32 * cfg["num_warps"]))
    return max(1, min(4, 32 // per_thread, triton.next_power_of_2(max(split, 1))))


def sum_stages(cfg: dict, split: int, red: int, in_size: int) -> int:
    """Stages of the fused kernel's sum loop (0: a plain loop, not pipelined): 3 where it makes 4
    or more groups of RED partials and its shared-memory buffers, two groups of FP32 tiles, fit in
    the main loop's ring of A and B tiles (at least num_stages − 1 of them), which they reuse, so
    that the kernel's shared memory, and the programs an SM, stay as they were (a 128×256 tile's
    would need 256 KB). At TF32 64×64 tiles in 12 slices the sum took 8.5 µs of 23.4 and 4.0 with 3
    stages; at 4 groups 0.5 µs came off; at 1-3 groups 3 stages cost 0.2-1.4 µs, cold
    (docs/perf-notes.md, 124)."""
    stages = 3
    ring = (cfg["num_stages"] - 1) * P.stage_bytes(cfg, in_size)
    fits = (stages - 1) * red * cfg["BM"] * cfg["BN"] * 4 <= ring
    return stages if ceil_div(split, red) >= 4 and fits else 0


_COUNTERS: dict = {}  # (device, stream) -> int32 tile counters, all zero between launches


def counters(device, stream_id: int, n: int):
    """Zeroed int32 tile counters for fused split-K on this device and stream, at least n of them.
    Each launch leaves them zero again (the last slice of a tile resets its counter); one set per
    stream, so launches that could overlap never share one; a launch being captured in a CUDA
    graph gets a set of its own (each graph's replays then use theirs). device: a torch.device."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():  # a graph's own, zeroed by its
        # capture, kept by its pool (the query raises on a CPU build: the Triton interpreter's runs)
        return torch.zeros(max(n, 1024), dtype=torch.int32, device=device)
    key = (device, stream_id)
    t = _COUNTERS.get(key)
    if t is None or t.numel() < n:
        t = _COUNTERS[key] = P.made_apart(lambda: torch.zeros(max(n, 1024), dtype=torch.int32, device=device),
                                          device, on_callers_stream=True)  # (kept: apart from the caller's pool)
    return t


def tma_ready(p: P.Problem) -> bool:
    """Can cfg's TMA option load p's operands as they are: sm_90, one matrix each (or a batch of
    one), base and row strides 16-byte aligned? Where not, a TMA configuration runs with pointer
    loads (the same tile and split, no copy)."""
    if p.a.device.type == "cuda" and P.capability(p.a.device) < (9, 0):
        return False
    a, b = t03._squeeze(p.a), t03._squeeze(p.b)
    return a.dim() == 2 and b.dim() == 2 and all(t03._tma_ok(x, t03._inner(x)) for x in (a, b))


def _loads(p: P.Problem, cfg: dict, BM: int, BN: int, BK: int) -> tuple:
    """(A's, B's kernel argument, TMA constexprs): descriptors with cfg's TMA where `tma_ready`,
    else the tensors."""
    if not (cfg.get("TMA") and tma_ready(p)):
        return p.a, p.b, dict(TMA=False, A_T=False, B_T=False)
    a, b = t03._squeeze(p.a), t03._squeeze(p.b)
    a_t, b_t = a.stride(-1) != 1, b.stride(-1) != 1
    return t03._desc(a, BM, BK, a_t), t03._desc(b, BK, BN, b_t), dict(TMA=True, A_T=a_t, B_T=b_t)


def launches(p: P.Problem, cfg: dict) -> list[P.KernelCall]:
    """The launches of one split-K product: one with FUSED, the partial and the reduction kernels
    without. The FP32 workspace of partials is scratch (written before it is read, in the call).
    With TMA (where `tma_ready`), A's and B's tiles are bulk copies through descriptors."""
    BM, BN, BK, split = cfg["BM"], cfg["BN"], cfg["BK"], int(cfg["SPLIT"])
    w = torch.empty((p.batch, split, p.m, p.n), dtype=torch.float32, device=p.c.device)
    a, b, tma = _loads(p, cfg, BM, BN, BK)
    grid = (ceil_div(p.m, BM) * ceil_div(p.n, BN), split, p.batch)
    wide = p.too_large or split * p.m * p.n > P.INT32_MAX  # the partials' offsets past 2^31 too
    tile = dict(BM=BM, BN=BN, BK=BK, GROUP_M=cfg["GROUP_M"], PRECISION=p.dot_precision, WIDE=wide, **tma,
                PROMOTE=p.promote(BK), **P.mma_form(cfg))
    c_in, sa, sb = P.epilogue_args(p)
    epilogue = dict(HAS_BETA=p.has_beta, HAS_SCALE=p.scale_a is not None)
    kps = k_per_split(p.k, BK, split)
    opts = dict(num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    strides = (p.bstride(p.a), *p.mat_strides(p.a), p.bstride(p.b), *p.mat_strides(p.b))
    if cfg.get("FUSED"):
        stream = torch.cuda.current_stream(p.c.device).cuda_stream if p.c.device.type == "cuda" else 0
        cnt = counters(p.c.device, stream, grid[0] * p.batch)
        args = (a, b, w, cnt, p.c, c_in, sa, sb, p.m, p.n, p.k, kps, split, *strides,
                p.bstride(p.c), *p.mat_strides(p.c), p.bstride(c_in), *p.mat_strides(c_in),
                float(p.alpha), float(p.beta))
        red = reduce_width(cfg, split)
        fused = P.ordered(splitk_fused_kernel, args, **tile, **epilogue, RED=red,
                          SUM_STAGES=sum_stages(cfg, split, red, p.a.element_size()))
        return [P.KernelCall(splitk_fused_kernel, grid, fused, opts, scratch=(w,), stream_bound=True)]
    args = (a, b, w, p.m, p.n, p.k, kps, split, *strides)
    reduce_args = (w, p.c, c_in, sa, sb, p.m, p.n, split, p.bstride(p.c), *p.mat_strides(p.c),
                   p.bstride(c_in), *p.mat_strides(c_in), float(p.alpha), float(p.beta))
    return [P.KernelCall(splitk_partial_kernel, grid, P.ordered(splitk_partial_kernel, args, **tile), opts,
                         scratch=(w,)),
            P.KernelCall(splitk_reduce_kernel, (ceil_div(p.m * p.n, REDUCE_BLOCK), p.batch),
                         P.ordered(splitk_reduce_kernel, reduce_args, BLOCK=REDUCE_BLOCK, WIDE=wide, **epilogue),
                         dict(num_warps=4, num_stages=3), scratch=(w,))]


def traffic(m, n, k, s, bm=16, bn=64, split=4):
    return (m * k * ceil_div(n, bn) + k * n * ceil_div(m, bm) + m * n) * float(s) + 8.0 * split * m * n

