"""k01 naive: one thread per element of C, every operand read from global memory.

Thread (i, j) walks row i of A and column j of B, K multiply-adds into a register, then
writes C[i, j]. Blocks are 16×16 threads; threadIdx.x runs along j, so a warp reads B[p, j]
and writes C[i, j] at consecutive addresses (coalesced), while A[i, p] is one broadcast.

Global traffic by design (every load counted, caches ignored):
    reads  = 2·M·N·K elements   (K of A and K of B for each of the M·N threads)
    writes = M·N elements
Arithmetic intensity = 2MNK / ((2MNK + MN)·s) ≈ 1/s FLOP/byte (s = bytes per element:
0.25 FLOP/B in FP32), far left of every roofline ridge: in theory the kernel is
bandwidth-bound, and only the L1/L2 caches catching the re-reads keep it from being worse.
"""

from numba import cuda


from ._common import SIMT_DTYPES, configure, grid_2d, per_dtype

BLOCK = 16


@per_dtype
def kernel_for(DT):
    @cuda.jit
    def naive(A, B, C):
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        i = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        if i < C.shape[0] and j < C.shape[1]:
            acc = DT(0)
            for p in range(A.shape[1]):
                acc += A[i, p] * B[p, j]
            C[i, j] = acc

    return naive


def launch(a, b, c, stream=None):
    m, n = c.shape
    grid = grid_2d(m, n, BLOCK, BLOCK)
    configure(kernel_for(c.dtype), grid, (BLOCK, BLOCK), stream)(a, b, c)


def traffic(m, n, k, s):
    return (2.0 * m * n * k + m * n) * s


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt)]
