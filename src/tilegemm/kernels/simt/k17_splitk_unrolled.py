"""k17 split-K on the generated kernel: k15's and k16's thread tiles in smaller blocks, K split.

Changes against k16: the FP32 auto rung's menu. k16 runs its own 256×128 tiles where they fill
the SMs, and hands the rest to k15's 128×128 tiles or to k13's plan, whose split-K tiles are k10's
looped kernel, slower per multiply-add than the generated one (the fitted rates: `rate` in
k13.TILES against k16.RATE; results/h200/simt-plans.json). So the products that need small tiles
or a split K to fill 132 SMs (1000³ has 64 tiles of 128×128; 128×4096×4096 has 32) ran at the
slower kernel's pace (docs/ladder.md has the figures). Here k14's generator writes the split-K
kernel itself (`Config.split`: grid z picks a slice of whole K steps, the partial tile is added
into C, zeroed first), and the menu is seven generated tiles,
each with K split 1 to 32 ways: 8×8 outputs a thread in 32×128 (4×8), 64×64, 64×128, 128×64 and
k15's 128×128 blocks, and 16×8 a thread in 128×128 and k16's 256×128 blocks. Unsplit, the last
two are k15's and k16's own kernels. The partial tiles meet in C through `red4`: on sm_90 one
`red.global.add.v4.f32` adds four neighbours in one L2 operation (a quarter of the atomics of
k13's scalar adds).

Attacks: idle SMs on small and skinny products (k13's problem) without k13's slower looped
kernel. Which tile and split is k13's lesson again, with a block's fixed cost added: a block takes
`block_us` (its first loads and its tile's adds) plus its multiply-adds over its tile's rate, and
blocks go to the SMs in rounds (`estimate_us`). Rates, block costs and the constants are fitted to
every tile × split at 28 shapes on the H200 (results/h200/simt-splitk-unrolled.json), to the
forms within 1.5× of each shape's fastest; the plan is the model's fastest.

Rows off 16 bytes (K or N not a multiple of 4): a tile runs with one-element loads and adds
(`vector=False`: the factor SCALAR on the 16-byte form's time, fitted in that sweep), always on
the split kernel, so its plan counts C's zeroing at one slice too; or, where copying A and B into
16-byte rows and whole tiles costs less than that difference (large products), the 16-byte plan
runs on copies
(k16's `run_on_copies`). M ≤ 16: k12's one-column kernel, which reads B once (through k16's
routing).

A linear layer's x @ Wᵀ (B passed as W.t(), W the (N, K) C-contiguous weight; `launch_linear`):
the generated tiles read W's rows in place (`b_rows`: a K step's BN×BK tile of W loaded as A's
tile is, each lane 16 bytes of a row of its own, and stored transposed into B's shared tile, so
the body is unchanged), where the API copied W into B's layout before each call (2·K·N elements
moved and a launch). Those loads cost the product a factor ROWS_COST (fitted on the H200); where
that is more than the copy (`copy_pays`: large products), W is copied by a 32×32 transposing
tile first.
A bias row (`bias`: nn.Linear's) is added to the accumulators before the store, by the first
slice of K where K is split: one launch where torch's add after the product read and wrote C again.
Decode (M ≤ 16, 16-byte rows) has a form of its own (`gemv_for`): a warp takes 1, 2 or 4 columns
of C, its lanes reading those rows of W along K at their coalesced pace; the block stages x's
rows a step of K at a time (M × 256 elements) in shared memory, once for all its columns, and
each lane keeps the M × columns partial sums in registers. Where W has few columns for the SMs
(a narrow weight: 1024 rows are 8 an SM), 2 or 4 of a block's warps share each column and split
its K, so that as many of W's bytes are in flight. W is read once (K·N); x once a block.

Global traffic by design, with the plan's tile BM×BN and S splits (elements; s the element size):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM)          (splitting K re-reads nothing)
    writes = M·N (zeroing) + 2·M·N·S                  (atomic read-modify-write in L2); M·N unsplit
             (the one-element form always runs the split kernel: M·N + 2·M·N at S = 1)
    intensity ≈ 2/(s·(1/BM + 1/BN)) FLOP/byte: 21 FLOP/B at 64×128 in FP32, 32 at 128×128
and on copies, each copied operand read and written once more (k16's `copied_elements`). For
x @ Wᵀ the reads are the same (W's K·N elements take B's place); a copy of W adds 2·K·N, a bias N
per block row.
The decode form reads K·N of W and M·K·ceil(N/(warps·cols/ks)) of x (ks: the warps that share a
column; x from L2: at M = 16 and 16 columns a block as many bytes as W's), writes M·N; against
DRAM's bytes (W's) its intensity is 2·M·N·K/(4·K·N) = M/2 FLOP/B in FP32, under the H200's
67 TFLOP/s ÷ 4.8 TB/s ≈ 14 for M < 28.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from ... import _cuda
from ...registry import ceil_div
from ._common import configure, per_dtype, scratch, sm_count
from ._vec import SMEM_ALIGN, at, ldg4, lds4, sts4
from . import k10_warptile as k10
from . import k12_skinny_m as k12
from . import k13_splitk_tiles as k13
from . import k14_unrolled as k14
from . import k15_register_budget as k15
from . import k16_big_tile as k16

Config = k14.Config


@dataclasses.dataclass(frozen=True)
class Tile:
    """A generated tile the plan may choose (its split-K form), with what the model knows of it."""

    cfg: Config
    per_sm: int  # blocks an SM holds at once (registers × threads against 64 K registers)
    rate: float  # multiply-adds an SM completes per µs with its slots busy, fitted
    block_us: float  # a block's fixed cost: its first loads, its tile's adds into C; fitted

    @property
    def name(self) -> str:
        t = self.cfg.WM // (k10.LANES_M * k10.MICRO) * k10.MICRO, self.cfg.WN // (k10.LANES_N * k10.MICRO) * k10.MICRO
        return f"{self.cfg.BM}×{self.cfg.BN} tiles, {t[0]}×{t[1]} a thread"


def _tile(bm, bn, bk, wm, per_sm, rate, block_us, **kw) -> Tile:
    return Tile(Config(BM=bm, BN=bn, BK=bk, WM=wm, WN=32, min_blocks=kw.pop("min_blocks", 0), split=True, **kw),
                per_sm, rate, block_us)


# Registers a thread on sm_90 (numba-cuda 0.30.4): 167, 191, 165, 167, 168, 254, 237 in this order.
TILES = (
    _tile(32, 128, 16, 32, 3, 133_900.0, 0.64),  # 4×8 a thread, 4 warps
    _tile(64, 64, 8, 64, 5, 145_000.0, 0.82),  # 8×8, 2 warps
    _tile(64, 128, 8, 64, 3, 154_800.0, 1.02),  # 8×8, 4 warps
    _tile(128, 64, 8, 64, 3, 151_000.0, 1.20),  # 8×8, 4 warps
    Tile(dataclasses.replace(k15.DEFAULT, split=True), 1, 153_000.0, 3.35),  # k15's: 8×8, 8 warps
    _tile(128, 128, 16, 128, 2, 167_600.0, 3.61, rows_apart=True),  # 16×8, 4 warps
    Tile(dataclasses.replace(k16.DEFAULT, split=True), 1, 160_900.0, 6.26),  # k16's: 16×8, 8 warps
)
K15_TILE, K16_TILE = TILES[4], TILES[-1]  # unsplit, k15's and k16's own kernels (launch_plan)
FIXED_US = 2.75  # launch-to-finish floor of a grid
IDLE = 0.304  # a block-time per empty resident slot of the busiest SM's last round
# zeroing C before a split grid, on the sweep's clock (the fit's frame: 6.0 µs at 1000² for the one-
# element-a-thread kernel the sweep ran); the per-element part lowered by what k12.zero's flat form saves,
# measured back to back on the H200 (2.4 → 0.92 µs a million elements; the launch unchanged, 1.86 µs at 17×256:
# results/archive/h200-tuning/session37-zero-probe.json)
ZERO_US, ZERO_US_PER_MELEM = 2.6, 1.9
SCALAR = 1.07  # one-element loads and adds against 16-byte ones, same tile and split (the sweep: 1.00–1.09)
MIN_SLICE, MAX_SPLITS = k13.MIN_SLICE, k13.MAX_SPLITS


def estimate_us(m: int, n: int, k: int, tile: Tile, splits: int, sms: int, vector: bool = True) -> float:
    """The wave model: the busiest SM runs ceil(blocks / SMs) blocks, each `block_us` plus its
    BM·BN·(K / splits) multiply-adds at the tile's rate; an SM's empty slots in the last round
    cost IDLE of a block each; the split kernel first zeroes C. That kernel runs every split grid
    and, K unsplit too, every one-element form (`vector` False; `launch_plan`)."""
    cfg = tile.cfg
    blocks = ceil_div(m, cfg.BM) * ceil_div(n, cfg.BN) * splits
    block = tile.block_us + cfg.BM * cfg.BN * ceil_div(ceil_div(k, splits), 16) * 16 / tile.rate
    t = FIXED_US + k13.busiest_sm_us(blocks, sms, block, tile.per_sm, IDLE)
    return t + (ZERO_US + ZERO_US_PER_MELEM * m * n / 1e6 if splits > 1 or not vector else 0.0)


@dataclasses.dataclass(frozen=True)
class Plan:
    tile: Tile
    splits: int
    us: float  # the wave model's estimate

    @property
    def cfg(self) -> Config:
        return self.tile.cfg


MAX_ROUNDS = 12  # a split grid has at most this many blocks per SM (the sweep's bound)


def splits_for(m: int, n: int, k: int, tile: Tile, sms: int) -> range:
    """The K splits the plan weighs for a tile: slices at least MIN_SLICE deep (but the last), and
    a split grid of at most MAX_ROUNDS blocks an SM: splitting fills idle SMs; past a dozen rounds
    it would only even out the last one, where the sweep measured nothing."""
    blocks = ceil_div(m, tile.cfg.BM) * ceil_div(n, tile.cfg.BN)
    most = min(MAX_SPLITS, max(1, k // MIN_SLICE), max(1, MAX_ROUNDS * sms // blocks))
    return range(1, most + 1)


@functools.lru_cache(maxsize=4096)
def best(m: int, n: int, k: int, sms: int, vector: bool = True) -> Plan:
    """The tile and K split the model rates fastest (in the one-element form: `vector` False)."""
    plans = (Plan(t, s, estimate_us(m, n, k, t, s, sms, vector)) for t in TILES for s in splits_for(m, n, k, t, sms))
    return min(plans, key=lambda p: p.us)


@dataclasses.dataclass(frozen=True)
class Route:
    plan: Plan
    form: str  # "vector" (16-byte accesses), "scalar" (one element at a time) or "copies"
    shape: tuple[int, int, int] | None = None  # the copies' shape (M', N', K') for "copies"


def route(m: int, n: int, k: int, itemsize: int = 4) -> Route | None:
    """How k17 runs this product; None where k16's routing does (M ≤ 16: k12's kernel; an empty
    product; element types without 16-byte vectors of 4)."""
    if m <= k13.SKINNY_ROWS or itemsize != 4 or n == 0 or k == 0:
        return None
    return _route(m, n, k, sm_count())


def _one_element(m: int, n: int, k: int, sms: int) -> Plan:
    """The one-element form's plan, rated at the shape rounded to 16-byte rows (as the sweep timed it)."""
    return best(m, k16.round4(n), k16.round4(k), sms, vector=False)


