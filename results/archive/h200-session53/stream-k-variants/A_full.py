"""t05 warp-specialised persistent GEMM for Hopper, written in Gluon: a producer warp and consumer warpgroups.

Changes against t03: the roles are split between warps instead of being interleaved in every warp
by the compiler's software pipeline. Triton 3.6 does not do this on sm_90 (its automatic
`warp_specialize` is Blackwell-only: docs/perf-notes.md, 16), so this rung is written in Gluon,
Triton's explicit layer, where the kernel states its partitions, barriers and shared buffers:

- a **producer** partition of one warp walks the same persistent, grouped tile order and, for
  each k-step, waits until a stage of the shared-memory ring is free (`empty[s]`) and issues the
  two TMA copies into it, which complete on `ready[s]`. It holds 24 registers
  (`setmaxnreg`), so the
- **consumer** partition (two warpgroups, 8 warps, each warpgroup 64 rows of the MMA's 128-row
  tile: C's rows, or in the swapped TF32 form C's columns) gets 240: it waits on `ready[s]`, issues wgmma on the stage, keeps one wgmma group in flight,
  and frees the previous stage (`empty[prev]`) once that group has retired. Its epilogue
  (accumulator → output dtype → shared → TMA store, in SPLIT slices of BN/SPLIT columns so that
  the epilogue buffer is small and the ring can be deeper) runs while the producer is already
  filling the ring with the next tile's operands, which t03 cannot do without FLAT.
  With CONSUMERS = 2 the two warpgroups are two partitions, each over 64 rows of the tile, and
  each frees a stage on its own (the `empty` barrier counts two arrivals): no 256-thread barrier
  between them, at the price of a second epilogue buffer.
  With CONSUMERS = 3 the tile is 192×128: three partitions of one warpgroup, each 64 rows
  (m64n128 wgmma, sharing B's stage), on 128 registers a thread at launch (16 warps), moved to
  168/160/160 and the producer's 24. Triton's TMA descriptors and Gluon's shared buffers take
  only power-of-two blocks, so the producer copies A's 192 rows as three 64-row boxes
  (A_PIECES), one per consumer. The point is the
  count of tiles: 3072² is 384 of them for 132 SMs (2.9 waves, run as 3) where 128×256 makes
  288 (2.2 waves, also run as 3), so the last wave is nearly full instead of a fifth full.

Operands: A row-major (M×K); B row-major (K×N) or column-major (B_T); C row-major,
FP16/BF16/FP32. Inputs FP16, BF16, FP8 (e4m3/e5m2, per-tensor scales applied in the epilogue) or
FP32 as TF32. 8- and 32-bit wgmma read shared-memory operands only K-major, so:
- FP8 needs B column-major (as torch._scaled_mm does);
- TF32 with a row-major B runs swapped (SWAP), as cuBLAS's TF32 kernel does: the MMA computes
  C^T = B^T·A^T over a tile of 128 of C's columns × 256 of its rows; B's tile, N-major in shared
  memory, is the MMA's A operand and is loaded into registers (no layout rule there), A's tile
  is its K-major B operand, and the epilogue stores the transposed accumulator. The consumer
  runs two k-steps a trip with two sets of operand registers, so that a wgmma in flight never has
  its registers overwritten, and it is one 8-warp partition, on which ptxas keeps the wgmma
  pipelined (SWAP_CONFIGS says why not two).
Alpha and beta are not in this rung (t03 serves those calls), but for a bias row: C_in one row of N
broadcast over C's rows with beta 1 (a linear layer's bias, `_problem.Problem.bias_row`), which the
epilogue loads (BN elements a tile) and adds to the accumulator before C is stored.

Global traffic is t03's (the same tiles, in the same order):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N   (elements)
so arithmetic intensity against DRAM is unchanged, ≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte before L2
reuse. What changes is issue: per k-step the consumer warps issue only wgmma and barrier waits
(and, swapped, the register operand's shared loads),
and the ring holds STAGES·(BM + BN)·BK·s bytes (4 stages of 128×256×64 in 16 bits: 192 KB, against
t03's 3), so a late copy stalls the tensor cores less often. Every width keeps BK·s = 128 bytes (the
TMA swizzle's row): BK = 64 for 16 bits, 128 for FP8, 32 for TF32.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                               warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ...registry import ceil_div
from . import _problem as P
from . import t03_tma_persistent as t03
from . import t04_splitk as t04

NAME = "tc_warp_specialized"
# Gluon is experimental and renames things: Triton 3.9 calls the TMA copies async_load/async_store
# (3.6, the H200's, has only the older names)
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
_barrier = getattr(gl, "barrier", None) or gl.thread_barrier  # a partition's threads (bar.sync 0, its count)


@gluon.jit
def _tile(t, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Grouped order (t03's): GROUP_M rows of tiles share each column of B while it is in L2."""
    in_group = GROUP_M * num_pid_n
    first_m = (t // in_group) * GROUP_M
    rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (t % in_group) % rows, (t % in_group) // rows


@gluon.jit
def _units(DP, SHARED, SEGS, NUM_SMS: gl.constexpr):
    """How many units this program runs: its whole tiles of the first DP (round-robin), then its
    pieces of the SHARED tiles after them, each cut into SEGS pieces of its k-steps (round-robin
    over piece index seg·SHARED + tile)."""
    p = gl.program_id(0)
    return (DP - p + NUM_SMS - 1) // NUM_SMS + (SHARED * SEGS - p + NUM_SMS - 1) // NUM_SMS


@gluon.jit
def _unit(u, DP, SHARED, SEGS, n_k, NUM_SMS: gl.constexpr):
    """This program's u-th unit: (tile in the grouped order, piece index among the shared tiles'
    pieces or -1 for a whole tile, first k-step, end k-step). Pieces are dealt round-robin in
    piece order, so at any time the programs run the same piece (the same k-steps) of different
    tiles, and the operands' k-slices they read are shared in L2 as in the whole-tile waves."""
    p = gl.program_id(0)
    n_dp = (DP - p + NUM_SMS - 1) // NUM_SMS
    v = p + (u - n_dp) * NUM_SMS
    seg = v // gl.maximum(SHARED, 1)
    whole = u < n_dp
    t = gl.where(whole, p + u * NUM_SMS, DP + v - seg * SHARED)
    k0 = gl.where(whole, 0, seg * n_k // SEGS)
    k1 = gl.where(whole, n_k, (seg + 1) * n_k // SEGS)
    return t, gl.where(whole, -1, v), k0, k1


@gluon.jit
def _load_steps(a_desc, b_desc, a_bufs, b_bufs, ready, empty, i, pid_m, pid_n, k0, k1,
                BN: gl.constexpr, B_T: gl.constexpr, A_PIECES: gl.constexpr):
    """Issue the producer's copies for k-steps k0 … k1-1 of tile (pid_m, pid_n), the first at the
    program's i-th step overall; returns the next i."""
    PR: gl.constexpr = a_desc.block_type.shape[0]
    BM: gl.constexpr = PR * A_PIECES
    BK: gl.constexpr = a_desc.block_type.shape[1]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    nbytes: gl.constexpr = A_PIECES * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for kk in range(k0, k1):
        s = i % STAGES
        # a fresh barrier counts as having completed the lap before the first, so lap 0 passes
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), nbytes)
        for j in gl.static_range(A_PIECES):
            _tma_load(a_desc, [pid_m * BM + j * PR, kk * BK], ready.index(s), a_bufs.index(s * A_PIECES + j))
        if B_T:
            _tma_load(b_desc, [pid_n * BN, kk * BK], ready.index(s), b_bufs.index(s))
        else:
            _tma_load(b_desc, [kk * BK, pid_n * BN], ready.index(s), b_bufs.index(s))
        i += 1
    return i


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, DP, SHARED, SEGS,
              BN: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr, B_T: gl.constexpr,
              A_PIECES: gl.constexpr, SK: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0] * A_PIECES
    BK: gl.constexpr = a_desc.block_type.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    n_k = gl.cdiv(K, BK)
    i = 0  # k-steps issued by this program, over all its tiles: stage i % STAGES, lap i // STAGES
    if SK:  # whole tiles and pieces in one loop, as the consumer walks them (one copy of the loads)
        for u in range(_units(DP, SHARED, SEGS, NUM_SMS)):
            t, v, k0, k1 = _unit(u, DP, SHARED, SEGS, n_k, NUM_SMS)
            pid_m, pid_n = _tile(t, num_pid_m, num_pid_n, GROUP_M)
            i = _load_steps(a_desc, b_desc, a_bufs, b_bufs, ready, empty, i, pid_m, pid_n, k0, k1, BN, B_T,
                            A_PIECES)
    else:
        for t in range(gl.program_id(0), DP, NUM_SMS):
            pid_m, pid_n = _tile(t, num_pid_m, num_pid_n, GROUP_M)
            i = _load_steps(a_desc, b_desc, a_bufs, b_bufs, ready, empty, i, pid_m, pid_n, 0, n_k, BN, B_T,
                            A_PIECES)


