"""k02 shared-memory tiling: a block stages TILE×TILE tiles of A and B in shared memory.

Changes against k01: each block of TILE×TILE threads computes a TILE×TILE tile of C. For each
of the ceil(K/TILE) steps along K, every thread loads one element of A's tile and one of B's
into shared memory, `syncthreads()` so the tiles are complete, then does TILE multiply-adds from
shared memory, and a second `syncthreads()` keeps the next load from overwriting a tile that a
slower warp is still reading. Boundary tiles are zero-padded, so any M, N, K works.

Attacks: global-memory traffic. Each element loaded from global memory is reused TILE times.
Global traffic by design:
    reads  = M·K·ceil(N/TILE) + K·N·ceil(M/TILE) ≈ 2·M·N·K / TILE elements
    writes = M·N elements
Arithmetic intensity ≈ 2MNK / ((2MNK/TILE + MN)·s) ≈ TILE/s FLOP/byte
(TILE=16: 4 FLOP/B in FP32; TILE=32: 8 FLOP/B). Per multiply-add the thread now does two
shared-memory loads, so shared-memory bandwidth, not DRAM, becomes the limit.
"""

from numba import cuda

from ...registry import ceil_div
from ._common import SIMT_DTYPES, configure, grid_2d, per_dtype


def _factory(TILE):
    def factory(DT):
        @cuda.jit
        def smem_tiled(A, B, C):
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
                cuda.syncthreads()
                for p in range(TILE):
                    acc += sA[ty, p] * sB[p, tx]
                cuda.syncthreads()
            if row < M and col < N:
                C[row, col] = acc

        return smem_tiled

    return factory


def _make(tile: int) -> None:
    kernel_for = per_dtype(_factory(tile))

    def launch(a, b, c, stream=None):
        m, n = c.shape
        grid = grid_2d(m, n, tile, tile)
        configure(kernel_for(c.dtype), grid, (tile, tile), stream)(a, b, c)

    def traffic(m, n, k, s):
        return (m * k * ceil_div(n, tile) + k * n * ceil_div(m, tile) + m * n) * float(s)

    def jit_kernels(dt) -> list:
        return [kernel_for(dt)]

    # the registry's members for kernel smem_tiled_{tile} (kernels/__init__.py)
    for name, member in (("launch", launch), ("traffic", traffic), ("jit_kernels", jit_kernels),
                         ("kernel_for", kernel_for)):
        globals()[f"{name}_{tile}"] = member


_make(16)
_make(32)
