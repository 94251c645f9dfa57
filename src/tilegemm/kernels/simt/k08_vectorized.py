"""k08 vectorized global memory: one 16-byte load per thread per operand per step, 16-byte stores.

Changes against k07: how tiles travel between global and shared memory. Each step a thread
moves one float4 of A (row tid/2, columns 4·(tid%2)…+3 of the 128×8 tile) and one float4 of B
(row tid/32, columns 4·(tid%32)…+3 of the 8×128 tile) with a single 128-bit global load each
(LDG.E.128) instead of four 32-bit ones, writes B's float4 to shared memory with one STS.128,
and writes C back with 128-bit stores (each thread's columns are two runs of 4). A's four
values still go to the transposed sAT one by one (4 STS; the PAD = 4 rows keep them conflict-free).
Numba has no float4 view of an array, so the accesses are small LLVM intrinsics (see _vec.py).

A 16-byte access needs a 16-byte-aligned address: the interior path requires K % 4 == 0,
N % 4 == 0 and 16-byte-aligned data pointers. When that does not hold the launcher runs k07's
scalar kernel instead (same tiles, same result); edge blocks and the K tail of this kernel use
guarded scalar loads into the same registers.

Attacks: load/store instruction count and the address arithmetic per element (a quarter of the
LSU instructions for the tiles and for C). Global traffic and intensity are k07's:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM) ≈ 2·M·N·K / 128 elements   (BM = BN = 128, BK = 8)
    writes = M·N elements
    intensity ≈ 128/s FLOP/byte (32 FLOP/B in FP32)
"""

from numba import cuda

from ...registry import ceil_div
from . import k07_smem_transposed as k07
from ._common import configure, grid_2d, per_dtype
from ._jit import kernel
from ._vec import SMEM_ALIGN, aligned16, ldg4, lds4, stg4, sts4

BM = 128
BN = 128
BK = 8
PAD = 4
AROW = BM + PAD
TM = 8
TN = 8
TX = BN // TN  # 16
TY = BM // TM  # 16
NT = TX * TY  # 256
MIN_BLOCKS = 2  # FP32 launch bound: ≤ 128 registers, so 2 blocks of 256 threads fit an SM
HALF_M = BM // 2
HALF_N = BN // 2
A_COLS4 = BK // 4  # float4s per row of A's tile (2)
B_COLS4 = BN // 4  # float4s per row of B's tile (32)
assert BM * BK == 4 * NT and BK * BN == 4 * NT, "one float4 of A and one of B per thread per step"


@per_dtype
def kernel_for(DT):
    @kernel(launch_bounds=(NT, MIN_BLOCKS) if DT.bitwidth == 32 else None)
    def vectorized(A, B, C):
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
        ar = tid // A_COLS4  # this thread's row of A's tile
        ac = (tid % A_COLS4) * 4  # and first of its 4 columns
        br = tid // B_COLS4
        bc = (tid % B_COLS4) * 4
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)
        for k0 in range(0, K, BK):
            if interior and k0 + BK <= K:
                a0, a1, a2, a3 = ldg4(A, m0 + ar, k0 + ac)
                b0, b1, b2, b3 = ldg4(B, k0 + br, n0 + bc)
            else:
                ok = m0 + ar < M
                a0 = A[m0 + ar, k0 + ac] if ok and k0 + ac < K else DT(0)
                a1 = A[m0 + ar, k0 + ac + 1] if ok and k0 + ac + 1 < K else DT(0)
                a2 = A[m0 + ar, k0 + ac + 2] if ok and k0 + ac + 2 < K else DT(0)
                a3 = A[m0 + ar, k0 + ac + 3] if ok and k0 + ac + 3 < K else DT(0)
                ok = k0 + br < K
                b0 = B[k0 + br, n0 + bc] if ok and n0 + bc < N else DT(0)
                b1 = B[k0 + br, n0 + bc + 1] if ok and n0 + bc + 1 < N else DT(0)
                b2 = B[k0 + br, n0 + bc + 2] if ok and n0 + bc + 2 < N else DT(0)
                b3 = B[k0 + br, n0 + bc + 3] if ok and n0 + bc + 3 < N else DT(0)
            sAT[ac, ar] = a0
            sAT[ac + 1, ar] = a1
            sAT[ac + 2, ar] = a2
            sAT[ac + 3, ar] = a3
            sts4(sB, br, bc, b0, b1, b2, b3)
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
        if interior:
            for i in range(TM):
                row = m0 + (i // 4) * HALF_M + 4 * ty + i % 4
                stg4(C, row, n0 + 4 * tx, acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3])
                stg4(C, row, n0 + HALF_N + 4 * tx, acc[i, 4], acc[i, 5], acc[i, 6], acc[i, 7])
        else:
            for i in range(TM):
                row = m0 + (i // 4) * HALF_M + 4 * ty + i % 4
                for j in range(TN):
                    col = n0 + (j // 4) * HALF_N + 4 * tx + j % 4
                    if row < M and col < N:
                        C[row, col] = acc[i, j]

    return vectorized


def vector_ok(a, b, c) -> bool:
    """16-byte accesses are legal: rows of A, B, C start 16-byte aligned."""
    k = a.shape[1]
    n = b.shape[1]
    return a.dtype.itemsize * 4 == 16 and k % 4 == 0 and n % 4 == 0 and aligned16(a, b, c)


def launch(a, b, c, stream=None):
    if not vector_ok(a, b, c):
        return k07.launch(a, b, c, stream)  # misaligned rows: same tiles, scalar loads
    m, n = c.shape
    configure(kernel_for(c.dtype), grid_2d(m, n, BM, BN), (TX, TY), stream)(a, b, c)


def traffic(m, n, k, s):
    return (m * k * ceil_div(n, BN) + k * n * ceil_div(m, BM) + m * n) * float(s)


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt), k07.kernel_for(dt)]
