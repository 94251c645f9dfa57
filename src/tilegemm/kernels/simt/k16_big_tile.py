"""k16 a bigger thread tile: 16×8 outputs a thread in 256×128 block tiles, 16 K rows a barrier.

Changes against k15: what the freed registers are spent on. k15 gave k14's 8×8 thread tile the
registers it needed (well under 255: the resource table in docs/ladder.md) and left the rest
unused; here a thread keeps 16×8 = 128 accumulators (a warp tile of 128×32, eight warps a 256×128
block tile, one block per SM: up to 255 registers), and a K step is 16 rows instead of 8. Per K
row a thread issues 6 LDS.128 for 128 FFMA (k15: 4 for 64), and per barrier 2,048 FFMA (k15:
512): with 8 warps an SM, every barrier idles all of them until the slowest arrives, so a quarter
of the barriers per FFMA is the change that matters. Either half alone did not pay on the H200
(256×128 tiles at BK = 8, or BK = 16 at 128×128: docs/perf-notes.md, 56).

Attacks: barrier stalls per FFMA (a quarter as many barriers), and shared loads per FFMA (6 per
128 FFMA against 4 per 64).

Two things the size forces. Shared memory: two 16-row buffers of A (256 wide) and B (128 wide)
are 48 KiB, the most a kernel may declare statically, so A's transposed tile has no padding
(`pad` = 0). Loaded as k14 loads it (a warp's float4s from 8 rows of A, 4 along K each), its
stores to the transposed tile would meet 4-way bank conflicts, and they are what every warp does
just before the barrier. So each lane loads a row of its own (`lane_rows`): a warp's 16-byte loads
cover 32 rows, the stores of one K row go to 32 consecutive columns, 32 banks. Compile time:
the body is 2,048 FFMA statements, and Numba's SSA and lowering passes grow with the square of a
block's variables; each K row is written inside a one-trip loop (`rows_apart`), which LLVM removes
and which keeps Numba's passes linear in the rows. Where k13's wave model rates k15's kernel or
k13's plan faster (a 256×128 tile pads more, fills fewer SMs and quantises into coarser waves),
k15 runs, and hands on. Where 16-byte accesses are not legal (K or N not a multiple of 4, a pointer
off 16 bytes), A and B are first copied, padded with zeros, and C, where its rows are off, is
computed into padded rows and copied out (only what needs it; `copy_shape`): to whole tiles and K
steps where k16 takes the padded product, else to N and K rounded up to 4 for k15's launch, where
the copies cost at most a third of the product; elsewhere the scalar forms run (k15's variant;
k12's kernel up to 128 rows). The copies
are scratch that calls keep (`_common.scratch`; a launch plan's own for torch operands), and on
them every tile loads and stores 16 bytes at a time (k16's kernel unguarded but on C's edges).
k17 (the FP32 `auto` rung) plans its kernel beside smaller split-K tiles; its machine code is cached on disk after the first compile (k14's
`source_file`).

Global traffic by design (elements; s the element size):
    reads  = M·K·ceil(N/128) + K·N·ceil(M/256),  writes = M·N
    intensity ≈ 2/(s·(1/256 + 1/128)) = 512/(3s) FLOP/byte (about 43 FLOP/B in FP32; k15: 32)
and where the operands are copied (M', N', K': rounded up to whole tiles and K steps for k16's
kernel; M, and N and K rounded up to 4, for k15's launch), the copies read M·K + K·N + M·N' and
write M'·K' + K'·N' + M·N, and the product's traffic is its kernel's on M'×N'×K' (k16's: reads
M'·K'·N'/128 + K'·N'·M'/256, writes M·N').
"""

from __future__ import annotations

from numba import cuda

from ...registry import ceil_div
from . import k10_warptile as k10
from . import k12_skinny_m as k12
from . import k13_splitk_tiles as k13
from . import k14_unrolled as k14
from . import k15_register_budget as k15
from ._common import configure, scratch
from ._jit import kernel
from ._vec import at_or0, put_in

DEFAULT = k14.Config(BM=256, BN=128, BK=16, WM=128, WN=32, min_blocks=1, pad=0, rows_apart=True, lane_rows=True)
launch_config = k14.launch_config  # a configuration of it, changed (`tilegemm counters big_tile:FIELD=value`)
source = k14.source  # a configuration's generated text (`tilegemm kernels --source big_tile`: DEFAULT's)
RATE = 159_600.0  # FMA per µs per SM in k13's wave model (fitted with k13's tiles and k15's: k13.TILES)


