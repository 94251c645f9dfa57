"""k16 a bigger thread tile: 16×8 outputs a thread in 256×128 block tiles, 16 K rows a barrier.

Changes against k15: what the freed registers are spent on. k15 gave k14's 8×8 thread tile the
registers it needed (about 163 of 255) and left the rest unused; here a thread keeps 16×8 = 128
accumulators (a warp tile of 128×32, eight warps a 256×128 block tile, one block per SM: up to
255 registers), and a K step is 16 rows instead of 8. Per K row a thread issues 6 LDS.128 for 128
FFMA (k15: 4 for 64), and per barrier 2,048 FFMA (k15: 512): with 8 warps an SM, every barrier
idles all of them until the slowest arrives, so a quarter of the barriers per FFMA is the change
that matters. Either half alone did not pay on the H200 (256×128 tiles at BK = 8, or BK = 16 at
128×128: docs/perf-notes.md, 56).

Two things the size forces. Shared memory: two 16-row buffers of A (256 wide) and B (128 wide)
are 48 KiB, the most a kernel may declare statically, so A's transposed tile has no padding
(`pad` = 0). Loaded as k14 loads it (a warp's float4s from 8 rows of A, 4 along K each), its
stores to the transposed tile would meet 4-way bank conflicts, and they are what every warp does
just before the barrier. So each lane loads a row of its own (`lane_rows`): a warp's 16-byte loads
cover 32 rows, the stores of one K row go to 32 consecutive columns, 32 banks. Compile time:
the body is 2,048 FFMA statements, and Numba's SSA and lowering passes grow with the square of a
block's variables; each K row is written inside a one-trip loop (`rows_apart`), which LLVM removes
and which keeps Numba's passes linear in the rows. Where 16-byte accesses are not legal, and for
products whose M or grid is small (a 256×128 tile pads more and fills fewer SMs) or whose waves of
256×128 tiles would take longer than k15's (counted in k15's tile times), k15 runs. It is the FP32
`auto` rung; its machine code is cached on disk after the first compile (k14's `source_file`).

Global traffic by design (elements; s the element size):
    reads  = M·K·ceil(N/128) + K·N·ceil(M/256),  writes = M·N
    intensity ≈ 2/(s·(1/256 + 1/128)) = 512/(3s) FLOP/byte (about 43 FLOP/B in FP32; k15: 32)
"""

from __future__ import annotations

from ...registry import ceil_div
from . import k10_warptile as k10
from . import k13_splitk_tiles as k13
from . import k14_unrolled as k14
from . import k15_register_budget as k15

DEFAULT = k14.Config(BM=256, BN=128, BK=16, WM=128, WN=32, min_blocks=1, pad=0, rows_apart=True, lane_rows=True)
launch_config = k14.launch_config  # a configuration of it, changed (`tilegemm counters big_tile:FIELD=value`)
SPEEDUP = 1.08  # k16's tile against k15's where both fill the SMs: 85.3% of cuBLAS against 79.1% (perf-notes 57)


def here(m: int, n: int, k: int, vector: bool) -> bool:
    """Its own kernel where 16-byte accesses are legal, the 256×128 tiles fill the SMs at least
    once, and its waves take no longer than k15's (else k15 and what it hands on). Both run one
    block an SM, a wave takes as long as its tiles, and a 256×128 tile takes 2/SPEEDUP of a 128×128
    one, half-empty or not."""
    if not (vector and k15.here(m, n, k, vector)):
        return False
    sms = k13.sm_count()
    tiles = ceil_div(m, DEFAULT.BM) * ceil_div(n, DEFAULT.BN)
    small = ceil_div(m, k15.DEFAULT.BM) * ceil_div(n, k15.DEFAULT.BN)
    return tiles >= sms and 2 * ceil_div(tiles, sms) <= SPEEDUP * ceil_div(small, sms)


def launch(a, b, c, stream=None):
    m, n = c.shape
    if not here(m, n, a.shape[1], k10.vector_ok(a, b, c)):
        return k15.launch(a, b, c, stream)
    k14.run_config(DEFAULT, a, b, c, stream)  # here() holds only where vector_ok does


def traffic(m, n, k, s):
    if not here(m, n, k, k10.vector_shape_ok(k, n, s)):
        return k15.traffic(m, n, k, s)
    return k10.traffic_for(DEFAULT)(m, n, k, s)


NT = DEFAULT.threads


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [k14.kernel_for(dt, DEFAULT)]
