"""k10 warp tiling: each warp owns a compact WM×WN sub-tile of the block's tile.

Changes against k09: which outputs a thread owns (the load/store path, the double buffering and
the single barrier per step are k09's). In k09 the 16×16 threads are laid out row-major, so a
warp (two values of ty) covers a 16×128 strip of the 128×128 tile. Here the block's 8 warps
form a 2×4 grid of WM×WN = 64×32 warp tiles; inside a warp the 32 lanes form an 8×4 grid, and a
lane computes WMITER×WNITER = 2×2 micro-tiles of 4×4 (rows 32·it + 4·(lane/4) + c, columns
16·jt + 4·(lane%4) + c of its warp tile): still 8×8 per thread, 4 LDS.128 per 64 FMAs.

What moves: per p a k09 warp reads 16 words of A and 128 of B from shared memory (144 words;
its B reads take 2 shared-memory wavefronts per instruction); a k10 warp reads 64 + 32 = 96
words, every LDS.128 one wavefront (8 distinct float4 of A, or 4 of B broadcast to 8 lanes each).
That is a third fewer shared-memory bytes and wavefronts per FMA, and the warp's operands stay
in a smaller region (better L1/shared locality, the same for C's stores).

Attacks: shared-memory wavefronts per FMA. Global traffic and intensity are k09's, in the
general form the factory below accepts (k11 searches over BM, BN, BK, WM, WN):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM) ≈ M·N·K·(1/BN + 1/BM) elements
    writes = M·N elements
    intensity ≈ 2MNK / ((MNK(1/BM + 1/BN) + MN)·s) ≈ 2/(s·(1/BM + 1/BN)) FLOP/byte
             = 128/s (32 FLOP/B in FP32) at BM = BN = 128

The factory also builds k13's split-K variant (`Config.split`): a block multiplies only its
grid-z slice of K and adds its tile into C with atomics. With split off (k10, k11) that code is
compiled out: the kernel is the one described above.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import cuda

from ...registry import ceil_div
from . import k07_smem_transposed as k07
from ._common import configure, grid_2d, per_config
from ._jit import inline_device, kernel
from ._vec import SMEM_ALIGN, aligned16, ldg4, lds4, stg4, sts4

LANES_M, LANES_N = 8, 4  # a warp's lanes as an 8×4 grid
MICRO = 4  # each lane's micro-tile is MICRO×MICRO: one float4 of A and one of B per (it, jt)
PAD = 4


@dataclass(frozen=True)
class Tiling:
    """The block and warp tiles, shared with k14 (which writes the same tiling out in full)."""

    BM: int = 128
    BN: int = 128
    BK: int = 8
    WM: int = 64
    WN: int = 32
    min_blocks: int = 2  # launch bounds: ≥ this many resident blocks per SM (0: compiler's choice)

    @property
    def threads(self) -> int:
        return (self.BM // self.WM) * (self.BN // self.WN) * 32

    def problems(self) -> list[str]:
        """What keeps the tiles from splitting evenly over warps, lanes and loads."""
        WM, WN, BM, BN, BK = self.WM, self.WN, self.BM, self.BN, self.BK
        if min(WM, WN, BM, BN, BK) < 1:  # (the rules below divide by them: WM=0 raised ZeroDivisionError)
            return [f"BM, BN, BK, WM, WN must be positive (BM={BM}, BN={BN}, BK={BK}, WM={WM}, WN={WN})"]
        nt = self.threads
        problems = []
        if WM % (LANES_M * MICRO) or WN % (LANES_N * MICRO):
            problems.append(f"WM must be a multiple of {LANES_M * MICRO}, WN of {LANES_N * MICRO}")
        if BM % WM or BN % WN:
            problems.append("BM, BN must be multiples of WM, WN")
        if not nt:  # (a tile smaller than its warp's tile: no warps, and the load rule below divides by 0)
            return problems
        if BK % 4 or (BM * BK // 4) % nt or (BK * BN // 4) % nt or BM * BK // 4 < nt or BK * BN // 4 < nt:
            problems.append("each thread must load whole float4s of A and B (BM·BK/4 and BK·BN/4 multiples of threads)")
        if nt > 1024:
            problems.append("more than 1024 threads per block")
        return problems

    def check(self) -> None:
        """Raise ValueError unless the configuration can be compiled."""
        problems = self.problems()
        if problems:
            raise ValueError(f"{self}: " + "; ".join(problems))


@dataclass(frozen=True)
class Config(Tiling):
    unroll: int = 1  # copies of the p-loop body per trip (BK: fully unrolled)
    split: bool = False  # k13: grid z splits K; each block adds its partial tile into C (zeroed first)

    def problems(self) -> list[str]:
        return super().problems() + (["unroll must divide BK"] if self.unroll < 1 or self.BK % self.unroll else [])


DEFAULT = Config()


def make_kernel(cfg: Config, DT):
    """The warp-tiled, double-buffered kernel for one configuration and element type."""
    cfg.check()
    BM, BN, BK, WM, WN = cfg.BM, cfg.BN, cfg.BK, cfg.WM, cfg.WN
    UNROLL = cfg.unroll
    NT = cfg.threads
    AROW = BM + PAD
    ROWS2 = 2 * BK
    WARPS_N = BN // WN
    WMITER = WM // (LANES_M * MICRO)
    WNITER = WN // (LANES_N * MICRO)
    TM = WMITER * MICRO
    TN = WNITER * MICRO
    A_IT = BM * BK // 4 // NT  # float4s of A per thread per step
    B_IT = BK * BN // 4 // NT
    PA = 4 * A_IT
    PB = 4 * B_IT
    A_C4 = BK // 4  # float4s per row of A's tile
    B_C4 = BN // 4
    SUB_M = LANES_M * MICRO  # rows covered by one `it` across the warp
    SUB_N = LANES_N * MICRO
    SPLIT = cfg.split

    @inline_device
    def load_tiles(A, B, pa, pb, m0, n0, k0, M, N, K, fast, tid):
        """Prefetch this thread's float4s of the tiles at k0 into pa, pb (registers)."""
        for l in range(A_IT):
            f = tid + l * NT
            r = m0 + f // A_C4
            q = k0 + (f % A_C4) * 4
            if fast:
                pa[4 * l], pa[4 * l + 1], pa[4 * l + 2], pa[4 * l + 3] = ldg4(A, r, q)
            else:
                for c in range(4):
                    pa[4 * l + c] = A[r, q + c] if r < M and q + c < K else DT(0)
        for l in range(B_IT):
            f = tid + l * NT
            r = k0 + f // B_C4
            q = n0 + (f % B_C4) * 4
            if fast:
                pb[4 * l], pb[4 * l + 1], pb[4 * l + 2], pb[4 * l + 3] = ldg4(B, r, q)
            else:
                for c in range(4):
                    pb[4 * l + c] = B[r, q + c] if r < K and q + c < N else DT(0)

    @kernel(launch_bounds=(NT, cfg.min_blocks) if cfg.min_blocks else None)
    def warptile(A, B, C):
        sAT = cuda.shared.array((ROWS2, AROW), DT, alignment=SMEM_ALIGN)
        sB = cuda.shared.array((ROWS2, BN), DT, alignment=SMEM_ALIGN)
        acc = cuda.local.array((TM, TN), DT)
        ra = cuda.local.array(TM, DT)
        rb = cuda.local.array(TN, DT)
        pa = cuda.local.array(PA, DT)
        pb = cuda.local.array(PB, DT)
        tid = cuda.threadIdx.x
        warp = tid // 32
        lane = tid % 32
        wm0 = (warp // WARPS_N) * WM + (lane // LANES_N) * MICRO  # this lane's first row in the tile
        wn0 = (warp % WARPS_N) * WN + (lane % LANES_N) * MICRO
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        M = A.shape[0]
        K = A.shape[1]
        N = B.shape[1]
        interior = m0 + BM <= M and n0 + BN <= N
        k_lo = 0
        k_hi = K
        if SPLIT:  # k13: this block's slice of K, whole BK steps; the grid's z index picks it
            per = ((K + BK - 1) // BK + cuda.gridDim.z - 1) // cuda.gridDim.z * BK
            k_lo = cuda.blockIdx.z * per
            k_hi = min(K, k_lo + per)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = DT(0)
        load_tiles(A, B, pa, pb, m0, n0, k_lo, M, N, k_hi, interior and k_lo + BK <= k_hi, tid)
        ntiles = (k_hi - k_lo + BK - 1) // BK
        for t in range(ntiles):
            base = (t % 2) * BK
            for l in range(A_IT):
                f = tid + l * NT
                for c in range(4):
                    sAT[base + (f % A_C4) * 4 + c, f // A_C4] = pa[4 * l + c]
            for l in range(B_IT):
                f = tid + l * NT
                sts4(sB, base + f // B_C4, (f % B_C4) * 4, pb[4 * l], pb[4 * l + 1], pb[4 * l + 2], pb[4 * l + 3])
            cuda.syncthreads()
            k1 = k_lo + (t + 1) * BK
            if k1 < k_hi:
                load_tiles(A, B, pa, pb, m0, n0, k1, M, N, k_hi, interior and k1 + BK <= k_hi, tid)
            for p0 in range(0, BK, UNROLL):  # Numba leaves this loop rolled: UNROLL copies per trip
                for u in range(UNROLL):
                    p = p0 + u
                    for it in range(WMITER):
                        r = 4 * it
                        ra[r], ra[r + 1], ra[r + 2], ra[r + 3] = lds4(sAT, base + p, wm0 + it * SUB_M)
                    for jt in range(WNITER):
                        q = 4 * jt
                        rb[q], rb[q + 1], rb[q + 2], rb[q + 3] = lds4(sB, base + p, wn0 + jt * SUB_N)
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += ra[i] * rb[j]
        for it in range(WMITER):
            for c in range(MICRO):
                i = it * MICRO + c
                row = m0 + wm0 + it * SUB_M + c
                for jt in range(WNITER):
                    col = n0 + wn0 + jt * SUB_N
                    j = jt * MICRO
                    if SPLIT:  # partial sums of K slices meet in C (order of the adds varies)
                        for d in range(MICRO):
                            if row < M and col + d < N:
                                cuda.atomic.add(C, (row, col + d), acc[i, j + d])
                    elif interior:
                        stg4(C, row, col, acc[i, j], acc[i, j + 1], acc[i, j + 2], acc[i, j + 3])
                    else:
                        for d in range(MICRO):
                            if row < M and col + d < N:
                                C[row, col + d] = acc[i, j + d]

    return warptile


kernel_for = per_config(make_kernel, DEFAULT)  # kernel_for(dtype, cfg=DEFAULT), built once a pair


def vector_shape_ok(k: int, n: int, itemsize: int) -> bool:
    """Rows of A (K long) and of B and C (N long) can be read as 16-byte vectors of 4 elements."""
    return itemsize * 4 == 16 and k % 4 == 0 and n % 4 == 0


def vector_ok(a, b, c) -> bool:
    return vector_shape_ok(a.shape[1], b.shape[1], a.dtype.itemsize) and aligned16(a, b, c)


def launch_config(cfg: Config, a, b, c, stream=None):
    """Run configuration `cfg` (k07's scalar kernel when 16-byte accesses are not legal)."""
    if not vector_ok(a, b, c):
        return k07.launch(a, b, c, stream)
    m, n = c.shape
    configure(kernel_for(c.dtype, cfg), grid_2d(m, n, cfg.BM, cfg.BN), cfg.threads, stream)(a, b, c)


def launch(a, b, c, stream=None):
    launch_config(DEFAULT, a, b, c, stream)


def traffic_for(cfg: Tiling):
    def traffic(m, n, k, s):
        return (m * k * ceil_div(n, cfg.BN) + k * n * ceil_div(m, cfg.BM) + m * n) * float(s)

    return traffic


NT = DEFAULT.threads  # threads per block of the registered (default) configuration
traffic = traffic_for(DEFAULT)

def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [kernel_for(dt), k07.kernel_for(dt)]
