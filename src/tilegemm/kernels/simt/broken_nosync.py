"""broken_nosync: k02's tile-32 kernel with both `syncthreads()` removed. Deliberately wrong.

Without the first barrier a warp may read a shared tile before other warps have written it;
without the second, a fast warp may overwrite the tile for step t+1 while a slow warp still
reads step t. Which elements come out wrong changes from run to run. It is registered as a
teaching kernel (kernel="auto" never picks it) so that `tilegemm race`, the validator and
compute-sanitizer's racecheck can be shown to catch it.

Traffic and intensity are k02's at TILE = 32 (≈ 2·M·N·K/32 reads, M·N writes).
"""

from numba import cuda

from ...registry import ceil_div
from ._common import SIMT_DTYPES, configure, grid_2d, per_dtype

TILE = 32


@per_dtype
def kernel_for(DT):
    @cuda.jit
    def broken_nosync(A, B, C):
        sA = cuda.shared.array((TILE, TILE), DT)
        sB = cuda.shared.array((TILE, TILE), DT)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        M = A.shape[0]
        K = A.shape[1]
        N = B.shape[1]
        acc = DT(0)
        for t in range((K + TILE - 1) // TILE):
            k0 = t * TILE
            sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else DT(0)
            sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else DT(0)
            # (missing) cuda.syncthreads()
            for p in range(TILE):
                acc += sA[ty, p] * sB[p, tx]
            # (missing) cuda.syncthreads()
        if row < M and col < N:
            C[row, col] = acc

    return broken_nosync


def launch(a, b, c, stream=None):
    m, n = c.shape
    configure(kernel_for(c.dtype), grid_2d(m, n, TILE, TILE), (TILE, TILE), stream)(a, b, c)


def traffic(m, n, k, s):
    return (m * k * ceil_div(n, TILE) + k * n * ceil_div(m, TILE) + m * n) * float(s)


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt)]
