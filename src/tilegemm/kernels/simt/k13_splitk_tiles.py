"""k13 split-K tiles: the warp-tiled kernel, with a tile height that fits M and K split over the grid.

Changes against k12: nothing for M ≤ SKINNY_ROWS (k12's one-column-per-thread kernel runs) or
for products whose k11 grid already fills the GPU (k11 runs). In between (M from 17 to a few
hundred rows, e.g. 32×4096×14336 or 128×4096×4096) k12's 16-row blocks re-read B M/16 times,
while k11's 128×128 tiles give N/128 blocks (32 at N = 4096) for 132 SMs: 3 of every 4 SMs idle,
each busy one running a K loop of 4096 alone. Here the block tile is 32, 64 or 128 rows (the one
that pads M least), and grid z splits K into `splits` slices of whole BK steps so that the grid
fills the SMs' resident block slots once (a partial second wave costs more than it saves); each block adds its
partial tile into C with atomics (C is zeroed first; the order of the adds, and so the last
bits, varies from run to run). The kernel is k10's factory with `Config.split` on.

Attacks: idle SMs and padded rows on mid-sized M. Global traffic by design, with the tile BM×BN:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM)   elements (splitting K re-reads nothing)
    writes = M·N (zeroing) + 2·M·N·splits      elements (atomic read-modify-write in L2); M·N with one split
Arithmetic intensity ≈ 2·M·N·K / ((K·N·ceil(M/BM) + M·K·ceil(N/BN))·s) ≈ 2·min(M, BM)/s FLOP/byte
for small M (16 FLOP/B at M = BM = 32 in FP32): at M ≤ 64 reading B once is the floor; the
partial-sum traffic stays small while splits·M·N ≪ K·N.
"""

from __future__ import annotations

import dataclasses

from ... import _cuda
from ...registry import ceil_div
from ._common import configure
from . import k10_warptile as k10
from . import k11_autotuned as k11
from . import k12_skinny_m as k12
from .k10_warptile import Config

SKINNY_ROWS = 16  # up to this many rows k12's kernel runs
# rows a block covers -> (warp-tiled configuration with split-K, blocks resident per SM on an H200:
# registers × threads against the 64 K registers of an SM, from the resource table)
TILES = {
    32: (Config(32, 128, 16, 32, 32, min_blocks=0, split=True), 3),  # 4 warps of 32×32; 158 registers
    64: (Config(64, 128, 8, 32, 64, min_blocks=0, split=True), 4),  # 4 warps of 32×64; 120 registers
    128: (Config(128, 128, 8, 64, 32, min_blocks=2, unroll=2, split=True), 2),  # k11's H200 winner
}
MIN_SLICE = 256  # never split K into slices shorter than this


_SMS: dict = {}  # device id -> multiprocessor count, asked once


def sm_count() -> int:
    if not _cuda.has_gpu():
        return 132  # the simulator: an H200's count, so plans match the GPU's
    dev = _cuda.cuda.get_current_device()
    if dev.id not in _SMS:
        _SMS[dev.id] = dev.MULTIPROCESSOR_COUNT
    return _SMS[dev.id]


def tile_for(m: int) -> tuple[Config, int]:
    """The tile that pads M least (ties: the taller tile, fewer blocks re-reading B)."""
    rows = min(TILES, key=lambda r: (ceil_div(m, r) * r, -r))
    return TILES[rows]


def plan(m: int, n: int, k: int, sms: int | None = None) -> tuple[Config, int] | None:
    """(configuration, K splits) for this product, or None where k12 or k11 should run.

    Splits fill the resident slots (SMs × blocks per SM) once and never overflow them: a grid of
    slots + a few blocks runs a second, nearly empty wave (measured on the H200: 128×4096×4096 at 9
    splits, 288 blocks for 264 slots, 0.52× cuBLAS; at 8 splits 0.69×; results/archive/h200/splitk_sweep.json)."""
    if m <= SKINNY_ROWS:
        return None
    cfg, per_sm = tile_for(m)
    blocks = ceil_div(m, cfg.BM) * ceil_div(n, cfg.BN)
    slots = per_sm * (sms or sm_count())
    splits = max(1, min(slots // blocks, k // MIN_SLICE))
    if splits == 1 and m > max(TILES):
        return None  # k11's grid fills the GPU by itself
    return cfg, splits


def launch_plan(a, b, c, cfg: Config, splits: int, stream=None) -> None:
    """Run tile configuration cfg with K split `splits` ways (1: the plain kernel, no atomics)."""
    m, n = c.shape
    if splits == 1:
        cfg = dataclasses.replace(cfg, split=False)
    else:
        configure(k12.zero_for(c.dtype), (ceil_div(m, 16), ceil_div(n, 16)), (16, 16), stream)(c)
    configure(k10.kernel_for(c.dtype, cfg), (ceil_div(n, cfg.BN), ceil_div(m, cfg.BM), splits),
              cfg.threads, stream)(a, b, c)


def launch(a, b, c, stream=None):
    m, n = c.shape
    p = plan(m, n, a.shape[1])
    if p is None or not k10.vector_ok(a, b, c):  # the 16-byte path needs aligned rows; k12 has a scalar one
        return k12.launch(a, b, c, stream)
    launch_plan(a, b, c, *p, stream=stream)


def traffic(m, n, k, s):
    p = plan(m, n, k)
    if p is None or not k10.vector_shape_ok(k, n, s):  # as launch: k12 where 16-byte rows are not legal
        return k12.traffic(m, n, k, s)
    cfg, splits = p
    writes = m * n + (2 * m * n * splits if splits > 1 else 0)  # one split: the plain kernel, C written once
    return (m * k * ceil_div(n, cfg.BN) + k * n * ceil_div(m, cfg.BM) + writes) * float(s)


def threads_for(kernel) -> list[int]:
    """Block size of each compiled kernel, in `jit_kernels` order (for the resource table)."""
    return [cfg.threads for cfg, _ in TILES.values()]


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [k10.kernel_for(dt, cfg) for cfg, _ in TILES.values()]
