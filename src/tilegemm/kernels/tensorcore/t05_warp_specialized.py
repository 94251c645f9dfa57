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
  With WIDE, the MMA's N side is 192 (or 96) long, again no power of two: B's columns, or in the
  swapped form A's rows (a 192×128 TF32 tile). The producer copies it as two boxes, 128 + 64
  (64 + 32), into two rings, and each consumer issues two wgmmas a k-step on the same A operand
  (m64n128 and m64n64; swapped, the same registers) into two accumulators, stored in slices as
  long as the narrower box. 192×192 reads (192 + 192)/(192·192) elements a MAC, 0.80× 192×128's,
  and makes 256 tiles at 3000² (1.94 waves); 192×96 makes 128 at 1536² (one wave, 0.97 full).

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
FP8 without fast accumulation adds the MMA's partial sum into FP32 every k-step (BK = 128 of K,
`_problem.Problem.promote`). Through wgmma's own max_num_imprecise_acc the adds read registers of
a wgmma in flight, and ptxas serialises every wgmma of the kernel; with OVERLAP (a tile of at most
64×128 a warpgroup, on one or two partitions) each k-step sums its BK afresh into one of two
partial tiles while the previous step's partial, retired by the wait that frees its stage, is added
(k-steps two a trip, so each partial keeps its registers). It costs BM·BN FP32 adds a k-step and
two more register tiles (3 × 64 registers a thread: within the 240 of one or two partitions, not
the 160-168 of three), and no global traffic.
Alpha and beta are not in this rung (t03 serves those calls), but for a bias row: C_in one row of N
broadcast over C's rows with beta 1 (a linear layer's bias, `_problem.Problem.bias_row`), which the
epilogue loads (BN elements a tile) and adds to the accumulator before C is stored.