@gluon.jit
def _halves(xs):
    """Each BM×W tile of xs split into its left and right BM×W/2 halves, in order (registers only:
    a column's high bit is a register index in the wgmma layout)."""
    out = ()
    for j in gl.static_range(len(xs)):
        x = xs[j]
        lo, hi = x.reshape([x.shape[0], 2, x.shape[1] // 2]).permute(0, 2, 1).split()
        out = out + (lo, hi)
    return out


@gluon.jit
def _k_step(acc, a_bufs, b_bufs, ready, empty, i, kk, k0, prev, reg_a: gl.constexpr, B_T: gl.constexpr,
            SWAP: gl.constexpr, ROW0: gl.constexpr):
    """The consumer's k-step kk of a unit that starts at k0, its i-th over all its units: wait for
    stage i % STAGES, issue its wgmma (acc's ROWS rows of the MMA from ROW0), and once the previous
    step's wgmma has retired free that step's stage (prev). Returns (acc, this step's stage)."""
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    A_PIECES: gl.constexpr = a_bufs.type.shape[0] // STAGES
    PR: gl.constexpr = a_bufs.type.shape[1]
    ROWS: gl.constexpr = acc.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    if SWAP:
        b = b_bufs.index(s)
        BN: gl.constexpr = b.type.shape[1]
        if ROWS != BN:
            b = b.slice(ROW0, ROWS, dim=1)
        acc = warpgroup_mma(b.permute((1, 0)).load(reg_a), a_bufs.index(s).permute((1, 0)), acc, use_acc=kk > k0,
                            is_async=True)
    else:
        a = a_bufs.index(s * A_PIECES + ROW0 // PR)
        if ROWS != PR:
            a = a.slice(ROW0 % PR, ROWS)
        b = b_bufs.index(s)
        if B_T:
            b = b.permute((1, 0))
        acc = warpgroup_mma(a, b, acc, use_acc=kk > k0, is_async=True)
    # one group in flight: the previous k-step's wgmma has retired, so its stage (and, swapped, its
    # register operand) is free
    acc = warpgroup_mma_wait(1, deps=(acc, ))
    mbarrier.arrive(empty.index(prev), count=1, pred=kk > k0)
    return acc, s


@gluon.jit
def _unit_acc(a_bufs, b_bufs, ready, empty, i, k0, k1, acc_layout: gl.constexpr, reg_a: gl.constexpr,
              B_T: gl.constexpr, SWAP: gl.constexpr, ROWS: gl.constexpr, MMA_N: gl.constexpr, ROW0: gl.constexpr):
    """The accumulator of k-steps k0 … k1-1 of one tile (the first at the consumer's i-th step
    overall), every wgmma retired and every stage freed. Returns (acc, the next i)."""
    acc = gl.zeros((ROWS, MMA_N), gl.float32, acc_layout)
    prev = 0
    if SWAP:
        # Two k-steps a trip, so that their register operands are two sets of registers: the
        # step after next may load into a set only once the wait in the step between has
        # retired the wgmma reading it. In a one-step loop each step's loads overwrite the
        # registers of the wgmma still in flight, which PTX leaves undefined (on the H200 it
        # gave wrong results with one 8-warp partition; docs/perf-notes.md, 26).
        for kk in range(k0, k1 - 1, 2):
            acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i, kk, k0, prev, reg_a, B_T, SWAP, ROW0)
            acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i + 1, kk + 1, k0, prev, reg_a, B_T, SWAP, ROW0)
            i += 2
        if (k1 - k0) % 2 == 1:
            acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i, k1 - 1, k0, prev, reg_a, B_T, SWAP, ROW0)
            i += 1
    else:
        for kk in range(k0, k1):
            acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i, kk, k0, prev, reg_a, B_T, SWAP, ROW0)
            i += 1
    acc = warpgroup_mma_wait(0, deps=(acc, ))
    mbarrier.arrive(empty.index(prev), count=1)
    return acc, i


