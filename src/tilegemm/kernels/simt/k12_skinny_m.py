"""k12 skinny M: a split-K, one-column-per-thread path for products with few rows (decode shapes).

Changes against k11: nothing for M > SKINNY_MAX (k11 runs). For M ≤ SKINNY_MAX the 128×128
tiles of k06–k11 are the wrong shape: at M = 16, N = 4096 a tile is 7/8 padding and N/128 = 32
blocks leave most of 132 SMs idle. Here a block of 256 threads owns RM rows × 256 columns, one
column per thread with RM accumulators in registers; it stages an RM×KC slice of A in shared memory,
transposed so that four rows of one k are one 16-byte broadcast load (LDS.128: an SM issues one
warp-wide shared load per clock, so RM scalar loads per B element would bound the kernel), and
streams its column of B straight from global memory (a warp reads 32 consecutive words:
coalesced), one B element per RM multiply-adds. With RM = 4 four rows of B are loaded before they
are used (one load per warp in flight cannot cover DRAM latency: Little's law wants ~20 KB in
flight per SM); with RM = 16 the extra registers cost more occupancy than the loads gained. K is split over
`splits` blocks (grid z) so that the grid fills the GPU; the partial sums meet in C through
atomic adds (C is zeroed first; the order of the additions, and so the last bits, varies).

Attacks: idle SMs and padded rows on skinny products, which are bound by reading B, not by FLOPs.
Global traffic by design (RM = 4 when M ≤ 4, else 16 — 32 rows took 128 registers and left two
blocks per SM, too few warps to hide the latency of streaming B; BNS = 256 columns per block):
    reads  = K·N·ceil(M/RM) (B, once per row block) + M·K·ceil(N/BNS) (A) elements
    writes = M·N (zeroing) + 2·M·N·splits (atomic read-modify-write) elements; M·N with one split
Arithmetic intensity ≈ 2·M·K·N / (K·N·ceil(M/RM)·s) ≈ 2·min(M, RM)/s FLOP/byte: at M = 1 it is
0.5 FLOP/B, so the kernel runs at DRAM speed at best (the floor is reading B once).
"""

import functools

from numba import cuda, types

from ...registry import ceil_div
from ._common import configure, per_dtype, sm_count
from ._vec import SMEM_ALIGN, at, lds4
from . import k11_autotuned as k11

SKINNY_MAX = 128  # above this many rows the tiled rungs win
BNS = 256  # columns (threads) per block
KC = 64  # K depth of the staged A slice
RESIDENT = {4: 8, 16: 4}  # rows a block -> blocks an SM holds at once (32 and 64 registers a thread: the resource table)


def _rows_for(m: int) -> int:
    return 4 if m <= 4 else 16