def estimate_us(m: int, n: int, k: int, sms: int) -> float:
    """k13's wave model of k16's own kernel: 256×128 tiles, one block per SM, K unsplit."""
    return k13.WAVES.us(m, n, k, DEFAULT.BM, DEFAULT.BN, 1, RATE, 1, sms)


def here(m: int, n: int, k: int, vector: bool) -> bool:
    """Its own kernel where 16-byte accesses are legal and k13's wave model rates it no slower than
    k15's kernel and k13's plan (else k15 and what it hands on): its bigger tiles are faster per
    multiply-add, and fewer, so they fill the SMs later and quantise into coarser waves."""
    if not vector or m <= k13.SKINNY_ROWS:
        return False
    sms = k13.sm_count()
    own = estimate_us(m, n, k, sms)
    p = k13.plan(m, n, k, sms)
    return own <= k15.estimate_us(m, n, k, sms) and (p is None or own <= p.us)


def round4(x: int) -> int:
    return ceil_div(x, 4) * 4


def padded_shape(m: int, n: int, k: int) -> tuple[int, int, int]:
    """M, N and K rounded up to whole tiles (BM, BN) and K steps (BK): copies of that size load
    every tile through the unguarded, 16-byte path; only C's stores are guarded on its edges."""
    cfg = DEFAULT
    return ceil_div(m, cfg.BM) * cfg.BM, ceil_div(n, cfg.BN) * cfg.BN, ceil_div(k, cfg.BK) * cfg.BK


COPY_BYTES_PER_US = 3.9e6  # the copies' pace: 6% of 4095×4097×1023's 874 µs for its 201 MB (perf-notes 61)
COPY_FIXED_US = 2.0  # a launch's floor, per copy
PAYBACK = 3  # copies pay where they cost at most a third of the product: the scalar forms took 1.25–1.6×
# the vector ones' time (results/h200/simt-plans.json)


def copy_shape(m: int, n: int, k: int, itemsize: int) -> tuple[tuple[int, int, int], bool] | None:
    """Rows off 16 bytes: the shape to copy A and B into (padded with zeros) and to compute C in
    (its rows padded likewise, copied out) for the 16-byte kernels, and whether k16's own kernel
    takes it (else k15's launch: its kernel or k13's plan); None where copies do not pay and the
    scalar forms run (k15's variant; k12's kernel up to 128 rows). Whole tiles and K steps where
    k16 takes the padded product and K's padding is at most K/16 (every tile then loads through
    the unguarded path; the padding adds products of zeros); elsewhere N and K rounded up to 4,
    where the wave model's estimate of the product is at least PAYBACK times the copies' (each
    operand read and written once, each a launch). Never at M ≤ 16: k12's kernel serves any
    alignment and reads B once."""
    if itemsize != 4 or k < DEFAULT.BK or m <= k13.SKINNY_ROWS:
        return None
    n4, k4 = round4(n), round4(k)
    mp, np_, kp = padded_shape(m, n, k)
    if here(m, n4, k4, True) and kp - k <= k // 16:
        return (mp, np_, kp), True
    sms = k13.sm_count()
    p = k13.plan(m, n4, k4, sms)
    product_us = p.us if p is not None and not k15.here(m, n4, k4, True) else k15.estimate_us(m, n4, k4, sms)
    return ((m, n4, k4), False) if PAYBACK * copies_us(m, n, k, itemsize) <= product_us else None


def copies_us(m: int, n: int, k: int, itemsize: int) -> float:
    """The copies' time, A, B and C each read and written once, each a launch."""
    return 3 * COPY_FIXED_US + 2 * itemsize * (m * k + k * n + m * n) / COPY_BYTES_PER_US


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
    route = copy_shape(m, n, k, c.dtype.itemsize)
    if route is None:
        return k15.launch(a, b, c, stream)
    shape, own = route
    if own:
        done = run_on_copies(a, b, c, shape, lambda a, b, out: k14.run_config(DEFAULT, a, b, out, stream), stream)
    else:  # k15's kernel or k13's plan, on 16-byte rows
        done = run_on_copies(a, b, c, shape, lambda a, b, out: k15.launch(a, b, out, stream), stream)
    if not done:  # no scratch to be had (a CUDA graph's capture, or the memory): a form that needs none
        k15.launch(a, b, c, stream)