@gluon.jit
def _epilogue(acc, c_desc, c_smem, i_ptr, sa_ptr, sb_ptr, N, pid_m, pid_n, BM: gl.constexpr, BN: gl.constexpr,
              SWAP: gl.constexpr, HAS_SCALE: gl.constexpr, HAS_BIAS: gl.constexpr, ROW0: gl.constexpr):
    """Scales and bias applied to the tile's accumulator (acc's rows of the MMA from ROW0), then C
    stored through shared memory by TMA in slices of c_desc's block."""
    acc_layout: gl.constexpr = acc.type.layout
    ROWS: gl.constexpr = acc.type.shape[0]
    MMA_N: gl.constexpr = acc.type.shape[1]
    EPI: gl.constexpr = c_desc.block_type.shape[0] if SWAP else c_desc.block_type.shape[1]
    if HAS_SCALE:
        acc = acc * (gl.load(sa_ptr) * gl.load(sb_ptr))
    if HAS_BIAS:  # the tile's columns of the bias row: along the MMA's columns, or swapped its rows
        if SWAP:
            cols = pid_n * BN + ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, acc_layout))
            acc = acc + gl.expand_dims(gl.load(i_ptr + cols, mask=cols < N, other=0.0).to(gl.float32), 1)
        else:
            cols = pid_n * BN + gl.arange(0, MMA_N, layout=gl.SliceLayout(0, acc_layout))
            acc = acc + gl.expand_dims(gl.load(i_ptr + cols, mask=cols < N, other=0.0).to(gl.float32), 0)
    parts = (acc.to(c_desc.dtype), )
    for _ in gl.static_range((MMA_N // EPI).bit_length() - 1):
        parts = _halves(parts)
    for j in gl.static_range(len(parts)):
        tma.store_wait(0)  # the previous slice's store has read c_smem
        if SWAP:  # a slice of C^T's columns is a slice of C's rows
            c_smem.store(parts[j].permute((1, 0)))
            fence_async_shared()
            _tma_store(c_desc, [pid_m * BM + j * EPI, pid_n * BN + ROW0], c_smem)
        else:
            c_smem.store(parts[j])
            fence_async_shared()
            _tma_store(c_desc, [pid_m * BM + ROW0, pid_n * BN + j * EPI], c_smem)


@gluon.jit
def _sk_finish(acc, t, v, DP, SHARED, SEGS, ws_ptr, cnt_ptr, c_desc, c_smem, i_ptr, sa_ptr, sb_ptr, N, pid_m, pid_n,
               BM: gl.constexpr, BN: gl.constexpr, SWAP: gl.constexpr, HAS_SCALE: gl.constexpr,
               HAS_BIAS: gl.constexpr, PART: gl.constexpr, PARTS: gl.constexpr, ROW0: gl.constexpr,
               MMA_M: gl.constexpr):
    """Piece v of shared tile t: its FP32 partial (acc's rows of the MMA from ROW0) stored to the
    piece's slot, then a ticket from the tile's counter (one per consumer partition, after a
    barrier so every thread's stores come first; release/acquire). The partition holding the last
    ticket sums the tile's SEGS partials in piece order (its own read back too, so that the sum
    does not depend on which finished last, and acc is dead by then: two accumulators of
    registers spilled), resets the counter and stores C (`_epilogue`)."""
    acc_layout: gl.constexpr = acc.type.layout
    ROWS: gl.constexpr = acc.type.shape[0]
    MMA_N: gl.constexpr = acc.type.shape[1]
    rows = gl.expand_dims(ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, acc_layout)), 1)
    cols = gl.expand_dims(gl.arange(0, MMA_N, layout=gl.SliceLayout(0, acc_layout)), 0)
    tile_off = rows * MMA_N + cols
    gl.store(ws_ptr + v * (MMA_M * MMA_N) + tile_off, acc)
    _barrier()  # every thread's partial is stored before the ticket is taken
    counter = cnt_ptr + (t - DP) * PARTS + PART
    ticket = gl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
    if ticket == SEGS - 1:
        total = gl.zeros((ROWS, MMA_N), gl.float32, acc_layout)
        for seg in range(SEGS):
            total += gl.load(ws_ptr + (seg * SHARED + t - DP) * (MMA_M * MMA_N) + tile_off, cache_modifier=".cg")
        gl.atomic_xchg(counter, 0)  # ready for the next launch
        _epilogue(total, c_desc, c_smem, i_ptr, sa_ptr, sb_ptr, N, pid_m, pid_n, BM, BN, SWAP, HAS_SCALE, HAS_BIAS,
                  ROW0)