@functools.lru_cache(maxsize=4096)
def _route(m: int, n: int, k: int, sms: int) -> Route:
    if k10.vector_shape_ok(k, n, 4):
        return Route(best(m, n, k, sms), "vector")
    p = best(m, k16.round4(n), k16.round4(k), sms)  # the copies' shape: 16-byte rows
    one = _one_element(m, n, k, sms)
    cfg = p.cfg
    # whole tiles and K steps (every load on the unguarded path); A is copied only where K asks for it
    a_too = k % 4 != 0
    shape = (ceil_div(m, cfg.BM) * cfg.BM if a_too else m, ceil_div(n, cfg.BN) * cfg.BN,
             ceil_div(k, cfg.BK) * cfg.BK if a_too else k)
    if k16.copies_us(m, n, k, 4) + p.us <= SCALAR * one.us:
        return Route(p, "copies", shape)
    return Route(one, "scalar")


def launch_plan(a, b, c, cfg: Config, splits: int, stream=None, bias=None) -> None:
    """Run generated configuration cfg with K split `splits` ways (1: the plain kernel, C written
    once; k15's or k16's own kernel for their tiles); b is W for a `b_rows` configuration, bias
    the 1×N row a `bias` one adds."""
    m, n = c.shape
    steps = ceil_div(a.shape[1], cfg.BK)
    splits = ceil_div(steps, ceil_div(steps, splits))  # the slices that have work (whole K steps each)
    if splits == 1 and cfg.vector:
        return k14.run_config(dataclasses.replace(cfg, split=False), a, b, c, stream, bias)
    # (one-element forms stay on the split kernel, one slice too: as swept; unsplit, the 16×8 tile spills)
    k12.zero(c, stream)
    args = (a, b, c, bias) if cfg.bias else (a, b, c)
    configure(k14.kernel_for(c.dtype, cfg), (ceil_div(n, cfg.BN), ceil_div(m, cfg.BM), splits), cfg.threads,
              stream)(*args)


