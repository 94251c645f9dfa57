"""k13 split-K tiles: the warp-tiled kernel, with the tile and the K split a wave model picks.

Changes against k12: nothing for M ≤ SKINNY_ROWS (k12's one-column-per-thread kernel runs) or
where the model picks k11's own tile unsplit on more than 128 rows (k11 runs, as tuned). Elsewhere
(M from 17 rows, e.g. 32×4096×14336 or 128×4096×4096, and small or ragged products, e.g. 512³)
k12's 16-row blocks re-read B ceil(M/16) times, while k11's 128×128 tiles give
ceil(M/128)·ceil(N/128) blocks (32 at M ≤ 128, N = 4096; 16 at 512³) for 132 SMs: most SMs
idle, each busy one running a K loop alone. Here the block tile is one of five (32×64 to
128×128: `TILES`), and grid z splits K into `splits` slices of whole BK steps; each block adds its
partial tile into C with atomics (C is zeroed first; the order
of the adds, and so the last bits, varies from run to run). The kernel is k10's factory with
`Config.split` on. Which tile and how many splits is the lesson: blocks go to the SMs in rounds,
so the time is the busiest SM's rounds times a block's time, and a block's time is its
multiply-adds over its tile's rate (`Waves`): smaller tiles fill more SMs but run slower per
multiply-add, more splits fill more SMs but zero and add C more often, and one block past a round
costs a round. The rates and costs are fitted to a sweep of every tile and split on the H200
(results/h200/simt-plans.json); the plan is the model's fastest. k15 and k16 weigh their own
kernels by the same model (`estimate_us`), so k16's routing takes whichever it rates fastest (k17,
the FP32 auto rung, plans the generated kernel's tiles with a model of its own).

Attacks: idle SMs and padded rows on mid-sized M. Global traffic by design, with the tile BM×BN:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM)   elements (splitting K re-reads nothing)
    writes = M·N (zeroing) + 2·M·N·splits      elements (atomic read-modify-write in L2); M·N with one split
Arithmetic intensity ≈ 2·M·N·K / ((K·N·ceil(M/BM) + M·K·ceil(N/BN))·s)
    ≈ 2/(s·(1/min(M, BM) + 1/BN)) FLOP/byte, about 2·M/s only where M ≪ BN
(at M = BM = 32 in FP32: 10.7 FLOP/B on the 32×64 tile, 12.8 on 32×128, since A is re-read once
per column of tiles): while M ≤ BM, B is read once, and that is the floor; the partial-sum
traffic stays small while splits·M·N ≪ K·N.
"""

from __future__ import annotations

import dataclasses
import functools

from ...registry import ceil_div
from ._common import configure, sm_count
from . import k10_warptile as k10
from . import k11_autotuned as k11
from . import k12_skinny_m as k12
from .k10_warptile import Config

SKINNY_ROWS = 16  # up to this many rows k12's kernel runs
MIN_SLICE = 64  # never split K into slices shorter than this (but the last, which takes what is left)
MAX_SPLITS = 32


@dataclasses.dataclass(frozen=True)
class Tile:
    """A block tile the plan may choose, with what the wave model knows of it: the blocks an SM
    holds at once and the multiply-adds an SM completes per µs when they are all busy."""

    cfg: Config
    per_sm: int
    rate: float  # FMA per µs per SM, fitted (WAVES below)


# The tiles, each a warp-tiled configuration with split-K. Resident blocks per SM from registers ×
# threads against an SM's 64 K registers (the resource table); rates fitted with WAVES' constants to
# 426 device times on the H200 (results/h200/simt-plans.json: every tile × split at 15 small and
# ragged shapes, and k11/k15/k16 at the ladder's; rms error of the log time 0.10).
TILES = (
    Tile(Config(32, 64, 16, 32, 32, min_blocks=0, split=True), 6, 88_200.0),  # 2 warps of 32×32
    Tile(Config(32, 128, 16, 32, 32, min_blocks=0, split=True), 3, 99_700.0),  # 4 warps of 32×32; 158 registers
    Tile(Config(64, 64, 16, 32, 32, min_blocks=0, split=True), 4, 103_000.0),  # 4 warps of 32×32
    Tile(Config(64, 128, 8, 32, 64, min_blocks=0, split=True), 4, 119_000.0),  # 4 warps of 32×64; 120 registers
    Tile(Config(128, 128, 8, 64, 32, min_blocks=2, unroll=2, split=True), 2, 134_500.0),  # k11's H200 winner
)
K11_TILE = TILES[-1]  # unsplit, it is k11's kernel: where the plan picks it for M > 128, k11 runs (tuned)