@gluon.jit
def _consumer(a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, i_ptr, sa_ptr, sb_ptr, ws_ptr, cnt_ptr,
              M, N, K, DP, SHARED, SEGS,
              BN: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr, B_T: gl.constexpr,
              SWAP: gl.constexpr, HAS_SCALE: gl.constexpr, HAS_BIAS: gl.constexpr, ROWS: gl.constexpr,
              ROW0: gl.constexpr, WARPS: gl.constexpr, A_PIECES: gl.constexpr, SK: gl.constexpr):
    """Rows ROW0 … ROW0+ROWS-1 of every tile of the MMA (C's rows, or with SWAP C's columns: the
    MMA computes C^T = B^T·A^T), on WARPS warps (ROWS = 16·WARPS). HAS_BIAS: C's row of N at
    i_ptr added to every row (a linear layer's bias). The first DP tiles in the grouped order
    run whole; with SK the SHARED tiles after them run in SEGS pieces of their k-steps each
    (`_unit`), a tile's partials summed by the last piece to finish (`_sk_finish`)."""
    BM: gl.constexpr = a_desc.block_type.shape[0] * A_PIECES
    BK: gl.constexpr = a_desc.block_type.shape[1]
    MMA_N: gl.constexpr = BM if SWAP else BN
    MMA_M: gl.constexpr = BN if SWAP else BM
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, MMA_N, 256 // a_desc.dtype.primitive_bitwidth])
    # with SWAP, B's tile (N-major in shared memory, which 32-bit wgmma cannot read) is the MMA's
    # A operand, loaded into registers, where wgmma has no layout rule
    reg_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout,
                                              k_width=32 // a_desc.dtype.primitive_bitwidth)
    c_smem = c_bufs.index(ROW0 // ROWS)
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    n_k = gl.cdiv(K, BK)
    i = 0
    if SK:  # whole tiles and pieces in one loop (one copy of the main loop: two spilled at 168 registers)
        for u in range(_units(DP, SHARED, SEGS, NUM_SMS)):
            t, v, k0, k1 = _unit(u, DP, SHARED, SEGS, n_k, NUM_SMS)
            pid_m, pid_n = _tile(t, num_pid_m, num_pid_n, GROUP_M)
            acc, i = _unit_acc(a_bufs, b_bufs, ready, empty, i, k0, k1, acc_layout, reg_a, B_T, SWAP, ROWS, MMA_N,
                               ROW0)
            if v >= 0:
                _sk_finish(acc, t, v, DP, SHARED, SEGS, ws_ptr, cnt_ptr, c_desc, c_smem, i_ptr, sa_ptr, sb_ptr, N,
                           pid_m, pid_n, BM, BN, SWAP, HAS_SCALE, HAS_BIAS, ROW0 // ROWS, MMA_M // ROWS, ROW0, MMA_M)
            else:
                _epilogue(acc, c_desc, c_smem, i_ptr, sa_ptr, sb_ptr, N, pid_m, pid_n, BM, BN, SWAP, HAS_SCALE,
                          HAS_BIAS, ROW0)
    else:
        for t in range(gl.program_id(0), DP, NUM_SMS):
            pid_m, pid_n = _tile(t, num_pid_m, num_pid_n, GROUP_M)
            acc, i = _unit_acc(a_bufs, b_bufs, ready, empty, i, 0, n_k, acc_layout, reg_a, B_T, SWAP, ROWS, MMA_N,
                               ROW0)
            _epilogue(acc, c_desc, c_smem, i_ptr, sa_ptr, sb_ptr, N, pid_m, pid_n, BM, BN, SWAP, HAS_SCALE, HAS_BIAS,
                      ROW0)
    tma.store_wait(0)


@gluon.jit
def ws_kernel(a_desc, b_desc, c_desc, i_ptr, sa_ptr, sb_ptr, ws_ptr, cnt_ptr, M, N, K, DP, SHARED, SEGS,
              GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr, STAGES: gl.constexpr, B_T: gl.constexpr,
              SWAP: gl.constexpr, HAS_SCALE: gl.constexpr, HAS_BIAS: gl.constexpr, CONSUMERS: gl.constexpr,
              A_PIECES: gl.constexpr, SK: gl.constexpr, num_warps: gl.constexpr):
    """CONSUMERS = 1: one consumer partition of num_warps warps over the whole tile; 2 or 3:
    as many partitions of num_warps warps, each over its share of the MMA's rows, each freeing
    stages on its own. A's tile arrives in A_PIECES boxes of a_desc's rows (3 for the 192-row
    tile, which one power-of-two box cannot describe). SWAP: the MMA computes C^T = B^T·A^T
    (B row-major, 32-bit: TF32). Tiles 0 … DP-1 (grouped order) run whole, round-robin; with SK
    the SHARED tiles after them run in SEGS pieces each (FP32 partials at ws_ptr, a slot a piece;
    tickets at cnt_ptr)."""
    BM: gl.constexpr = a_desc.block_type.shape[0] * A_PIECES
    BN: gl.constexpr = b_desc.block_type.shape[0] if B_T else b_desc.block_type.shape[1]
    ROWS: gl.constexpr = (BN if SWAP else BM) // CONSUMERS
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * A_PIECES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [CONSUMERS] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=CONSUMERS)
    if CONSUMERS == 1:
        gl.warp_specialize([
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, i_ptr, sa_ptr, sb_ptr, ws_ptr,
                         cnt_ptr, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS, 0,
                         num_warps, A_PIECES, SK)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T,
                         A_PIECES, SK)),
        ], [1], [24])
    elif CONSUMERS == 2:
        gl.warp_specialize([
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, i_ptr, sa_ptr, sb_ptr, ws_ptr,
                         cnt_ptr, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS, 0,
                         num_warps, A_PIECES, SK)),
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, i_ptr, sa_ptr, sb_ptr, ws_ptr,
                         cnt_ptr, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS, ROWS,
                         num_warps, A_PIECES, SK)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T,
                         A_PIECES, SK)),
        ], [num_warps, 1], [240, 24])
    else:
        gl.warp_specialize([
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, i_ptr, sa_ptr, sb_ptr, ws_ptr,
                         cnt_ptr, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS, 0,
                         num_warps, A_PIECES, SK)),
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, i_ptr, sa_ptr, sb_ptr, ws_ptr,
                         cnt_ptr, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS, ROWS,
                         num_warps, A_PIECES, SK)),
            (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, i_ptr, sa_ptr, sb_ptr, ws_ptr,
                         cnt_ptr, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS, 2 * ROWS,
                         num_warps, A_PIECES, SK)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, M, N, K, DP, SHARED, SEGS, BN, GROUP_M, NUM_SMS, B_T,
                         A_PIECES, SK)),
        ], [num_warps, num_warps, 1], [160, 160, 24])