def run_on_copies(a, b, c, shape: tuple[int, int, int], run, stream=None) -> bool:
    """C = A @ B through copies: A and B copied, padded with zeros, into scratch of shape (M', N',
    K') where that differs from theirs or they are off 16 bytes, and C computed in rows of N'
    where its own rows are off 16 bytes (then copied out); run(a', b', out) makes the product.
    False where no scratch can be had (nothing is launched then)."""
    m, n = c.shape
    k = a.shape[1]
    mp, np_, kp = shape  # the extra rows and columns are zeros: they add nothing to C
    copy_a = (mp, kp) != (m, k) or not k10.aligned16(a)
    copy_b = (kp, np_) != (k, n) or not k10.aligned16(b)
    copy_c = n % 4 != 0 or not k10.aligned16(c)  # one-element stores on rows off 16 bytes cost 7% (perf-notes 61)
    bufs = scratch([(mp, kp)] * copy_a + [(kp, np_)] * copy_b + [(m, np_)] * copy_c, c.dtype, stream)
    if bufs is None:
        return False
    bufs = iter(bufs)
    if copy_a:
        a_in, a = a, next(bufs)
        copy_padded(a_in, a, stream)
    if copy_b:
        b_in, b = b, next(bufs)
        copy_padded(b_in, b, stream)
    out = next(bufs) if copy_c else c
    run(a, b, out)
    if copy_c:
        copy_padded(out, c, stream)  # C's columns of the padded rows
    return True


def traffic(m, n, k, s):
    if k10.vector_shape_ok(k, n, s):
        return k10.traffic_for(DEFAULT)(m, n, k, s) if here(m, n, k, True) else k15.traffic(m, n, k, s)
    route = copy_shape(m, n, k, s)
    if route is None:
        return k15.traffic(m, n, k, s)
    (mp, np_, kp), own = route
    nc = np_ if n % 4 else n  # C's rows as the kernel stores them
    if own:
        product = (mp * kp * ceil_div(np_, DEFAULT.BN) + kp * np_ * ceil_div(mp, DEFAULT.BM) + m * nc) * float(s)
    else:  # k15's launch on the copies: its traffic for them, C's rows as it stores them
        product = k15.traffic(mp, nc, kp, s)
    return product + copied_elements(m, n, k, (mp, np_, kp)) * float(s)


def copied_elements(m: int, n: int, k: int, shape: tuple[int, int, int]) -> int:
    """Elements the copies of `run_on_copies` read and write (each copy read once and written once)
    where the shape alone asks for them (rows off 16 bytes: K or N not a multiple of 4; padding)."""
    mp, np_, kp = shape
    a_copy = m * k + mp * kp if (mp, kp) != (m, k) else 0
    b_copy = k * n + kp * np_ if (kp, np_) != (k, n) else 0
    c_copy = m * np_ + m * n if n % 4 else 0
    return a_copy + b_copy + c_copy


NT = DEFAULT.threads


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [k14.kernel_for(dt, DEFAULT)]


def describe(m: int, n: int, k: int, itemsize: int, vector: bool) -> str:
    """What k16's routing runs for this product, and the wave model's estimates behind it
    (`tilegemm.explain`)."""
    def split(s: int) -> str:
        return f"K split {s} ways" if s > 1 else "K unsplit"

    route = None if vector else copy_shape(m, n, k, itemsize)
    if m <= k13.SKINNY_ROWS or (route is None and not vector and m <= k12.SKINNY_MAX):
        rm, splits, _ = k12.plan(m, n, k)
        why = f"M ≤ {k13.SKINNY_ROWS}" if m <= k13.SKINNY_ROWS else "rows off 16 bytes: its loads serve any alignment"
        return f"k12's one-column kernel: {rm} rows a block, {split(splits)} ({why})"
    if not vector:
        if route is None:
            return "k15's scalar kernel: rows off 16 bytes, and copies into aligned rows would not pay"
        (mp, np_, kp), _ = route
        return f"copies into 16-byte rows ({mp}×{kp} and {kp}×{np_}), then " + describe(mp, np_, kp, itemsize, True)
    sms = k13.sm_count()
    p = k13.plan(m, n, k, sms)
    rivals = f"k16's kernel {estimate_us(m, n, k, sms):.0f} µs, k15's {k15.estimate_us(m, n, k, sms):.0f}"
    if p is not None:
        rivals += f", k13's plan {p.us:.0f}"
    if here(m, n, k, True):
        what = "k16's kernel: 256×128 tiles"
    elif k15.here(m, n, k, True):
        what = "k15's kernel: 128×128 tiles"
    else:
        what = f"k13's plan: {p.cfg.BM}×{p.cfg.BN} tiles, {split(p.splits)}"
    return f"{what} (wave model, {sms} SMs: {rivals})"