def rows_of(b):
    """W where b is the transpose of a C-contiguous (N, K) array W (a linear layer's weight passed
    as W.t()), else None (b C-contiguous, or an array that cannot say): a view of b's memory
    (Numba's own `.T` of a device array is a copy, made by a transposing kernel)."""
    c_contiguous, f_contiguous = getattr(b, "is_c_contiguous", None), getattr(b, "is_f_contiguous", None)
    if c_contiguous is None or f_contiguous is None or c_contiguous() or not f_contiguous():
        return None
    if _cuda.SIMULATOR:  # (the simulator's device arrays are NumPy's: .T is a view)
        return b.T
    k, n = b.shape
    s = b.dtype.itemsize
    return type(b)(shape=(n, k), strides=(k * s, s), dtype=b.dtype, stream=b.stream, gpu_data=b.gpu_data)


def linear_plan(m: int, n: int, k: int, vector: bool) -> Plan:
    """The tile and K split of x @ Wᵀ: the wave model's for A @ B (the tiles read the same bytes a
    K step from W's rows as from B's, into the same shared tile)."""
    return best(m, n, k, sm_count()) if vector else _one_element(m, n, k, sm_count())


ROWS_COST = 1.10  # a product read from W's rows against the same product from B's (the H200, session 50:
# 1.08–1.13 at 1024×4096×4096, 4096³ and 2048×1024×4096; a warp's loads from 32 rows of W, 16 bytes of each)


