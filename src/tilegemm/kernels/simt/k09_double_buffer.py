"""k09 double buffering: the next tile's global loads are in flight while this tile is computed.

Changes against k08: the shared tiles come in two buffers and the step is reordered, so one
`syncthreads()` per K step suffices and the global-memory latency of tile t+1 hides behind the
512 FMAs of tile t:

    registers <- tile 0 (global)
    for each step t:
        shared[t % 2] <- registers          (STS; the other buffer may still be in use: fine)
        syncthreads()                       (the one barrier: tile t complete in shared memory)
        registers <- tile t+1 (global)      (LDG.E.128, issued, not yet waited for)
        FMAs on shared[t % 2]               (the loads complete meanwhile)

Buffer t % 2 is written again at step t+2, after every warp has passed step t+1's barrier and
so has finished computing step t: no second barrier needed. k08 instead waits for its loads
right away (store to shared needs them) and crosses two barriers per step, so the expectation was
that each SM's warps stall on DRAM latency every step unless other blocks fill in (it runs 2
blocks per SM at most). Measured, it did not pay (docs/ladder.md has the figures): after k08's
16-byte loads the loads were no longer what the warps waited on, so the prefetch only adds
register staging and index arithmetic, and the second buffer doubles shared memory with no change
in occupancy (docs/perf-notes.md, "SIMT ladder in Numba, FP32"). The rung stays because every CUDA
ladder takes this step; the measurement shows when it does not help.

Attacks: exposed global-memory latency and barrier stalls, not bytes. Traffic and intensity are
k08's:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM) ≈ 2·M·N·K / 128 elements   (BM = BN = 128, BK = 8)
    writes = M·N elements
    intensity ≈ 128/s FLOP/byte (32 FLOP/B in FP32)
Cost: shared memory doubles (2 × 8,320 bytes: BK × (BM + PAD) words of A plus BK × BN of B, in
FP32), and the 8 prefetched values live in registers across the FMA loop. The 16-byte path needs
K % 4 == N % 4 == 0 and aligned operands, as in k08
(otherwise k07's kernel runs).
"""

from numba import cuda

from ...registry import ceil_div
from . import k07_smem_transposed as k07
from ._common import configure, grid_2d, per_dtype
from ._jit import inline_device, kernel
from ._vec import SMEM_ALIGN, aligned16, ldg4, lds4, stg4, sts4

BM = 128
BN = 128
BK = 8
PAD = 4
AROW = BM + PAD
ROWS2 = 2 * BK  # two buffers stacked: rows [BK·buf, BK·buf + BK)
TM = 8
TN = 8
TX = BN // TN  # 16
TY = BM // TM  # 16
NT = TX * TY  # 256
MIN_BLOCKS = 2  # FP32 launch bound: ≤ 128 registers, so 2 blocks of 256 threads fit an SM
HALF_M = BM // 2
HALF_N = BN // 2
A_COLS4 = BK // 4
B_COLS4 = BN // 4
assert BM * BK == 4 * NT and BK * BN == 4 * NT, "one float4 of A and one of B per thread per step"


def _factory(DT):
    @inline_device
    def load_tiles(A, B, m0, n0, k0, M, N, K, fast, ar, ac, br, bc):
        """One float4 of A's tile and one of B's, 16-byte loads when `fast`, else guarded scalars."""
        if fast:
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
        return a0, a1, a2, a3, b0, b1, b2, b3

    @kernel(launch_bounds=(NT, MIN_BLOCKS) if DT.bitwidth == 32 else None)
    def double_buffer(A, B, C):
        sAT = cuda.shared.array((ROWS2, AROW), DT, alignment=SMEM_ALIGN)
        sB = cuda.shared.array((ROWS2, BN), DT, alignment=SMEM_ALIGN)
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
        ar = tid // A_COLS4
        ac = (tid % A_COLS4) * 4
        br = tid // B_COLS4
        bc = (tid % B_COLS4) * 4
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)
        a0, a1, a2, a3, b0, b1, b2, b3 = load_tiles(A, B, m0, n0, 0, M, N, K, interior and BK <= K,
                                                    ar, ac, br, bc)
        ntiles = (K + BK - 1) // BK
        for t in range(ntiles):
            base = (t % 2) * BK
            sAT[base + ac, ar] = a0
            sAT[base + ac + 1, ar] = a1
            sAT[base + ac + 2, ar] = a2
            sAT[base + ac + 3, ar] = a3
            sts4(sB, base + br, bc, b0, b1, b2, b3)
            cuda.syncthreads()
            k1 = (t + 1) * BK
            if k1 < K:  # prefetch the next tile; its loads complete during the FMAs below
                a0, a1, a2, a3, b0, b1, b2, b3 = load_tiles(A, B, m0, n0, k1, M, N, K,
                                                            interior and k1 + BK <= K, ar, ac, br, bc)
            for p in range(BK):
                ra[0], ra[1], ra[2], ra[3] = lds4(sAT, base + p, 4 * ty)
                ra[4], ra[5], ra[6], ra[7] = lds4(sAT, base + p, HALF_M + 4 * ty)
                rb[0], rb[1], rb[2], rb[3] = lds4(sB, base + p, 4 * tx)
                rb[4], rb[5], rb[6], rb[7] = lds4(sB, base + p, HALF_N + 4 * tx)
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += ra[i] * rb[j]
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

    return double_buffer


kernel_for = per_dtype(_factory)


def vector_ok(a, b, c) -> bool:
    return a.dtype.itemsize * 4 == 16 and a.shape[1] % 4 == 0 and b.shape[1] % 4 == 0 and aligned16(a, b, c)


def launch(a, b, c, stream=None):
    if not vector_ok(a, b, c):
        return k07.launch(a, b, c, stream)
    m, n = c.shape
    configure(kernel_for(c.dtype), grid_2d(m, n, BM, BN), (TX, TY), stream)(a, b, c)


def traffic(m, n, k, s):
    return (m * k * ceil_div(n, BN) + k * n * ceil_div(m, BM) + m * n) * float(s)


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt), k07.kernel_for(dt)]
