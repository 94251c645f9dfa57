"""k07 A transposed in shared memory: each thread's operands become contiguous, read 16 bytes at a time.

Changes against k06: the layout of the shared tiles and, to match it, which outputs a thread
owns. A's tile is stored transposed, sAT[p][r] (BK rows of BM + PAD words), and thread (ty, tx)
now owns the rows 4·ty + c and 64 + 4·ty + c and the columns 4·tx + c and 64 + 4·tx + c (c < 4).
For each p its 8 values of A are then two runs of 4 consecutive words in row p of sAT, and its 8
values of B two runs in row p of sB: four 128-bit shared loads (LDS.128) instead of k06's
sixteen 32-bit ones, for the same 64 FMAs. In a quarter-warp (the unit a 128-bit shared access
is served in) the 8 threads read 8 different 16-byte words of B: one pass, no conflict; all
threads of a row read the same word of A: a broadcast.

The transposed store into sAT is where conflicts would move: 32 consecutive threads stage 4 rows
× 8 columns of A, and with rows of exactly BM = 128 words those land in 4 banks (8-way
conflict). Padding each row by PAD = 4 words (which keeps rows 16-byte aligned) spreads them over
all 32 banks. The vector reads also skip Numba's negative-index wraparound code (see _vec.py).

Attacks: shared-memory instructions per FMA (k06: 16 LDS per 64 FFMA; here 4 LDS.128) and the
index arithmetic around them. Global traffic and intensity are k06's:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM) ≈ 2·M·N·K / 128 elements   (BM = BN = 128, BK = 8)
    writes = M·N elements
    intensity ≈ 128/s FLOP/byte (32 FLOP/B in FP32)
"""

from numba import cuda

from ...registry import ceil_div
from ._common import SIMT_DTYPES, configure, grid_2d, per_dtype
from ._jit import kernel
from ._vec import SMEM_ALIGN, lds4

BM = 128
BN = 128
BK = 8
PAD = 4  # words added to each row of sAT: conflict-free transposed stores, rows stay 16-byte aligned
AROW = BM + PAD
TM = 8  # rows of C per thread: 2 runs of 4
TN = 8  # columns of C per thread: 2 runs of 4
TX = BN // TN  # 16
TY = BM // TM  # 16
NT = TX * TY
MIN_BLOCKS = 2  # FP32 launch bound: ≤ 128 registers, so 2 blocks of 256 threads fit an SM
HALF_M = BM // 2  # second run of rows starts here
HALF_N = BN // 2
A_LOADS = BM * BK // NT
B_LOADS = BK * BN // NT
assert TM == 8 and TN == 8 and BM * BK % NT == 0 and BK * BN % NT == 0


@per_dtype
def kernel_for(DT):
    @kernel(launch_bounds=(NT, MIN_BLOCKS) if DT.bitwidth == 32 else None)
    def smem_transposed(A, B, C):
        sAT = cuda.shared.array((BK, AROW), DT, alignment=SMEM_ALIGN)
        sB = cuda.shared.array((BK, BN), DT, alignment=SMEM_ALIGN)
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
                    sAT[e % BK, e // BK] = A[m0 + e // BK, k0 + e % BK]
                for l in range(B_LOADS):
                    e = tid + l * NT
                    sB[e // BN, e % BN] = B[k0 + e // BN, n0 + e % BN]
            else:
                for l in range(A_LOADS):
                    e = tid + l * NT
                    r = e // BK
                    q = e % BK
                    sAT[q, r] = A[m0 + r, k0 + q] if m0 + r < M and k0 + q < K else DT(0)
                for l in range(B_LOADS):
                    e = tid + l * NT
                    r = e // BN
                    q = e % BN
                    sB[r, q] = B[k0 + r, n0 + q] if k0 + r < K and n0 + q < N else DT(0)
            cuda.syncthreads()
            for p in range(BK):
                ra[0], ra[1], ra[2], ra[3] = lds4(sAT, p, 4 * ty)
                ra[4], ra[5], ra[6], ra[7] = lds4(sAT, p, HALF_M + 4 * ty)
                rb[0], rb[1], rb[2], rb[3] = lds4(sB, p, 4 * tx)
                rb[4], rb[5], rb[6], rb[7] = lds4(sB, p, HALF_N + 4 * tx)
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += ra[i] * rb[j]
            cuda.syncthreads()
        for i in range(TM):
            row = m0 + (i // 4) * HALF_M + 4 * ty + i % 4
            for j in range(TN):
                col = n0 + (j // 4) * HALF_N + 4 * tx + j % 4
                if interior or (row < M and col < N):
                    C[row, col] = acc[i, j]

    return smem_transposed


def launch(a, b, c, stream=None):
    m, n = c.shape
    configure(kernel_for(c.dtype), grid_2d(m, n, BM, BN), (TX, TY), stream)(a, b, c)


def traffic(m, n, k, s):
    return (m * k * ceil_div(n, BN) + k * n * ceil_div(m, BM) + m * n) * float(s)


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt)]