# ---- host side --------------------------------------------------------------------------------

_GL = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32,
       torch.float8_e4m3fn: gl.float8e4nv, torch.float8_e5m2: gl.float8e5}
_OUT = (torch.float16, torch.bfloat16, torch.float32)


def maxnreg(cfg: dict) -> int:
    """Registers a thread at launch: the SM's 64 Ki over the consumer warps and the producer's
    warpgroup, 12 warps × 168 (or, with three consumer warpgroups, 16 × 128). setmaxnreg then
    moves them: producer 24, consumers 240 (three partitions: 168, 160 and 160)."""
    return 128 if cfg["CONSUMERS"] == 3 else 168


def a_pieces(cfg: dict) -> int:
    """TMA boxes in A's tile: one, or one per consumer where BM is not a power of two (192: a
    Triton descriptor's block, and a Gluon buffer, is a power of two on a side)."""
    bm = cfg["BM"]
    return 1 if bm & (bm - 1) == 0 else cfg["CONSUMERS"]


def _row_major(x: torch.Tensor) -> bool:
    return x.dim() == 2 and x.stride(1) == 1 and t03._tma_ok(x, -1)


def _col_major(x: torch.Tensor) -> bool:
    return x.dim() == 2 and x.stride(0) == 1 and t03._tma_ok(x, -2)


