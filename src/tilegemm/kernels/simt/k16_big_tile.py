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
and which keeps Numba's passes linear in the rows. For products whose M or grid is small (a
256×128 tile pads more and fills fewer SMs) or whose waves of 256×128 tiles would take longer than
k15's (counted in k15's tile times), k15 runs. Where 16-byte accesses are not legal (K or N not a
multiple of 4, a pointer off 16 bytes) and k16 would take the padded product, A and B are first
copied, padded with zeros to whole tiles and K steps, and C, where its rows are off, is computed into
rows padded to whole tiles and copied out (only what needs it; `copies_pay`, else k15's scalar
variant). The copies are scratch that calls keep (`_common.scratch`; a launch plan's own for torch
operands), and on them every tile loads and stores 16 bytes at a time, unguarded but on C's edges.
It is the FP32 `auto` rung; its machine code is cached on disk after the first compile (k14's
`source_file`).

Global traffic by design (elements; s the element size):
    reads  = M·K·ceil(N/128) + K·N·ceil(M/256),  writes = M·N
    intensity ≈ 2/(s·(1/256 + 1/128)) = 512/(3s) FLOP/byte (about 43 FLOP/B in FP32; k15: 32)
and where the operands are copied (M', N', K': rounded up to whole tiles and K steps), the copies
read M·K + K·N + M·N' and write M'·K' + K'·N' + M·N, and the product reads M'·K'·N'/128 +
K'·N'·M'/256 and writes M·N'.
"""

from __future__ import annotations

from numba import cuda

from ...registry import ceil_div
from . import k10_warptile as k10
from . import k13_splitk_tiles as k13
from . import k14_unrolled as k14
from . import k15_register_budget as k15
from ._common import configure, scratch
from ._jit import kernel
from ._vec import at_or0, put_in

DEFAULT = k14.Config(BM=256, BN=128, BK=16, WM=128, WN=32, min_blocks=1, pad=0, rows_apart=True, lane_rows=True)
launch_config = k14.launch_config  # a configuration of it, changed (`tilegemm counters big_tile:FIELD=value`)
source = k14.source  # a configuration's generated text (`tilegemm kernels --source big_tile`: DEFAULT's)
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


def round4(x: int) -> int:
    return ceil_div(x, 4) * 4


def padded_shape(m: int, n: int, k: int) -> tuple[int, int, int]:
    """M, N and K rounded up to whole tiles (BM, BN) and K steps (BK): copies of that size load
    every tile through the unguarded, 16-byte path; only C's stores are guarded on its edges."""
    cfg = DEFAULT
    return ceil_div(m, cfg.BM) * cfg.BM, ceil_div(n, cfg.BN) * cfg.BN, ceil_div(k, cfg.BK) * cfg.BK


def copies_pay(m: int, n: int, k: int, itemsize: int) -> bool:
    """Rows off 16 bytes: copy A and B, padded with zeros to whole tiles, compute C into rows
    padded likewise and copy it out, where k16 takes the padded product. The copies read and
    write each operand once, 6% of the product's time at 4095×4097×1023 (perf-notes 61), against
    k15's scalar variant (one-element loads and stores), which runs else. K padded to whole K
    steps adds products of zeros: at most K/16 of them."""
    kp = padded_shape(m, n, k)[2]
    return itemsize == 4 and k >= DEFAULT.BK and kp - k <= k // 16 and here(m, round4(n), round4(k), True)


@kernel()
def _copy_padded(src, dst):
    """dst = src in its top-left corner, zeros elsewhere. A block copies 8 rows of 128 elements:
    each warp 32 neighbours at a time (coalesced, on rows off 16 bytes too), each thread four
    loads in flight before its four stores."""
    i = cuda.blockIdx.y * 8 + cuda.threadIdx.y
    j = cuda.blockIdx.x * 128 + cuda.threadIdx.x
    v0 = at_or0(src, i, j)
    v1 = at_or0(src, i, j + 32)
    v2 = at_or0(src, i, j + 64)
    v3 = at_or0(src, i, j + 96)
    put_in(dst, i, j, v0)
    put_in(dst, i, j + 32, v1)
    put_in(dst, i, j + 64, v2)
    put_in(dst, i, j + 96, v3)


def copy_padded(src, dst, stream=None) -> None:
    configure(_copy_padded, (ceil_div(dst.shape[1], 128), ceil_div(dst.shape[0], 8)), (32, 8), stream)(src, dst)


def launch(a, b, c, stream=None):
    m, n = c.shape
    k = a.shape[1]
    if k10.vector_ok(a, b, c):
        if here(m, n, k, True):
            return k14.run_config(DEFAULT, a, b, c, stream)
        return k15.launch(a, b, c, stream)
    if not copies_pay(m, n, k, c.dtype.itemsize):
        return k15.launch(a, b, c, stream)
    mp, np_, kp = padded_shape(m, n, k)  # the extra rows and columns are zeros: they add nothing to C
    copy_a = (mp, kp) != (m, k) or not k10.aligned16(a)
    copy_b = (kp, np_) != (k, n) or not k10.aligned16(b)
    copy_c = n % 4 != 0 or not k10.aligned16(c)  # one-element stores on rows off 16 bytes cost 7% (perf-notes 61)
    bufs = scratch([(mp, kp)] * copy_a + [(kp, np_)] * copy_b + [(m, np_)] * copy_c, c.dtype, stream)
    if bufs is None:  # no scratch to be had (a CUDA graph's capture, or the memory): a form that needs none
        return k15.launch(a, b, c, stream)
    bufs = iter(bufs)
    if copy_a:
        a_in, a = a, next(bufs)
        copy_padded(a_in, a, stream)
    if copy_b:
        b_in, b = b, next(bufs)
        copy_padded(b_in, b, stream)
    out = next(bufs) if copy_c else c
    k14.run_config(DEFAULT, a, b, out, stream)
    if copy_c:
        copy_padded(out, c, stream)  # C's columns of the padded rows


def traffic(m, n, k, s):
    if k10.vector_shape_ok(k, n, s):
        return k10.traffic_for(DEFAULT)(m, n, k, s) if here(m, n, k, True) else k15.traffic(m, n, k, s)
    if not copies_pay(m, n, k, s):
        return k15.traffic(m, n, k, s)
    mp, np_, kp = padded_shape(m, n, k)
    a_copy = m * k + mp * kp if (mp, kp) != (m, k) else 0  # each copy read once and written once
    b_copy = k * n + kp * np_ if (kp, np_) != (k, n) else 0
    nc = np_ if n % 4 else n  # C's rows as the kernel stores them
    c_copy = m * np_ + m * n if n % 4 else 0
    product = mp * kp * ceil_div(np_, DEFAULT.BN) + kp * np_ * ceil_div(mp, DEFAULT.BM) + m * nc
    return (product + a_copy + b_copy + c_copy) * float(s)


NT = DEFAULT.threads


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [k14.kernel_for(dt, DEFAULT)]