Global traffic is t03's (the same tiles, in the same order):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N   (elements)
so arithmetic intensity against DRAM is unchanged, ≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte before L2
reuse. What changes is issue: per k-step the consumer warps issue only wgmma and barrier waits
(and, swapped, the register operand's shared loads),
and the ring holds STAGES·(BM + BN)·BK·s bytes (4 stages of 128×256×64 in 16 bits: 192 KiB, against
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

NAME = "tc_warp_specialized"
# Gluon is experimental and renames things: Triton 3.9 calls the TMA copies async_load/async_store
# (3.6, the H200's, has only the older names)
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def _tile(t, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Grouped order (t03's): GROUP_M rows of tiles share each column of B while it is in L2."""
    in_group = GROUP_M * num_pid_n
    first_m = (t // in_group) * GROUP_M
    rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + (t % in_group) % rows, (t % in_group) // rows


@gluon.jit
def _producer(a_desc, b_desc, n2_desc, a_bufs, b_bufs, n2_bufs, ready, empty, M, N, K,
              BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr, B_T: gl.constexpr,
              SWAP: gl.constexpr, A_PIECES: gl.constexpr, WIDE: gl.constexpr):
    PR: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    BN0: gl.constexpr = b_bufs.type.shape[1] if B_T else b_bufs.type.shape[2]
    nbytes: gl.constexpr = (A_PIECES * a_desc.block_type.nbytes + b_desc.block_type.nbytes
                            + (n2_desc.block_type.nbytes if WIDE else 0))
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    i = 0  # k-steps issued by this program, over all its tiles: stage i % STAGES, lap i // STAGES
    for t in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile(t, num_pid_m, num_pid_n, GROUP_M)
        for kk in range(gl.cdiv(K, BK)):
            s = i % STAGES
            # a fresh barrier counts as having completed the lap before the first, so lap 0 passes
            mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            for j in gl.static_range(A_PIECES):
                _tma_load(a_desc, [pid_m * BM + j * PR, kk * BK], ready.index(s), a_bufs.index(s * A_PIECES + j))
            if B_T:
                _tma_load(b_desc, [pid_n * BN, kk * BK], ready.index(s), b_bufs.index(s))
                if WIDE:  # (swapped B is row-major)
                    _tma_load(n2_desc, [pid_n * BN + BN0, kk * BK], ready.index(s), n2_bufs.index(s))
            else:
                _tma_load(b_desc, [kk * BK, pid_n * BN], ready.index(s), b_bufs.index(s))
                if WIDE:  # the MMA's N side's second box: A's last rows swapped, else B's last columns
                    if SWAP:
                        _tma_load(n2_desc, [pid_m * BM + PR, kk * BK], ready.index(s), n2_bufs.index(s))
                    else:
                        _tma_load(n2_desc, [kk * BK, pid_n * BN + BN0], ready.index(s), n2_bufs.index(s))
            i += 1


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
def _a_rows(a_bufs, s, STAGES: gl.constexpr, ROW0: gl.constexpr, ROWS: gl.constexpr):
    """Stage s's rows ROW0 … ROW0+ROWS-1 of A's tile, in the box (of A_PIECES a stage) that holds them."""
    A_PIECES: gl.constexpr = a_bufs.type.shape[0] // STAGES
    PR: gl.constexpr = a_bufs.type.shape[1]
    a = a_bufs.index(s * A_PIECES + ROW0 // PR)
    if ROWS != PR:
        a = a.slice(ROW0 % PR, ROWS)
    return a


@gluon.jit
def _swapped_a(b_bufs, s, ROW0: gl.constexpr, ROWS: gl.constexpr, reg_a: gl.constexpr):
    """Swapped, the MMA's A operand: stage s's B tile (N-major, which 32-bit wgmma cannot read from
    shared memory), its columns ROW0 … ROW0+ROWS-1, transposed into registers."""
    b = b_bufs.index(s)
    BN: gl.constexpr = b.type.shape[1]
    if ROWS != BN:
        b = b.slice(ROW0, ROWS, dim=1)
    return b.permute((1, 0)).load(reg_a)


@gluon.jit
def _mma(a, b, acc, use_acc, PROMOTE: gl.constexpr):
    """An asynchronous wgmma of acc + a @ b (acc's old value ignored where not use_acc); PROMOTE > 0
    (FP8): the MMA's partial sum joins acc in FP32 every PROMOTE of K (`_problem.Problem.promote`),
    added to acc whatever use_acc says (the partial sum starts at 0), so acc must hold zeros at a
    tile's first k-step, as `_consumer`'s gl.zeros makes it. ptxas then waits for each wgmma before
    the add (a full WARPGROUP.DEPBAR where the fast form keeps one k-step in flight: perf-notes 145)."""
    if PROMOTE > 0:
        acc = warpgroup_mma(a, b, acc, use_acc=use_acc, is_async=True, max_num_imprecise_acc=PROMOTE)
    else:
        acc = warpgroup_mma(a, b, acc, use_acc=use_acc, is_async=True)
    return acc


@gluon.jit
def _k_step(acc, a_bufs, b_bufs, ready, empty, i, kk, prev, reg_a: gl.constexpr, B_T: gl.constexpr,
            SWAP: gl.constexpr, ROW0: gl.constexpr, PROMOTE: gl.constexpr):
    """The consumer's k-step kk, its i-th over all its tiles: wait for stage i % STAGES, issue its
    wgmma (acc's ROWS rows of the MMA from ROW0), and once the previous step's wgmma has retired
    free that step's stage (prev). Returns (acc, this step's stage)."""
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    ROWS: gl.constexpr = acc.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    if SWAP:
        acc = _mma(_swapped_a(b_bufs, s, ROW0, ROWS, reg_a), a_bufs.index(s).permute((1, 0)), acc, kk > 0, PROMOTE)
    else:
        b = b_bufs.index(s)
        if B_T:
            b = b.permute((1, 0))
        acc = _mma(_a_rows(a_bufs, s, STAGES, ROW0, ROWS), b, acc, kk > 0, PROMOTE)
    # one group in flight: the previous k-step's wgmma has retired, so its stage (and, swapped, its
    # register operand) is free
    acc = warpgroup_mma_wait(1, deps=(acc, ))
    mbarrier.arrive(empty.index(prev), count=1, pred=kk > 0)
    return acc, s


@gluon.jit
def _k_step_promoted(acc, part, done, a_bufs, b_bufs, ready, empty, i, kk, prev, B_T: gl.constexpr,
                     ROW0: gl.constexpr):
    """_k_step for promoted FP8 with its promotion overlapped (OVERLAP; the k-step is the span
    promoted): this step's wgmma sums its BK of K afresh into `done`'s registers (whose sum was
    added into acc a step ago), and once the previous step's wgmma (`part`) has retired, its sum
    is added into acc in FP32 while this one runs. Three register tiles a thread (acc and two
    partial sums) where the implicit form's wait takes the MMA out of flight. Returns (acc, this
    step's partial sum, in flight, the previous one's, added, this step's stage)."""
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    ROWS: gl.constexpr = acc.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    b = b_bufs.index(s)
    if B_T:
        b = b.permute((1, 0))
    nxt = warpgroup_mma(_a_rows(a_bufs, s, STAGES, ROW0, ROWS), b, done, use_acc=False, is_async=True)
    nxt, part = warpgroup_mma_wait(1, deps=(nxt, part))  # (nxt still in flight: its registers not read here)
    acc = acc + part
    mbarrier.arrive(empty.index(prev), count=1, pred=kk > 0)
    return acc, nxt, part, s


@gluon.jit
def _k_step_wide(acc, acc2, a_bufs, b_bufs, n2_bufs, ready, empty, i, kk, prev, reg_a: gl.constexpr,
                 B_T: gl.constexpr, SWAP: gl.constexpr, ROW0: gl.constexpr, PROMOTE: gl.constexpr):
    """_k_step for a tile whose MMA N side arrives in two boxes (WIDE: B's columns, or swapped A's
    rows): two wgmmas on one stage, one a box, on the same A operand (swapped: the same registers);
    both of this step stay in flight, the previous step's two have retired when its stage is
    freed. Returns (acc, acc2, this step's stage)."""
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    ROWS: gl.constexpr = acc.type.shape[0]
    s = i % STAGES
    mbarrier.wait(ready.index(s), (i // STAGES) & 1)
    if SWAP:
        x = _swapped_a(b_bufs, s, ROW0, ROWS, reg_a)
        acc = _mma(x, a_bufs.index(s).permute((1, 0)), acc, kk > 0, PROMOTE)
        acc2 = _mma(x, n2_bufs.index(s).permute((1, 0)), acc2, kk > 0, PROMOTE)
    else:
        a = _a_rows(a_bufs, s, STAGES, ROW0, ROWS)
        b = b_bufs.index(s)
        b2 = n2_bufs.index(s)
        if B_T:
            b = b.permute((1, 0))
            b2 = b2.permute((1, 0))
        acc = _mma(a, b, acc, kk > 0, PROMOTE)
        acc2 = _mma(a, b2, acc2, kk > 0, PROMOTE)
    acc, acc2 = warpgroup_mma_wait(2, deps=(acc, acc2))
    mbarrier.arrive(empty.index(prev), count=1, pred=kk > 0)
    return acc, acc2, s


@gluon.jit
def _epilogue(acc, c_desc, c_smem, row, col, SWAP: gl.constexpr):
    """acc (already C's dtype) stored at C's (row, col) in slices of c_desc's box through c_smem
    (swapped: acc is a tile of C^T, stored transposed)."""
    EPI: gl.constexpr = c_desc.block_type.shape[0] if SWAP else c_desc.block_type.shape[1]
    parts = (acc, )
    for _ in gl.static_range((acc.type.shape[1] // EPI).bit_length() - 1):
        parts = _halves(parts)
    for j in gl.static_range(len(parts)):
        tma.store_wait(0)  # the previous slice's store has read c_smem
        if SWAP:  # a slice of C^T's columns is a slice of C's rows
            c_smem.store(parts[j].permute((1, 0)))
            fence_async_shared()
            _tma_store(c_desc, [row + j * EPI, col], c_smem)
        else:
            c_smem.store(parts[j])
            fence_async_shared()
            _tma_store(c_desc, [row, col + j * EPI], c_smem)


@gluon.jit
def _scale_factors(sa, sb):
    """_jit.scale_factors in Gluon (a Gluon kernel calls Gluon functions): sa·sb and 1 where that
    product is a normal FP32 number, else sa and sb, applied one after the other."""
    s = sa * sb
    normal = (gl.abs(s) >= 1.1754943508222875e-38) & (gl.abs(s) <= 3.4028234663852886e38)
    return gl.where(normal, s, sa), gl.where(normal, 1.0, sb)


@gluon.jit
def _consumer(a_desc, b_desc, n2_desc, c_desc, a_bufs, b_bufs, n2_bufs, ready, empty, c_bufs, i_ptr, sa_ptr,
              sb_ptr, M, N, K, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr, NUM_SMS: gl.constexpr,
              B_T: gl.constexpr, SWAP: gl.constexpr, HAS_SCALE: gl.constexpr, HAS_BIAS: gl.constexpr,
              ROWS: gl.constexpr, ROW0: gl.constexpr, WARPS: gl.constexpr, A_PIECES: gl.constexpr, WIDE: gl.constexpr,
              PROMOTE: gl.constexpr):
    """Rows ROW0 … ROW0+ROWS-1 of every tile of the MMA (C's rows, or with SWAP C's columns: the
    MMA computes C^T = B^T·A^T), on WARPS warps (ROWS = 16·WARPS). HAS_BIAS: C's row of N at
    i_ptr added to every row (a linear layer's bias). WIDE: the MMA's N side (B's columns, or
    swapped A's rows) in two boxes, N0 and N1 = N0/2 long, each with its own wgmma and
    accumulator (acc, acc2)."""
    PR: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    N0: gl.constexpr = PR if SWAP else (b_bufs.type.shape[1] if B_T else b_bufs.type.shape[2])
    N1: gl.constexpr = (n2_desc.block_type.shape[0] if SWAP else
                        (n2_desc.block_type.shape[0] if B_T else n2_desc.block_type.shape[1])) if WIDE else N0
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, N0, 256 // a_desc.dtype.primitive_bitwidth])
    acc2_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, N1, 256 // a_desc.dtype.primitive_bitwidth])
    # with SWAP, B's tile (N-major in shared memory, which 32-bit wgmma cannot read) is the MMA's
    # A operand, loaded into registers, where wgmma has no layout rule
    reg_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout,
                                              k_width=32 // a_desc.dtype.primitive_bitwidth)
    c_smem = c_bufs.index(ROW0 // ROWS)
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    i = 0
    for t in range(gl.program_id(0), num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = _tile(t, num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros((ROWS, N0), gl.float32, acc_layout)
        if WIDE:
            acc2 = gl.zeros((ROWS, N1), gl.float32, acc2_layout)
        prev = 0
        n_k = gl.cdiv(K, BK)
        if SWAP:
            # Two k-steps a trip, so that their register operands are two sets of registers: the
            # step after next may load into a set only once the wait in the step between has
            # retired the wgmma reading it. In a one-step loop each step's loads overwrite the
            # registers of the wgmma still in flight, which PTX leaves undefined (on the H200 it
            # gave wrong results with one 8-warp partition; docs/perf-notes.md, 26).
            if WIDE:
                for kk in range(0, n_k - 1, 2):
                    acc, acc2, prev = _k_step_wide(acc, acc2, a_bufs, b_bufs, n2_bufs, ready, empty, i, kk, prev,
                                                   reg_a, B_T, SWAP, ROW0, PROMOTE)
                    acc, acc2, prev = _k_step_wide(acc, acc2, a_bufs, b_bufs, n2_bufs, ready, empty, i + 1, kk + 1,
                                                   prev, reg_a, B_T, SWAP, ROW0, PROMOTE)
                    i += 2
                if n_k % 2 == 1:
                    acc, acc2, prev = _k_step_wide(acc, acc2, a_bufs, b_bufs, n2_bufs, ready, empty, i, n_k - 1,
                                                   prev, reg_a, B_T, SWAP, ROW0, PROMOTE)
                    i += 1
            else:
                for kk in range(0, n_k - 1, 2):
                    acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i, kk, prev, reg_a, B_T, SWAP, ROW0, PROMOTE)
                    acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i + 1, kk + 1, prev, reg_a, B_T, SWAP,
                                        ROW0, PROMOTE)
                    i += 2
                if n_k % 2 == 1:
                    acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i, n_k - 1, prev, reg_a, B_T, SWAP,
                                        ROW0, PROMOTE)
                    i += 1
        elif WIDE:
            for kk in range(n_k):
                acc, acc2, prev = _k_step_wide(acc, acc2, a_bufs, b_bufs, n2_bufs, ready, empty, i, kk, prev, reg_a,
                                               B_T, SWAP, ROW0, PROMOTE)
                i += 1
        elif PROMOTE < 0:  # promoted every k-step, overlapped (OVERLAP: _k_step_promoted). Two k-steps a
            # trip, so that each partial sum keeps its registers: in a one-step loop the two swap roles,
            # and the copy of the one in flight made ptxas wait for it (C7517)
            x = gl.zeros((ROWS, N0), gl.float32, acc_layout)  # (a retired sum of nothing, for the first add)
            y = gl.zeros((ROWS, N0), gl.float32, acc_layout)
            for kk in range(0, n_k - 1, 2):
                acc, y, x, prev = _k_step_promoted(acc, x, y, a_bufs, b_bufs, ready, empty, i, kk, prev, B_T, ROW0)
                acc, x, y, prev = _k_step_promoted(acc, y, x, a_bufs, b_bufs, ready, empty, i + 1, kk + 1, prev, B_T,
                                                   ROW0)
                i += 2
            if n_k % 2 == 1:  # (each branch adds its own last sum: a merge of the two would copy one in
                # flight, and ptxas then serialises every wgmma of the kernel, C7514)
                acc, y, x, prev = _k_step_promoted(acc, x, y, a_bufs, b_bufs, ready, empty, i, n_k - 1, prev, B_T,
                                                   ROW0)
                i += 1
                y = warpgroup_mma_wait(0, deps=(y, ))
                acc = acc + y
            else:
                x = warpgroup_mma_wait(0, deps=(x, ))
                acc = acc + x
        else:
            for kk in range(n_k):
                acc, prev = _k_step(acc, a_bufs, b_bufs, ready, empty, i, kk, prev, reg_a, B_T, SWAP, ROW0, PROMOTE)
                i += 1
        if WIDE:
            acc, acc2 = warpgroup_mma_wait(0, deps=(acc, acc2))
        else:
            acc = warpgroup_mma_wait(0, deps=(acc, ))
        mbarrier.arrive(empty.index(prev), count=1)
        if HAS_SCALE:
            first, second = _scale_factors(gl.load(sa_ptr), gl.load(sb_ptr))
            acc = acc * first * second
            if WIDE:
                acc2 = acc2 * first * second
        if HAS_BIAS:  # the tile's columns of the bias row: along the MMA's columns, or swapped its rows
            if SWAP:
                cols = pid_n * BN + ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, acc_layout))
                acc = acc + gl.expand_dims(gl.load(i_ptr + cols, mask=cols < N, other=0.0).to(gl.float32), 1)
                if WIDE:
                    cols2 = pid_n * BN + ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, acc2_layout))
                    acc2 = acc2 + gl.expand_dims(gl.load(i_ptr + cols2, mask=cols2 < N, other=0.0).to(gl.float32), 1)
            else:
                cols = pid_n * BN + gl.arange(0, N0, layout=gl.SliceLayout(0, acc_layout))
                acc = acc + gl.expand_dims(gl.load(i_ptr + cols, mask=cols < N, other=0.0).to(gl.float32), 0)
                if WIDE:
                    cols2 = pid_n * BN + N0 + gl.arange(0, N1, layout=gl.SliceLayout(0, acc2_layout))
                    acc2 = acc2 + gl.expand_dims(gl.load(i_ptr + cols2, mask=cols2 < N, other=0.0).to(gl.float32), 0)
        if SWAP:
            _epilogue(acc.to(c_desc.dtype), c_desc, c_smem, pid_m * BM, pid_n * BN + ROW0, SWAP)
            if WIDE:
                _epilogue(acc2.to(c_desc.dtype), c_desc, c_smem, pid_m * BM + N0, pid_n * BN + ROW0, SWAP)
        else:
            _epilogue(acc.to(c_desc.dtype), c_desc, c_smem, pid_m * BM + ROW0, pid_n * BN, SWAP)
            if WIDE:
                _epilogue(acc2.to(c_desc.dtype), c_desc, c_smem, pid_m * BM + ROW0, pid_n * BN + N0, SWAP)
    tma.store_wait(0)


@gluon.jit
def ws_kernel(a_desc, b_desc, n2_desc, c_desc, i_ptr, sa_ptr, sb_ptr, M, N, K, GROUP_M: gl.constexpr,
              NUM_SMS: gl.constexpr, STAGES: gl.constexpr, B_T: gl.constexpr, SWAP: gl.constexpr,
              HAS_SCALE: gl.constexpr, HAS_BIAS: gl.constexpr, CONSUMERS: gl.constexpr, A_PIECES: gl.constexpr,
              WIDE: gl.constexpr, PROMOTE: gl.constexpr, num_warps: gl.constexpr):
    """CONSUMERS = 1: one consumer partition of num_warps warps over the whole tile; 2 or 3:
    as many partitions of num_warps warps, each over its share of the MMA's rows, each freeing
    stages on its own. A's tile arrives in A_PIECES boxes of a_desc's rows (3 for the 192-row
    tile, which one power-of-two box cannot describe). With WIDE the MMA's N side arrives in two
    boxes, the second (n2_desc, None otherwise) half as long as the first: B's columns after
    b_desc's (192 = 128 + 64, 96 = 64 + 32), or swapped A's rows after a_desc's. SWAP: the MMA
    computes C^T = B^T·A^T (B row-major, 32-bit: TF32)."""
    PR: gl.constexpr = a_desc.block_type.shape[0]
    BM: gl.constexpr = ((PR + n2_desc.block_type.shape[0]) if SWAP else PR * A_PIECES) if WIDE else PR * A_PIECES
    BN0: gl.constexpr = b_desc.block_type.shape[0] if B_T else b_desc.block_type.shape[1]
    BN: gl.constexpr = (BN0 if SWAP else BN0 + (n2_desc.block_type.shape[0] if B_T else n2_desc.block_type.shape[1])) \
        if WIDE else BN0
    ROWS: gl.constexpr = (BN if SWAP else BM) // CONSUMERS
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES * A_PIECES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    if WIDE:
        n2_bufs = gl.allocate_shared_memory(n2_desc.dtype, [STAGES] + n2_desc.block_type.shape, n2_desc.layout)
    else:
        n2_bufs = b_bufs
    c_bufs = gl.allocate_shared_memory(c_desc.dtype, [CONSUMERS] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=CONSUMERS)
    if CONSUMERS == 1:
        gl.warp_specialize([
            (_consumer, (a_desc, b_desc, n2_desc, c_desc, a_bufs, b_bufs, n2_bufs, ready, empty, c_bufs, i_ptr,
                         sa_ptr, sb_ptr, M, N, K, BM, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS,
                         0, num_warps, A_PIECES, WIDE, PROMOTE)),
            (_producer, (a_desc, b_desc, n2_desc, a_bufs, b_bufs, n2_bufs, ready, empty, M, N, K, BM, BN, GROUP_M,
                         NUM_SMS, B_T, SWAP, A_PIECES, WIDE)),
        ], [1], [24])
    elif CONSUMERS == 2:
        gl.warp_specialize([
            (_consumer, (a_desc, b_desc, n2_desc, c_desc, a_bufs, b_bufs, n2_bufs, ready, empty, c_bufs, i_ptr,
                         sa_ptr, sb_ptr, M, N, K, BM, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS,
                         0, num_warps, A_PIECES, WIDE, PROMOTE)),
            (_consumer, (a_desc, b_desc, n2_desc, c_desc, a_bufs, b_bufs, n2_bufs, ready, empty, c_bufs, i_ptr,
                         sa_ptr, sb_ptr, M, N, K, BM, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS,
                         ROWS, num_warps, A_PIECES, WIDE, PROMOTE)),
            (_producer, (a_desc, b_desc, n2_desc, a_bufs, b_bufs, n2_bufs, ready, empty, M, N, K, BM, BN, GROUP_M,
                         NUM_SMS, B_T, SWAP, A_PIECES, WIDE)),
        ], [num_warps, 1], [240, 24])
    else:
        gl.warp_specialize([
            (_consumer, (a_desc, b_desc, n2_desc, c_desc, a_bufs, b_bufs, n2_bufs, ready, empty, c_bufs, i_ptr,
                         sa_ptr, sb_ptr, M, N, K, BM, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS,
                         0, num_warps, A_PIECES, WIDE, PROMOTE)),
            (_consumer, (a_desc, b_desc, n2_desc, c_desc, a_bufs, b_bufs, n2_bufs, ready, empty, c_bufs, i_ptr,
                         sa_ptr, sb_ptr, M, N, K, BM, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS,
                         ROWS, num_warps, A_PIECES, WIDE, PROMOTE)),
            (_consumer, (a_desc, b_desc, n2_desc, c_desc, a_bufs, b_bufs, n2_bufs, ready, empty, c_bufs, i_ptr,
                         sa_ptr, sb_ptr, M, N, K, BM, BN, GROUP_M, NUM_SMS, B_T, SWAP, HAS_SCALE, HAS_BIAS, ROWS,
                         2 * ROWS, num_warps, A_PIECES, WIDE, PROMOTE)),
            (_producer, (a_desc, b_desc, n2_desc, a_bufs, b_bufs, n2_bufs, ready, empty, M, N, K, BM, BN, GROUP_M,
                         NUM_SMS, B_T, SWAP, A_PIECES, WIDE)),
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
    Triton descriptor's block, and a Gluon buffer, is a power of two on a side); swapped, A's
    192 rows are the MMA's N side, in two boxes (`n_boxes`)."""
    bm = cfg["BM"]
    return 1 if bm & (bm - 1) == 0 or cfg.get("SWAP") else cfg["CONSUMERS"]


def n_boxes(cfg: dict) -> tuple[int, int]:
    """(N0, N1): the MMA's N side (B's columns; swapped, A's rows) as one box (N1 = 0), or where
    it is not a power of two (192, 96) as a box of the power of two below it and one of half
    that (WIDE: two wgmmas a k-step)."""
    swap = bool(cfg.get("SWAP"))
    n = cfg["BM" if swap else "BN"]
    if n & (n - 1) == 0:
        return n, 0
    n0 = 1 << (n.bit_length() - 1)
    if 2 * (n - n0) != n0 or n0 < 64:
        raise ValueError(f"t05: configuration {cfg}: a tile of {n} {'rows' if swap else 'columns'} runs as boxes "
                         "of 2^j and 2^(j-1) from 64 and 32 (96, 192, 384)")
    return n0, n - n0


def epilogue_box(cfg: dict) -> list[int]:
    """C's block in one epilogue slice of one consumer partition: its share of the MMA's rows
    (C's rows; swapped, C's columns) × the N side's narrower box over SPLIT."""
    swap, consumers, split = bool(cfg.get("SWAP")), cfg["CONSUMERS"], cfg["SPLIT"]
    n0, n1 = n_boxes(cfg)
    if swap:
        return [(n1 or n0) // split, cfg["BN"] // consumers]
    return [cfg["BM"] // consumers, (n1 or n0) // split]


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


def _args(p: P.Problem, cfg: dict, num_sms: int | None = None, a=None, b=None):
    """(grid, positional arguments of ws_kernel) for p; a, b: the operands to describe, where
    they are copies of p's (PAD)."""
    a = t03._squeeze(p.a) if a is None else a
    b = t03._squeeze(p.b) if b is None else b
    c = t03._squeeze(p.c)
    bm, bn, bk, consumers = cfg["BM"], cfg["BN"], cfg["BK"], cfg["CONSUMERS"]
    b_t, swap = _col_major(b), bool(cfg.get("SWAP"))
    pieces = a_pieces(cfg)
    if bm & (bm - 1) and (bm != 64 * consumers if not swap else consumers > 2):
        raise ValueError(f"t05: configuration {cfg}: a tile of {bm} rows (not a power of two) runs as 64 rows "
                         "a consumer partition, or swapped as two boxes on one or two partitions")
    if swap and bn & (bn - 1):
        raise ValueError(f"t05: configuration {cfg}: swapped, C's {bn} columns are the MMA's rows, a power of two")
    if swap != P.swapped_tf32(p):
        raise ValueError(f"t05: configuration {cfg} does not fit {a.dtype} with B "
                         f"{'column' if b_t else 'row'}-major (the swapped form is for TF32 with a row-major B)")

    def desc(x, block, trans=False):
        """A descriptor over x itself (a plan binds it to x's slot), of x.T's logical shape if trans."""
        layout = gl.NVMMASharedLayout.get_default_for(block, _GL[x.dtype])
        shape, strides = (list(x.shape)[::-1], list(x.stride())[::-1]) if trans else (list(x.shape), list(x.stride()))
        return TensorDescriptor(x, shape, strides, block, layout)

    n0, n1 = n_boxes(cfg)

    def b_desc(cols):
        return desc(b, [cols, bk], trans=True) if b_t else desc(b, [bk, cols])

    sms = min(num_sms or P.num_sms(p.a.device), ceil_div(p.m, bm) * ceil_div(p.n, bn))
    i, sa, sb = P.epilogue_args(p)  # C itself where there is no bias or there are no scales (never read then)
    if swap:  # the N side is A's rows: a box of n0 of them, and with WIDE one of n1 after it
        descs = [desc(a, [n0, bk]), b_desc(bn), desc(a, [n1, bk]) if n1 else None]
    else:
        descs = [desc(a, [bm // pieces, bk]), b_desc(n0), b_desc(n1) if n1 else None]
    promote = p.promote(bk)
    if cfg.get("OVERLAP"):  # the promotion overlapped with the next k-step's wgmma: PROMOTE = -BK in the kernel
        if not can_overlap(p, cfg):
            raise ValueError(f"t05: configuration {cfg}: OVERLAP is for FP8 without fast accumulation, BK ≤ "
                             f"{P.PROMOTE_K} (the span promoted) and one box of N")
        promote = -bk
    args = descs + [desc(c, epilogue_box(cfg)), i, sa, sb, p.m, p.n, p.k, cfg["GROUP_M"], sms, cfg["STAGES"], b_t,
                    swap, p.scale_a is not None, p.has_beta, consumers, pieces, bool(n1), promote]
    return (sms, ), args


def can_overlap(p: P.Problem, cfg: dict) -> bool:
    """Can cfg's tile run p with its promotion overlapped (OVERLAP: `_k_step_promoted`)? FP8
    without fast accumulation whose k-step is the span promoted, unswapped, the N side one box."""
    return p.promote(cfg["BK"]) == cfg["BK"] and not cfg.get("SWAP") and cfg["BN"] & (cfg["BN"] - 1) == 0  # (n_boxes'
    # one box: unswapped, the N side is BN)


def _warps(cfg: dict) -> int:
    """Warps of the default (consumer) partition: 16 rows of the MMA's tile per warp."""
    return (cfg["BN"] if cfg.get("SWAP") else cfg["BM"]) // 16 // cfg["CONSUMERS"]


def launches(p: P.Problem, cfg: dict) -> list[P.KernelCall]:
    """One launch of min(#SMs, tiles) programs (p must pass `usable`), after t03's copies of the
    operands cfg's PAD names (`t03.operands`: rows 128 bytes apart; their buffers are scratch)."""
    a, b, copies = t03.operands(p, cfg)
    grid, args = _args(p, cfg, a=a, b=b)
    scratch = tuple(t for call in copies for t in call.scratch)
    return copies + [P.KernelCall(ws_kernel, grid, args, dict(num_warps=_warps(cfg), maxnreg=maxnreg(cfg)),
                                  scratch=scratch)]


def traffic(m, n, k, s, bm=128, bn=256):
    return t03.traffic(m, n, k, s, bm, bn)


def compile_for_sm90(cfg: dict, dtype=torch.bfloat16, out_dtype=None, b_t: bool = False, bias: bool = False,
                     fast_accum: bool = True):
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
                  c_in=row, scale_a=scale, scale_b=scale, fast_accum=fast_accum)
    _, args = _args(p, cfg, num_sms=132)
    names = ws_kernel.arg_names
    first_const = names.index("GROUP_M")
    consts = dict(zip(names[first_const:], args[first_const:]), num_warps=_warps(cfg))
    consts.update({n: None for n, v in zip(names, args) if v is None})  # n2_desc where the N side is one box
    sig = {n: "constexpr" if n in consts else ("i32" if n in ("M", "N", "K") else mangle_type(v))
           for n, v in zip(names, args + [None])}
    src = GluonASTSource(fn=ws_kernel, signature=sig, constexprs=consts)
    return triton_compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=_warps(cfg), maxnreg=maxnreg(cfg)))