def _factory(RM, UNROLL):
    def factory(DT):
        @cuda.jit
        def skinny_m(A, B, C, KS, ATOMIC):
            sAT = cuda.shared.array((KC, RM), DT, alignment=SMEM_ALIGN)  # A's slice, transposed
            acc = cuda.local.array(RM, DT)
            bq = cuda.local.array(4, DT)
            tx = cuda.threadIdx.x
            j = cuda.blockIdx.x * BNS + tx
            m0 = cuda.blockIdx.y * RM
            M = A.shape[0]
            K = A.shape[1]
            N = B.shape[1]
            k_begin = cuda.blockIdx.z * KS
            k_end = min(K, k_begin + KS)
            for r in range(RM):
                acc[r] = DT(0)
            for kc in range(k_begin, k_end, KC):
                for l in range(RM * KC // BNS):  # stage A[m0:m0+RM, kc:kc+KC], zero-padded
                    e = tx + l * BNS
                    r = e // KC
                    q = e % KC
                    sAT[q, r] = A[m0 + r, kc + q] if m0 + r < M and kc + q < k_end else DT(0)
                cuda.syncthreads()
                if j < N:
                    nq = min(KC, k_end - kc)
                    q = 0
                    while UNROLL and q + 4 <= nq:  # four loads of B in flight before the FMAs
                        bq[0] = at(B, kc + q, j)
                        bq[1] = at(B, kc + q + 1, j)
                        bq[2] = at(B, kc + q + 2, j)
                        bq[3] = at(B, kc + q + 3, j)
                        for u in range(4):
                            for r4 in range(RM // 4):  # four rows of A per 16-byte shared load
                                a0, a1, a2, a3 = lds4(sAT, q + u, 4 * r4)
                                acc[4 * r4] += a0 * bq[u]
                                acc[4 * r4 + 1] += a1 * bq[u]
                                acc[4 * r4 + 2] += a2 * bq[u]
                                acc[4 * r4 + 3] += a3 * bq[u]
                        q += 4
                    while q < nq:
                        b = at(B, kc + q, j)
                        for r4 in range(RM // 4):
                            a0, a1, a2, a3 = lds4(sAT, q, 4 * r4)
                            acc[4 * r4] += a0 * b
                            acc[4 * r4 + 1] += a1 * b
                            acc[4 * r4 + 2] += a2 * b
                            acc[4 * r4 + 3] += a3 * b
                        q += 1
                cuda.syncthreads()
            if j < N:
                for r in range(RM):
                    if m0 + r < M:
                        if ATOMIC:
                            cuda.atomic.add(C, (m0 + r, j), acc[r])
                        else:
                            C[m0 + r, j] = acc[r]

        skinny_m.extra_args = (types.int64, types.int64)  # KS, ATOMIC: for the SASS tooling
        return skinny_m

    return factory


# Measured on the H200 (results/h200/ladder_llm.json and the run before it): unrolling by four
# lifted M = 1 but cost M = 16 and 32 (65 registers, three blocks per SM instead of four), so only
# the 4-row variant unrolls.
kernel_for = {4: per_dtype(_factory(4, True)), 16: per_dtype(_factory(16, False))}


@per_dtype
def zero_for(DT):
    @cuda.jit
    def zero(C):
        """C = 0: x along a row (a warp's stores one 128-byte run in FP32), y down the rows."""
        j, i = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            C[i, j] = DT(0)

    return zero


ZERO_EACH = 8  # elements a thread zeroes in the flat form


@per_dtype
def zero_flat_for(DT):
    @cuda.jit
    def zero_flat(C):
        """C = 0 for a contiguous C seen as one row: each thread ZERO_EACH elements a block apart
        (every warp's stores one 128-byte run in FP32), an eighth of the one-element form's blocks."""
        i = cuda.blockIdx.x * cuda.blockDim.x * ZERO_EACH + cuda.threadIdx.x
        for _ in range(ZERO_EACH):
            if i < C.shape[0]:
                C[i] = DT(0)
            i += cuda.blockDim.x

    return zero_flat


def zero(c, stream=None) -> None:
    """C = 0, before split-K's partial sums are added into it: a contiguous C as one flat row
    (block launches were most of the one-element form's time: 6.5 µs at 100×12345 on the H200,
    perf-notes 74), any other (and an array that cannot say, as the traffic counter's wrapper) one
    element a thread."""
    m, n = c.shape
    contiguous = getattr(c, "is_c_contiguous", None)
    if contiguous is not None and contiguous():
        configure(zero_flat_for(c.dtype), (max(1, ceil_div(m * n, 256 * ZERO_EACH)),), 256, stream)(c.reshape(m * n))
        return
    configure(zero_for(c.dtype), (ceil_div(n, 32), ceil_div(m, 8)), (32, 8), stream)(c)


def plan(m: int, n: int, k: int, sms: int | None = None) -> tuple[int, int, int]:
    """(RM, splits, KS): rows per block, K splits, K per split (a multiple of KC). The most splits
    whose blocks fit the SMs' resident slots once, not counting a last slice shorter than half a
    slice: a second round of blocks with real work costs a round (on the H200 16×28672×8192 took
    858 µs at 5 splits, 560 blocks for 528 slots, and 618 µs at 4), a short last slice does not
    (16×14336×4096: 148 µs at 10 splits, the last 64 deep, 165 µs at 8; results/h200/simt-plans.json)."""
    return _plan(m, n, k, sms or sm_count())


@functools.lru_cache(maxsize=4096)
def _plan(m: int, n: int, k: int, sms: int) -> tuple[int, int, int]:
    rm = _rows_for(m)
    blocks = ceil_div(n, BNS) * ceil_div(m, rm)
    slots = RESIDENT[rm] * sms
    chunks = ceil_div(k, KC)
    best = (1, chunks * KC)
    for want in range(2, chunks + 1):
        ks = ceil_div(chunks, want) * KC
        splits = ceil_div(k, ks)
        last = k - (splits - 1) * ks
        if blocks * (splits - (2 * last < ks)) <= slots:
            best = max(best, (splits, ks))
    splits, ks = best
    return rm, splits, ks


def launch(a, b, c, stream=None):
    m, n = c.shape
    k = a.shape[1]
    if m > SKINNY_MAX:
        return k11.launch(a, b, c, stream)
    rm, splits, ks = plan(m, n, k)
    if splits > 1:
        zero(c, stream)
    grid = (ceil_div(n, BNS), ceil_div(m, rm), splits)
    configure(kernel_for[rm](c.dtype), grid, (BNS,), stream)(a, b, c, ks, 1 if splits > 1 else 0)


def traffic(m, n, k, s):
    if m > SKINNY_MAX:
        return k11.traffic(m, n, k, s)
    rm, splits, _ = plan(m, n, k)
    writes = m * n + (2 * m * n * splits if splits > 1 else 0)  # one split: C written once, no zeroing
    return (k * n * ceil_div(m, rm) + m * k * ceil_div(n, BNS) + writes) * float(s)


def threads_for(kernel) -> int:
    """Block size of the compiled kernels, for the resource table (it showed None): BNS threads,
    one column of C each."""
    return BNS


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for[16](dt), kernel_for[4](dt)]


def describe(m: int, n: int, k: int, itemsize: int, vector: bool) -> str:
    """What k12 runs for this product (`tilegemm.explain`)."""
    if m > SKINNY_MAX:
        return (f"k11's tiles (M > {SKINNY_MAX}: k12's kernel is for few rows): "
                + k11.describe(m, n, k, itemsize, vector))
    rm, splits, _ = plan(m, n, k)
    return f"k12's one-column kernel: {rm} rows a block, " + (f"K split {splits} ways" if splits > 1 else "K unsplit")