def copy_pays(plan: Plan, n: int, k: int) -> bool:
    """Does copying W into B's layout first (`transpose_for`: 2·K·N FP32 elements moved, a launch)
    cost less than what reading W's rows in place adds to the product (ROWS_COST)? Only for large
    products: at 4096 × 4096 weights from about 360 µs of product, some 400 rows."""
    return (ROWS_COST - 1) * plan.us > k16.COPY_FIXED_US + 2 * 4 * k * n / k16.COPY_BYTES_PER_US


@per_dtype
def transpose_for(DT):
    @cuda.jit
    def transpose(w, b):
        """B = Wᵀ (W N×K, B K×N, both C-contiguous): a 32×32 tile a block through shared memory,
        read along W's rows and written along B's, both coalesced."""
        tile = cuda.shared.array((32, 33), DT)  # (33: a column's reads spread over the banks)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        k0, n0 = cuda.blockIdx.x * 32, cuda.blockIdx.y * 32
        for r in range(0, 32, 8):
            if n0 + ty + r < w.shape[0] and k0 + tx < w.shape[1]:
                tile[ty + r, tx] = w[n0 + ty + r, k0 + tx]
        cuda.syncthreads()
        for r in range(0, 32, 8):
            if k0 + ty + r < b.shape[0] and n0 + tx < b.shape[1]:
                b[k0 + ty + r, n0 + tx] = tile[tx, ty + r]

    return transpose


