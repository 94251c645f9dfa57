"""k03 bank conflicts, shown: k02's tile-32 kernel with B's tile stored transposed, then padded.

Shared memory has 32 banks of 4 bytes; a warp's 32 accesses are served in one pass only when
they fall in 32 different banks (or on one shared word, a broadcast). k02 reads sB[p, tx]:
consecutive words across the warp, no conflict. Here B's tile is stored transposed, sBT[tx, ty],
and read as sBT[tx, p] — down a column. With a row length of 32 words, the 32 threads of a
warp hit addresses tx·32 + p, all in bank p: a 32-way conflict on every read (and on the store).

`smem32_conflicted`  sBT declared [32][32]: 32-way conflicts, 32 shared-memory passes per read.
`smem32_padded`      sBT declared [32][33]: a row is 33 words, thread tx lands in bank (tx + p)
                     mod 32, all different: the conflict is gone with no change to the logic.

Global traffic is k02's: reads ≈ 2·M·N·K/32 elements, writes M·N; arithmetic intensity
≈ 32/s FLOP/byte. The variants differ only in shared-memory passes per instruction, so their
time difference is the cost of the conflicts. (Padding can change code generation too: read the
SASS FFMA count beside the timings before blaming or crediting the banks. On sm_90 ptxas fuses
four consecutive reads sBT[tx, p..p+3] of the [32][32] variant into one LDS.128; the 32 threads
still land on the same four banks, so the conflict stays, in fewer instructions.)
"""

from numba import cuda

from ...registry import ceil_div
from ._common import SIMT_DTYPES, configure, grid_2d, per_dtype

TILE = 32


def _factory(ROW):
    def factory(DT):
        @cuda.jit
        def smem32_transposed_b(A, B, C):
            sA = cuda.shared.array((TILE, TILE), DT)
            sBT = cuda.shared.array((TILE, ROW), DT)
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
                sBT[tx, ty] = B[k0 + ty, col] if k0 + ty < K and col < N else DT(0)
                cuda.syncthreads()
                for p in range(TILE):
                    acc += sA[ty, p] * sBT[tx, p]
                cuda.syncthreads()
            if row < M and col < N:
                C[row, col] = acc

        return smem32_transposed_b

    return factory


def _traffic(m, n, k, s):
    return (m * k * ceil_div(n, TILE) + k * n * ceil_div(m, TILE) + m * n) * float(s)


def _make(suffix: str, row: int) -> None:
    kernel_for = per_dtype(_factory(row))

    def launch(a, b, c, stream=None):
        m, n = c.shape
        configure(kernel_for(c.dtype), grid_2d(m, n, TILE, TILE), (TILE, TILE), stream)(a, b, c)

    def jit_kernels(dt) -> list:
        return [kernel_for(dt)]

    # the registry's members for kernel smem32_{suffix} (kernels/__init__.py)
    for name, member in (("launch", launch), ("traffic", _traffic), ("jit_kernels", jit_kernels)):
        globals()[f"{name}_{suffix}"] = member


_make("conflicted", TILE)
_make("padded", TILE + 1)