def usable(p: P.Problem) -> str:
    """'' when this rung can run p, else why not."""
    a, b, c = t03._squeeze(p.a), t03._squeeze(p.b), t03._squeeze(p.c)
    if a.device.type != "cuda" or P.capability(a.device)[0] != 9:
        return "wgmma and setmaxnreg are sm_90 only"
    if a.dtype not in _GL or b.dtype != a.dtype or c.dtype not in _OUT:
        return "FP16, BF16, TF32 or FP8 inputs (both the same), FP16/BF16/FP32 output only"
    if a.dtype == torch.float32 and p.dot_precision != "tf32":
        return "FP32 inputs only as TF32 (exact FP32 is the SIMT ladder's, or t03's)"
    if p.batch != 1 or a.dim() != 2 or b.dim() != 2 or c.dim() != 2:
        return "2-D operands only"
    if p.alpha != 1.0 or (p.has_beta and not p.bias_row):
        return "no alpha in this rung's epilogue, and beta only as a bias row (one row of C_in broadcast, beta 1)"
    if (p.scale_a is None) != (p.scale_b is None):
        return "both per-tensor scales or neither"
    if p.k == 0:
        return "K = 0"
    if not _row_major(a) or not _row_major(c):
        return "A and C row-major, 16-byte aligned (TMA)"
    if not (_row_major(b) or _col_major(b)):
        return "B row- or column-major, 16-byte aligned (TMA)"
    if a.element_size() == 1 and not _col_major(b):
        return "FP8 wgmma reads B only K-major: B column-major"
    return ""


