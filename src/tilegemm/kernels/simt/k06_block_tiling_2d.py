"""k06 2-D block tiling, larger: 16×16 threads compute a 128×128 tile of C, each thread 8×8.

Changes against k05: the tile each thread owns grows from 4×4 to TM×TN = 8×8 (and the block's
from 64×64 to BM×BN = 128×128, with BK = 8 so the shared tiles stay 8 KiB). Per step along K a
thread now stages 4 elements of A and 4 of B (interior blocks unguarded, edges zero-padded as in
k05), and for each p loads TM + TN = 16 words from shared memory for TM·TN = 64 FMAs: 4 FMAs
per shared load instead of k05's 2. Thread (ty, tx) still owns rows ty + 16·i and columns
tx + 16·j, so the scalar shared reads stay conflict-free (a warp reads two rows of A, each a
broadcast, and 16 consecutive words of B) and the stores to C coalesce.

One code-generation detail comes with it: the inner loop reads shared memory through `at()`
(_vec.py) instead of `sA[r, p]`. Numba guards every signed index it cannot prove non-negative
with wraparound code (`r < 0 ? r + shape : r`, 64-bit); with 16 reads per p that roughly doubles
the inner loop's instructions, so the larger tile would buy nothing. Same reads, same order.

Attacks: shared-memory bandwidth and issue slots per FMA (k05 spends 8 LDS per 16 FFMA), and
global traffic:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM) ≈ 2·M·N·K / 128 elements   (BM = BN = 128)
    writes = M·N elements
    intensity ≈ 2MNK / ((2MNK/128 + MN)·s) ≈ 128/s FLOP/byte (32 FLOP/B in FP32)
Cost: 64 accumulators plus 16 operands per thread. Left alone the compiler takes more than 128
registers, so only one block of 8 warps fits an SM (two blocks of 256 threads leave 65536 / 512
= 128 registers a thread); the FP32 kernel is compiled with launch bounds (256 threads, 2 blocks
per SM), which caps it at 128 registers. (FP64 needs 128 for its
accumulators alone and keeps the compiler's choice.) The later rungs inherit the bound.
"""

from numba import cuda

from ...registry import ceil_div
from ._common import SIMT_DTYPES, configure, grid_2d, per_dtype
from ._jit import kernel
from ._vec import at

BM = 128  # rows of C per block
BN = 128  # columns of C per block
BK = 8  # depth of a shared tile along K
TM = 8  # rows of C per thread
TN = 8  # columns of C per thread
TX = BN // TN  # 16 threads along N
TY = BM // TM  # 16 threads along M
NT = TX * TY
MIN_BLOCKS = 2  # FP32 launch bound: ≤ 128 registers, so 2 blocks of 256 threads fit an SM
A_LOADS = BM * BK // NT
B_LOADS = BK * BN // NT
assert BM * BK % NT == 0 and BK * BN % NT == 0, "tiles must split evenly over the threads"


@per_dtype
def kernel_for(DT):
    @kernel(launch_bounds=(NT, MIN_BLOCKS) if DT.bitwidth == 32 else None)
    def block_tiling_2d(A, B, C):
        sA = cuda.shared.array((BM, BK), DT)
        sB = cuda.shared.array((BK, BN), DT)
        acc = cuda.local.array((TM, TN), DT)
        ra = cuda.local.array(TM, DT)
        rb = cuda.local.array(TN, DT)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * TX + tx
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        M = A.shape[0]
        K = A.shape[1]
        N = B.shape[1]
        interior = m0 + BM <= M and n0 + BN <= N
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)
        for k0 in range(0, K, BK):
            if interior and k0 + BK <= K:
                for l in range(A_LOADS):
                    e = tid + l * NT
                    sA[e // BK, e % BK] = A[m0 + e // BK, k0 + e % BK]
                for l in range(B_LOADS):
                    e = tid + l * NT
                    sB[e // BN, e % BN] = B[k0 + e // BN, n0 + e % BN]
            else:
                for l in range(A_LOADS):
                    e = tid + l * NT
                    r = e // BK
                    q = e % BK
                    sA[r, q] = A[m0 + r, k0 + q] if m0 + r < M and k0 + q < K else DT(0)
                for l in range(B_LOADS):
                    e = tid + l * NT
                    r = e // BN
                    q = e % BN
                    sB[r, q] = B[k0 + r, n0 + q] if k0 + r < K and n0 + q < N else DT(0)
            cuda.syncthreads()
            for p in range(BK):
                for i in range(TM):
                    ra[i] = at(sA, ty + i * TY, p)
                for j in range(TN):
                    rb[j] = at(sB, p, tx + j * TX)
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += ra[i] * rb[j]
            cuda.syncthreads()
        if interior:
            for i in range(TM):
                for j in range(TN):
                    C[m0 + ty + i * TY, n0 + tx + j * TX] = acc[i, j]
        else:
            for i in range(TM):
                row = m0 + ty + i * TY
                for j in range(TN):
                    col = n0 + tx + j * TX
                    if row < M and col < N:
                        C[row, col] = acc[i, j]

    return block_tiling_2d


def launch(a, b, c, stream=None):
    m, n = c.shape
    configure(kernel_for(c.dtype), grid_2d(m, n, BM, BN), (TX, TY), stream)(a, b, c)


def traffic(m, n, k, s):
    return (m * k * ceil_div(n, BN) + k * n * ceil_div(m, BM) + m * n) * float(s)


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt)]
