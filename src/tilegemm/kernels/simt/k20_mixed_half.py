"""k20 mixed precision on the SIMT cores: FP16 in, FP32 accumulate, FP16 or FP32 out.

(matmul returns FP16, as for any FP16 operands; the launcher writes an FP32 C it is given.)

Changes against k04: the operands are float16, so each global load brings half the bytes and the
shared tiles hold twice as many elements per byte. Every value is widened to float32 as it is
read from shared memory into registers, and the 4×4 accumulators are float32; the result is
rounded once, on the store, to C's dtype (float16 or float32). This is what the tensor cores do
in hardware (FP16 multiplies, FP32 sums), done here with ordinary FP32 FMAs: the same numerics,
without the tensor cores' speed. Error: FP32 accumulation (≈ sqrt(K)·2^-24) plus one FP16
rounding of the output (2^-11).

Global traffic, elements of s = 2 bytes for A and B, s_c for C (k04's tiles, BM = BN = 64):
    reads  = (M·K·ceil(N/64) + K·N·ceil(M/64))·2 bytes,  writes = M·N·s_c bytes
Arithmetic intensity ≈ 64/2 = 32 FLOP/byte against global memory, twice k04's FP32 figure; the
FMA rate is FP32's, so large products stay compute-bound at the FP32 SIMT ceiling.
"""

import numba
import numpy as np
from numba import cuda

from ...registry import ceil_div
from ._common import configure, grid_2d, per_dtype

BM = 64
BN = 64
BK = 16
TM = 4
TN = 4
THREADS = (BN // TN, BM // TM)  # (16, 16)
NT = THREADS[0] * THREADS[1]
assert BM * BK % NT == 0 and BK * BN % NT == 0, "tiles must split evenly over the threads"

HALF = numba.from_dtype(np.dtype("float16"))
F32 = numba.float32


@per_dtype
def kernel_for(OUT):  # one kernel per output dtype (float16 or float32)
    @cuda.jit
    def mixed_half(A, B, C):
        sA = cuda.shared.array((BM, BK), HALF)
        sB = cuda.shared.array((BK, BN), HALF)
        acc = cuda.local.array((TM, TN), F32)
        ra = cuda.local.array(TM, F32)
        rb = cuda.local.array(TN, F32)
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
                acc[i, j] = F32(0)
        for k0 in range(0, K, BK):
            for l in range(BM * BK // NT):  # load half, as half
                e = tid + l * NT
                r = e // BK
                q = e % BK
                sA[r, q] = A[m0 + r, k0 + q] if m0 + r < M and k0 + q < K else HALF(0)
            for l in range(BK * BN // NT):
                e = tid + l * NT
                r = e // BN
                q = e % BN
                sB[r, q] = B[k0 + r, n0 + q] if k0 + r < K and n0 + q < N else HALF(0)
            cuda.syncthreads()
            for p in range(BK):
                for i in range(TM):  # widen to float on the way into registers
                    ra[i] = F32(sA[ty + i * THREADS[1], p])
                for j in range(TN):
                    rb[j] = F32(sB[p, tx + j * THREADS[0]])
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += ra[i] * rb[j]
            cuda.syncthreads()
        for i in range(TM):
            row = m0 + ty + i * THREADS[1]
            for j in range(TN):
                col = n0 + tx + j * THREADS[0]
                if row < M and col < N:
                    C[row, col] = OUT(acc[i, j])  # one rounding, at the store

    return mixed_half


def launch(a, b, c, stream=None):
    m, n = c.shape
    if np.dtype(a.dtype) != np.float16 or np.dtype(b.dtype) != np.float16:
        raise TypeError(f"mixed_half takes float16 operands; got {a.dtype}, {b.dtype}")
    configure(kernel_for(c.dtype), grid_2d(m, n, BM, BN), THREADS, stream)(a, b, c)


def traffic(m, n, k, s):
    return (m * k * ceil_div(n, BN) + k * n * ceil_div(m, BM) + m * n) * float(s)


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt)]