def sk_schedule(tiles: int, sms: int) -> tuple[int, int]:
    """The split of `tiles` tiles over `sms` programs when the last wave is partial (cfg's SK):
    (DP, SHARED), the first DP tiles run whole, round-robin, and the SHARED tiles after them (the
    partial wave and the whole wave before it; every tile, under two waves) are cut into SK pieces
    of their k-steps, dealt round-robin. Whole waves share nothing: (tiles, 0)."""
    waves, rest = divmod(tiles, sms)
    if rest == 0:
        return tiles, 0
    dp = max(waves - 1, 0) * sms
    return dp, tiles - dp


def _args(p: P.Problem, cfg: dict, num_sms: int | None = None, a=None, b=None, ws=None, cnt=None):
    """(grid, positional arguments of ws_kernel) for p; a, b: the operands to describe, where
    they are copies of p's (PAD); ws, cnt: stream-K's partials and tile counters (cfg's SK)."""
    a = t03._squeeze(p.a) if a is None else a
    b = t03._squeeze(p.b) if b is None else b
    c = t03._squeeze(p.c)
    bm, bn, bk, consumers, split = cfg["BM"], cfg["BN"], cfg["BK"], cfg["CONSUMERS"], cfg["SPLIT"]
    b_t, swap = _col_major(b), bool(cfg.get("SWAP"))
    pieces = a_pieces(cfg)
    if bm & (bm - 1) and (swap or bm != 64 * consumers):
        raise ValueError(f"t05: configuration {cfg}: a tile of {bm} rows (not a power of two) runs as 64 rows "
                         "a consumer partition, unswapped")
    if swap != P.swapped_tf32(p):
        raise ValueError(f"t05: configuration {cfg} does not fit {a.dtype} with B "
                         f"{'column' if b_t else 'row'}-major (the swapped form is for TF32 with a row-major B)")

    def desc(x, block, trans=False):
        """A descriptor over x itself (a plan binds it to x's slot), of x.T's logical shape if trans."""
        layout = gl.NVMMASharedLayout.get_default_for(block, _GL[x.dtype])
        shape, strides = (list(x.shape)[::-1], list(x.stride())[::-1]) if trans else (list(x.shape), list(x.stride()))
        return TensorDescriptor(x, shape, strides, block, layout)

    tiles = ceil_div(p.m, bm) * ceil_div(p.n, bn)
    segs = int(cfg.get("SK", 0))
    sms = num_sms or P.num_sms(p.a.device)
    dp, shared = sk_schedule(tiles, sms) if segs else (tiles, 0)
    sms = min(sms, dp + shared * segs)
    i, sa, sb = P.epilogue_args(p)  # C itself where there is no bias or there are no scales (never read then)
    c_block = [bm // split, bn // consumers] if swap else [bm // consumers, bn // split]
    args = [desc(a, [bm // pieces, bk]), desc(b, [bn, bk], trans=True) if b_t else desc(b, [bk, bn]),
            desc(c, c_block), i, sa, sb, c if ws is None else ws, c if cnt is None else cnt, p.m, p.n, p.k,
            dp, shared, segs, cfg["GROUP_M"], sms, cfg["STAGES"], b_t, swap, p.scale_a is not None, p.has_beta,
            consumers, pieces, segs > 0]
    return (sms, ), args


def _warps(cfg: dict) -> int:
    """Warps of the default (consumer) partition: 16 rows of the MMA's tile per warp."""
    return (cfg["BN"] if cfg.get("SWAP") else cfg["BM"]) // 16 // cfg["CONSUMERS"]


def launches(p: P.Problem, cfg: dict) -> list[P.KernelCall]:
    """One launch of min(#SMs, units) programs (p must pass `usable`), after t03's copies of the
    operands cfg's PAD names (`t03.operands`: rows 128 bytes apart; their buffers are scratch).
    With SK the partials' buffer (a BM×BN FP32 slot a piece) is scratch too, and the tile
    counters are the stream's (t04.counters, zero between launches)."""
    a, b, copies = t03.operands(p, cfg)
    scratch = tuple(call.scratch[0] for call in copies)
    ws = cnt = None
    if cfg.get("SK"):
        tiles = ceil_div(p.m, cfg["BM"]) * ceil_div(p.n, cfg["BN"])
        shared = sk_schedule(tiles, P.num_sms(p.a.device))[1]
        ws = torch.empty(max(shared * int(cfg["SK"]), 1) * cfg["BM"] * cfg["BN"], dtype=torch.float32,
                         device=p.c.device)
        stream = torch.cuda.current_stream(p.c.device).cuda_stream
        cnt = t04.counters(p.c.device, stream, shared * cfg["CONSUMERS"])
        scratch += (ws, )
    grid, args = _args(p, cfg, a=a, b=b, ws=ws, cnt=cnt)
    return copies + [P.KernelCall(ws_kernel, grid, args, dict(num_warps=_warps(cfg), maxnreg=maxnreg(cfg)),
                                  scratch=scratch, stream_bound=cnt is not None)]


def traffic(m, n, k, s, bm=128, bn=256):
    return t03.traffic(m, n, k, s, bm, bn)


def compile_for_sm90(cfg: dict, dtype=torch.bfloat16, out_dtype=None, b_t: bool = False, bias: bool = False):
    """Compile ws_kernel for sm_90 without a GPU (Triton's bundled ptxas): the CompiledKernel, whose
    .asm["ptx"] shows the partitions (setmaxnreg), the wgmma shape and the barriers. FP8 inputs get
    per-tensor scales; FP32 inputs are TF32; bias: with a bias row in the epilogue."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    a = torch.empty(bm, bk, dtype=dtype)
    b = torch.empty(bn, bk, dtype=dtype).t() if b_t else torch.empty(bk, bn, dtype=dtype)
    c = torch.empty(bm, bn, dtype=out_dtype or (torch.bfloat16 if dtype in P.FP8_DTYPES else dtype))
    scale = torch.ones(1) if dtype in P.FP8_DTYPES else None
    row = torch.empty(bn, dtype=c.dtype).expand(bm, bn) if bias else None
    p = P.Problem(a, b, c, "tf32" if dtype == torch.float32 else P.precision_of(dtype), beta=1.0 if bias else 0.0,
                  c_in=row, scale_a=scale, scale_b=scale)
    sk = dict(ws=torch.empty(1), cnt=torch.empty(1, dtype=torch.int32)) if cfg.get("SK") else {}
    _, args = _args(p, cfg, num_sms=132, **sk)
    names = ws_kernel.arg_names
    first_const = names.index("GROUP_M")
    consts = dict(zip(names[first_const:], args[first_const:]), num_warps=_warps(cfg))
    sig = {n: "constexpr" if n in consts else (mangle_type(v) if i < 8 else "i32")
           for i, (n, v) in enumerate(zip(names, args + [None]))}
    src = GluonASTSource(fn=ws_kernel, signature=sig, constexprs=consts)
    return triton_compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=_warps(cfg), maxnreg=maxnreg(cfg)))
