"""cpu_naive: the i-j-p triple loop, compiled by Numba's @njit, on one CPU core.

This is the "CPU" column of course tables: no blocking, no SIMD across the reduction (without
fastmath the compiler may not reorder the floating-point sum), B walked down a column with a
stride of N elements. Each output reads K elements of A and K of B:
    reads  = 2·M·N·K elements, writes = M·N
Arithmetic intensity ≈ 1/s FLOP/byte as in k01; the CPU caches decide its speed.
"""

import functools

import numba
import numpy as np



@functools.lru_cache(maxsize=None)
def kernel_for(dtype_name: str):
    DT = numba.from_dtype(np.dtype(dtype_name))

    @numba.njit(cache=False)
    def cpu_naive(A, B, C):
        M, K = A.shape
        N = B.shape[1]
        for i in range(M):
            for j in range(N):
                acc = DT(0)
                for p in range(K):
                    acc += A[i, p] * B[p, j]
                C[i, j] = acc

    return cpu_naive


def launch(a, b, c, stream=None):
    kernel_for(c.dtype.name)(a, b, c)


def traffic(m, n, k, s):
    return (2.0 * m * n * k + m * n) * s