@dataclasses.dataclass(frozen=True)
class Waves:
    """The wave model of a grid's time: blocks go to the SMs in turn, so the busiest SM runs
    L = ceil(blocks / SMs) of them, each BM·BN·(K / splits) multiply-adds at the tile's rate; an
    SM holding fewer than its resident blocks wastes part of its slots (`idle`, per empty slot of
    the last round), and a split grid first zeroes C and adds its partial tiles with atomics."""

    fixed_us: float = 7.0  # launch-to-finish floor of a grid
    idle: float = 0.19  # a block-time per empty resident slot on the busiest SM
    zero_us_per_melem: float = 4.7  # zeroing C plus the atomic adds, per million elements of M·N·splits

    def us(self, m: int, n: int, k: int, bm: int, bn: int, per_sm: int, rate: float, splits: int, sms: int) -> float:
        blocks = ceil_div(m, bm) * ceil_div(n, bn) * splits
        block_us = bm * bn * ceil_div(ceil_div(k, splits), 16) * 16 / rate
        t = self.fixed_us + busiest_sm_us(blocks, sms, block_us, per_sm, self.idle)
        return t + (self.zero_us_per_melem * m * n * splits / 1e6 if splits > 1 else 0.0)


def busiest_sm_us(blocks: int, sms: int, block_us: float, per_sm: int, idle: float) -> float:
    """The busiest SM's time: ceil(blocks / SMs) blocks of block_us each, plus `idle` of a block for
    each resident slot its last round leaves empty."""
    rounds = ceil_div(blocks, sms)
    return block_us * (rounds + idle * (-rounds % per_sm))


WAVES = Waves()


@dataclasses.dataclass(frozen=True)
class Plan:
    tile: Tile
    splits: int
    us: float  # the wave model's estimate

    @property
    def cfg(self) -> Config:
        return self.tile.cfg


@functools.lru_cache(maxsize=4096)
def best(m: int, n: int, k: int, sms: int) -> Plan:
    """The tile and K splits the wave model rates fastest (slices of whole BK steps, at most
    K / MIN_SLICE of them)."""
    plans = []
    for tile in TILES:
        for s in range(1, min(MAX_SPLITS, max(1, k // MIN_SLICE)) + 1):
            us = WAVES.us(m, n, k, tile.cfg.BM, tile.cfg.BN, tile.per_sm, tile.rate, s, sms)
            plans.append(Plan(tile, s, us))
    return min(plans, key=lambda p: p.us)


def plan(m: int, n: int, k: int, sms: int | None = None) -> Plan | None:
    """The plan for this product, or None where k12 (M ≤ SKINNY_ROWS) or k11 (the plan is k11's own
    tile, unsplit, on more than 128 rows) should run."""
    if m <= SKINNY_ROWS:
        return None
    p = best(m, n, k, sms or sm_count())
    if p.tile is K11_TILE and p.splits == 1 and m > K11_TILE.cfg.BM:
        return None
    return p


def launch_plan(a, b, c, cfg: Config, splits: int, stream=None) -> None:
    """Run tile configuration cfg with K split `splits` ways (1: the plain kernel, no atomics)."""
    m, n = c.shape
    if splits == 1:
        cfg = dataclasses.replace(cfg, split=False)
    else:
        k12.zero(c, stream)
    configure(k10.kernel_for(c.dtype, cfg), (ceil_div(n, cfg.BN), ceil_div(m, cfg.BM), splits),
              cfg.threads, stream)(a, b, c)


def launch(a, b, c, stream=None):
    m, n = c.shape
    p = plan(m, n, a.shape[1])
    if p is None or not k10.vector_ok(a, b, c):  # the 16-byte path needs aligned rows; k12 has a scalar one
        return k12.launch(a, b, c, stream)
    launch_plan(a, b, c, p.cfg, p.splits, stream)


def traffic(m, n, k, s):
    p = plan(m, n, k)
    if p is None or not k10.vector_shape_ok(k, n, s):  # as launch: k12 where 16-byte rows are not legal
        return k12.traffic(m, n, k, s)
    cfg, splits = p.cfg, p.splits
    writes = m * n + (2 * m * n * splits if splits > 1 else 0)  # one split: the plain kernel, C written once
    return (m * k * ceil_div(n, cfg.BN) + k * n * ceil_div(m, cfg.BM) + writes) * float(s)


def threads_for(kernel) -> list[int]:
    """Block size of each compiled kernel, in `jit_kernels` order (for the resource table)."""
    return [t.cfg.threads for t in TILES]


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [k10.kernel_for(dt, t.cfg) for t in TILES]


def describe(m: int, n: int, k: int, itemsize: int, vector: bool) -> str:
    """What k13 runs for this product, and why (`tilegemm.explain`)."""
    p = plan(m, n, k)
    if p is None or not vector:
        why = (f"M ≤ {SKINNY_ROWS}" if m <= SKINNY_ROWS else "rows off 16 bytes: k12's loads serve any alignment"
               if not vector else "k11's own tile, unsplit, rates fastest")
        return f"{k12.describe(m, n, k, itemsize, vector)} ({why})"
    split = f"K split {p.splits} ways" if p.splits > 1 else "K unsplit"
    return f"k13's plan: {p.cfg.BM}×{p.cfg.BN} tiles, {split} (the wave model's {p.us:.0f} µs)"
