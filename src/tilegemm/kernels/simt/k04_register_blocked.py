"""k04 register blocking: 16×16 threads compute a 64×64 tile of C, each thread a 4×4 block.

Changes against k02: a thread now owns TM×TN = 4×4 outputs held in registers. Per step along K
the block stages a 64×16 tile of A and a 16×64 tile of B in shared memory (4 + 4 elements
loaded per thread, with zero padding at the edges); then for each of the 16 values of p a
thread loads 4 values of A and 4 of B from shared memory into registers and does 16 FMAs with
them: 8 shared loads per 16 FMAs instead of k02's 2 per 1. Thread (ty, tx) owns rows
ty + 16·i and columns tx + 16·j (i, j < 4), so each shared read is a broadcast or 16
consecutive words, free of bank conflicts, and the stores to C are coalesced.

Attacks: shared-memory bandwidth per FMA (the limit of k02), and global traffic again:
    reads  = M·K·ceil(N/64) + K·N·ceil(M/64) ≈ 2·M·N·K / 64 elements
    writes = M·N elements
Arithmetic intensity ≈ 64/s FLOP/byte against global memory (16 FLOP/B in FP32), and
2·TM·TN / (TM + TN) = 4 FLOP (2 FMAs) per shared word against shared memory.
This is the register-blocking step that GPU courses teach after shared-memory tiling.
"""

from numba import cuda

from ...registry import ceil_div
from ._common import SIMT_DTYPES, configure, grid_2d, per_dtype

BM = 64  # rows of C per block
BN = 64  # columns of C per block
BK = 16  # depth of a shared tile along K
TM = 4  # rows of C per thread
TN = 4  # columns of C per thread
THREADS = (BN // TN, BM // TM)  # (16, 16): x along columns, y along rows
NT = THREADS[0] * THREADS[1]
assert BM * BK % NT == 0 and BK * BN % NT == 0, "tiles must split evenly over the threads"


@per_dtype
def kernel_for(DT):
    @cuda.jit
    def register_blocked(A, B, C):
        sA = cuda.shared.array((BM, BK), DT)
        sB = cuda.shared.array((BK, BN), DT)
        acc = cuda.local.array((TM, TN), DT)
        ra = cuda.local.array(TM, DT)
        rb = cuda.local.array(TN, DT)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * THREADS[0] + tx
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        M = A.shape[0]
        K = A.shape[1]
        N = B.shape[1]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)
        for k0 in range(0, K, BK):
            for l in range(BM * BK // NT):  # A tile: consecutive threads along K
                e = tid + l * NT
                r = e // BK
                q = e % BK
                sA[r, q] = A[m0 + r, k0 + q] if m0 + r < M and k0 + q < K else DT(0)
            for l in range(BK * BN // NT):  # B tile: consecutive threads along N
                e = tid + l * NT
                r = e // BN
                q = e % BN
                sB[r, q] = B[k0 + r, n0 + q] if k0 + r < K and n0 + q < N else DT(0)
            cuda.syncthreads()
            for p in range(BK):
                for i in range(TM):
                    ra[i] = sA[ty + i * THREADS[1], p]
                for j in range(TN):
                    rb[j] = sB[p, tx + j * THREADS[0]]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += ra[i] * rb[j]
            cuda.syncthreads()
        for i in range(TM):
            row = m0 + ty + i * THREADS[1]
            for j in range(TN):
                col = n0 + tx + j * THREADS[0]
                if row < M and col < N:
                    C[row, col] = acc[i, j]

    return register_blocked


def launch(a, b, c, stream=None):
    m, n = c.shape
    configure(kernel_for(c.dtype), grid_2d(m, n, BM, BN), THREADS, stream)(a, b, c)


def traffic(m, n, k, s):
    return (m * k * ceil_div(n, BN) + k * n * ceil_div(m, BM) + m * n) * float(s)


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt)]