def launch_transpose(w, b, stream=None) -> None:
    """B = Wᵀ (W N×K, B K×N, both C-contiguous) by `transpose_for`'s 32×32 tiles."""
    configure(transpose_for(b.dtype), (ceil_div(w.shape[1], 32), ceil_div(w.shape[0], 32)), (32, 8), stream)(w, b)


GEMV_STEP = 256  # K elements a warp's step: its 32 lanes × two 16-byte loads of a row
GEMV_ROWS = 16  # the decode form up to this many rows (x's step: rows × 256 × ks elements of shared memory)
GEMV_XS_BYTES = 32 << 10  # x's step at most (with the partial sums', under the 48 KB of static shared memory)


@functools.lru_cache(maxsize=None)
def gemv_for(dtype_name: str, rows: int, cols: int, warps: int, has_bias: bool, ks: int = 1):
    """The decode form of x @ Wᵀ for up to `rows` rows of x (a power of two), `cols` columns of C
    a warp, `warps` warps a block, of which each `ks` consecutive ones share their columns and split
    each of the block's steps of K between them."""
    DT = numba.from_dtype(np.dtype(dtype_name))
    R, C, RC, C8, WARPS, KS = rows, cols, rows * cols, 8 * cols, warps, ks  # (constants: the local arrays' sizes)
    S = GEMV_STEP * KS  # a block's step of K
    if warps % ks or R * S * np.dtype(dtype_name).itemsize > GEMV_XS_BYTES:
        raise ValueError(f"decode form: {warps} warps in groups of {ks}, x's step {R} × {S} (at most "
                         f"{GEMV_XS_BYTES} bytes of shared memory)")

    @cuda.jit
    def gemv_rows(x, w, c, bias):
        """C[:, n] = x @ W[n, :] (+ bias[0, n]) for a warp's C columns n: its lanes 16 bytes apart
        along each of the C rows of W (two 16-byte loads a row and step, a warp's 1 KB), x's step
        (R rows × S of K) staged in shared memory by the block once for its columns, each lane's
        R × C partial sums in registers, then summed across the warp, and across the KS warps that
        split K, through shared memory. W is read once, x once a block."""
        xs = cuda.shared.array((R, S), DT, alignment=SMEM_ALIGN)
        part = cuda.shared.array((WARPS, R, 33), DT)  # (33: lane r's reads of row r spread over the banks)
        tid = cuda.threadIdx.x
        warp, lane = tid // 32, tid % 32
        n0 = (cuda.blockIdx.x * (WARPS // KS) + warp // KS) * C
        kw = warp % KS * GEMV_STEP  # this warp's part of the block's step
        M, K, N = x.shape[0], x.shape[1], w.shape[0]
        acc = cuda.local.array(RC, DT)
        wv = cuda.local.array(C8, DT)
        for i in range(RC):
            acc[i] = DT(0)
        full = K // S * S
        for k0 in range(0, full, S):
            for j in range(C):  # W first: its loads are in flight while x's step is staged
                n = min(n0 + j, N - 1)  # (past N: a real row, read, never stored)
                wv[8 * j], wv[8 * j + 1], wv[8 * j + 2], wv[8 * j + 3] = ldg4(w, n, k0 + kw + lane * 4)
                wv[8 * j + 4], wv[8 * j + 5], wv[8 * j + 6], wv[8 * j + 7] = ldg4(w, n, k0 + kw + 128 + lane * 4)
            for q in range(tid, R * (S // 4), 32 * WARPS):
                r, col = q // (S // 4), q % (S // 4) * 4
                a0 = a1 = a2 = a3 = DT(0)
                if r < M:
                    a0, a1, a2, a3 = ldg4(x, r, k0 + col)
                sts4(xs, r, col, a0, a1, a2, a3)
            cuda.syncthreads()
            for r in range(R):
                a0, a1, a2, a3 = lds4(xs, r, kw + lane * 4)
                b0, b1, b2, b3 = lds4(xs, r, kw + 128 + lane * 4)
                for j in range(C):
                    acc[r * C + j] += (a0 * wv[8 * j] + a1 * wv[8 * j + 1] + a2 * wv[8 * j + 2] + a3 * wv[8 * j + 3]
                                       + b0 * wv[8 * j + 4] + b1 * wv[8 * j + 5] + b2 * wv[8 * j + 6]
                                       + b3 * wv[8 * j + 7])
            cuda.syncthreads()
        for k in range(full + kw // 8 + lane, K, 32 * KS):  # K's tail, an element a lane (kw // 8: 32 a warp)
            for j in range(C):
                wk = at(w, min(n0 + j, N - 1), k)
                for r in range(R):
                    if r < M:
                        acc[r * C + j] += at(x, r, k) * wk
        for j in range(C):
            for r in range(R):
                part[warp, r, lane] = acc[r * C + j]
            cuda.syncthreads()
            if warp % KS == 0 and lane < M and n0 + j < N:  # lane r sums row r's partials (KS warps × 32 lanes)
                total = DT(0)
                for q in range(KS):
                    for i in range(32):
                        total += part[warp + q, lane, i]
                if has_bias:
                    total += bias[0, n0 + j]
                c[lane, n0 + j] = total
            cuda.syncthreads()

    return gemv_rows


class GemvForm(NamedTuple):
    """A decode form: warps a block, columns a warp, how many of a block's warps share their columns
    and split K (ks), and the columns an SM it is taken for (N from lo to below hi times the SMs)."""
    warps: int
    cols: int
    ks: int = 1
    lo: float = 0
    hi: float = math.inf

    def blocks(self, n: int) -> int:
        return ceil_div(n, self.warps // self.ks * self.cols)


def gemv_form(m: int, n: int) -> GemvForm | None:
    """The decode form for m rows and n columns: the first of GEMV_FORMS[rows] taken for n's
    columns an SM whose blocks fill GEMV_FILL of the SMs (more columns a block, fewer blocks
    reading x's steps); None where none does (the tiles run it then, splitting K)."""
    sms = sm_count()
    for form in GEMV_FORMS[1 << (m - 1).bit_length()]:
        if form.lo * sms <= n < form.hi * sms and form.blocks(n) >= GEMV_FILL * sms:
            return form
    return None


GEMV_FILL = 0.45  # (64 blocks on 132 SMs ran the 1024 × 4096 weight fastest at M = 4 to 16)
# by rows, fastest first where the SMs fill (H200, five weights 1024×4096 to 28672×8192, L2 flushed;
# results/archive/h200-session51/gemv-forms.json, results/archive/h200-session52/gemv-forms3.json and
# gemv-ab.json). A block's registers set how many an SM holds (162 a thread at 16 rows and 4 columns:
# three blocks of 4 warps), so 8 warps of 2 columns beat 4 of 4 at 4 and 16 rows, where the same x
# step serves as many columns. A narrow weight has too few columns for W's bytes in flight (a column's
# step is 1 KB a warp; 1024 rows are 8 columns an SM): below 12 columns an SM (16 at one row: 2048
# rows were faster split at M = 1, slower at M = 4) 2 or 4 warps share each column's K, 1.2-1.9× at
# M = 1 to 8; at 16 rows, from 160 columns an SM (28672 rows) 4 warps of 4 columns, 1.24×.
GEMV_FORMS = {1: (GemvForm(8, 1, 4, hi=16), GemvForm(4, 2), GemvForm(4, 1)),
              2: (GemvForm(8, 1, 2, hi=12), GemvForm(4, 2), GemvForm(4, 1)),
              4: (GemvForm(8, 1, 2, hi=12), GemvForm(8, 2), GemvForm(4, 2), GemvForm(4, 1)),
              8: (GemvForm(8, 2, 2, hi=12), GemvForm(4, 4), GemvForm(4, 2)),
              16: (GemvForm(4, 4, lo=160), GemvForm(8, 2), GemvForm(4, 4), GemvForm(4, 2))}


def launch_gemv(x, w, c, form: GemvForm, row=None, stream=None) -> None:
    """x @ Wᵀ (+ row, 1×N) for M ≤ GEMV_ROWS rows by the decode form (16-byte rows and pointers)."""
    m, n = c.shape
    kernel = gemv_for(c.dtype.name, 1 << (m - 1).bit_length(), form.cols, form.warps, row is not None, form.ks)
    configure(kernel, (form.blocks(n),), 32 * form.warps, stream)(x, w, c, c if row is None else row)


def linear_route(m: int, n: int, k: int, itemsize: int, xw16: bool = True, c16: bool = True):
    """launch_linear's choice for x @ Wᵀ (xw16, c16: x's and W's data pointers, and C's, 16-byte
    aligned): ("decode", GemvForm, vector) the decode form; ("copy", plan, True) the tiles on
    a copy of W in B's layout; ("rows", plan, vector) the tiles on W's rows, 16-byte loads or one
    element at a time."""
    rows16 = itemsize == 4 and k % 4 == 0 and xw16  # (the decode form's loads: x's and W's rows)
    vector = rows16 and n % 4 == 0 and c16
    form = gemv_form(m, n) if rows16 and 0 < m <= GEMV_ROWS else None
    if form:
        return "decode", form, vector
    plan = linear_plan(m, n, k, vector)
    return ("copy" if vector and copy_pays(plan, n, k) else "rows"), plan, vector


def launch_linear(x, w, c, bias=None, stream=None) -> None:
    """C = x @ Wᵀ (+ bias), W the (N, K) C-contiguous weight. Read in place: W's tiles are loaded
    as A's are and stored transposed into shared memory, so no transposing copy of W is made (2·K·N
    elements moved and a launch, each call). Every M (the split tiles read W once at small M, as
    k12's kernel reads B), with 16-byte loads where K and N are multiples of 4 and the pointers
    aligned, else one element at a time; but up to GEMV_ROWS rows the decode form runs (x's and
    W's rows 16-byte aligned, any N, columns enough to fill GEMV_FILL of the SMs), and where the
    copy costs less than reading W's rows does (`copy_pays`: large products), W is copied into
    B's layout first (scratch) and the tiles read that. bias: a row of N (1-D, or 1×N) added in
    the epilogue. K must be positive."""
    m, n = c.shape
    k = x.shape[1]
    kind, what, vector = linear_route(m, n, k, c.dtype.itemsize, k10.aligned16(x, w), k10.aligned16(c))
    row = None if bias is None else bias.reshape(1, n)
    if kind == "decode":
        return launch_gemv(x, w, c, what, row, stream)
    plan = what
    b = scratch([(k, n)], c.dtype, stream) if kind == "copy" else None
    if b is not None:  # (None too where no scratch can be had: then W is read in place)
        launch_transpose(w, b[0], stream)
        return launch_plan(x, b[0], c, dataclasses.replace(plan.cfg, bias=bias is not None), plan.splits, stream, row)
    cfg = dataclasses.replace(plan.cfg, b_rows=True, bias=bias is not None, vector=vector)
    launch_plan(x, w, c, cfg, plan.splits, stream, row)


def launch(a, b, c, stream=None, bias=None):
    """C = A @ B; b may be given as the transpose of a C-contiguous array W, and then a bias row
    may be added (C = A @ Wᵀ + bias: `launch_linear`)."""
    m, n = c.shape
    w = rows_of(b) if a.shape[1] else None
    if w is not None:
        return launch_linear(a, w, c, bias, stream)
    if bias is not None:
        raise ValueError("k17: a bias row is added to x @ Wᵀ only (b given as the transpose of a C-contiguous W)")
    r = route(m, n, a.shape[1], c.dtype.itemsize)
    if r is None:
        return k16.launch(a, b, c, stream)
    cfg, splits = r.plan.cfg, r.plan.splits
    if r.form == "copies":
        run = lambda a, b, out: launch_plan(a, b, out, cfg, splits, stream)  # noqa: E731
        if k16.run_on_copies(a, b, c, r.shape, run, stream):
            return
    elif r.form == "vector" and k10.vector_ok(a, b, c):
        return launch_plan(a, b, c, cfg, splits, stream)
    # rows off 16 bytes (or pointers, or no scratch for copies): one element at a time, on the
    # one-element form's own plan (the route's, for a "scalar" route)
    if r.form != "scalar":
        one = _one_element(m, n, a.shape[1], sm_count())
        cfg, splits = one.cfg, one.splits
    launch_plan(a, b, c, dataclasses.replace(cfg, vector=False), splits, stream)


def traffic(m, n, k, s):
    r = route(m, n, k, int(s))
    if r is None:
        return k16.traffic(m, n, k, s)
    cfg, splits = r.plan.cfg, r.plan.splits
    mp, np_, kp = r.shape or (m, n, k)
    split_kernel = splits > 1 or r.form == "scalar"  # (launch_plan: one-element forms zero C and add into it)
    writes = m * n + (2 * m * n * splits if split_kernel else 0)
    product = mp * kp * ceil_div(np_, cfg.BN) + kp * np_ * ceil_div(mp, cfg.BM) + writes
    copies = k16.copied_elements(m, n, k, r.shape) if r.shape else 0
    return (product + copies) * float(s)


def describe(m: int, n: int, k: int, itemsize: int, vector: bool) -> str:
    """What the FP32 auto rung runs for this product, and the wave model's estimate behind it
    (`tilegemm.explain`)."""
    r = route(m, n, k, itemsize)
    if r is None:
        return k16.describe(m, n, k, itemsize, vector)
    if r.form == "vector" and not vector:  # (launch's: rows off 16 bytes at their addresses, one element at a time)
        r = Route(_one_element(m, n, k, sm_count()), "scalar")
    p = r.plan
    own = p.splits == 1 and r.form != "scalar"  # (one-element forms run on the split kernel: launch_plan)
    what = {K15_TILE: "k15's kernel", K16_TILE: "k16's kernel"}.get(p.tile, "k17's kernel") if own else "k17's kernel"
    split = f"K split {p.splits} ways" if p.splits > 1 else "K unsplit"
    if r.form == "copies":
        mp, np_, kp = r.shape
        how = f", on copies in 16-byte rows ({mp}×{kp} and {kp}×{np_})"
    else:
        how = ", one-element loads (rows off 16 bytes)" if r.form == "scalar" else ""
    return f"{what}: {p.tile.name}, {split}{how} (wave model, {sm_count()} SMs: {p.us:.0f} µs)"


def describe_linear(m: int, n: int, k: int, itemsize: int) -> str:
    """What the FP32 auto rung runs for x @ Wᵀ (B given as W.t(); `launch_linear`'s choice, with
    16-byte aligned pointers assumed), and the wave model's estimate behind it (`tilegemm.explain`)."""
    kind, what, vector = linear_route(m, n, k, itemsize)
    if kind == "decode":
        f = what
        split = f", {f.ks} warps splitting each column's K" if f.ks > 1 else ""
        return (f"k17's decode form of x @ Wᵀ: {f.warps} warps a block, {f.cols} column{'s' if f.cols > 1 else ''} a "
                f"warp{split} ({f.blocks(n)} blocks, {sm_count()} SMs), x's rows staged in shared memory, W read once")
    p = what
    split = f"K split {p.splits} ways" if p.splits > 1 else "K unsplit"
    if kind == "copy":
        return (f"k17's kernel on a copy of W in B's layout (a 32×32 transposing kernel first): {p.tile.name}, "
                f"{split} (wave model, {sm_count()} SMs: {p.us:.0f} µs and the copy)")
    how = "" if vector else ", one-element loads (rows off 16 bytes)"
    return (f"k17's kernel reading W's rows in place: {p.tile.name}, {split}{how} "
            f"(wave model, {sm_count()} SMs: {p.us * ROWS_COST:.0f} µs)")


def threads_for(kernel) -> list[int]:
    """Block size of each compiled kernel, in `jit_kernels` order (for the resource table)."""
    return [t.cfg.threads for t in TILES]


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them):
    each tile's split-K kernel."""
    return [k14.kernel_for(dt, t.cfg) for t in TILES]
