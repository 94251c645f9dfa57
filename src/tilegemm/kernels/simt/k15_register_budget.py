"""k15 register budget: k14's generated kernel, allowed the registers it needs instead of 128.

Changes against k14: one number, the launch bound. k06–k14 ask for two resident blocks of 256
threads per SM (`min_blocks` = 2: launch bounds (256, 2)), which caps a thread at 65536 / 512 =
128 registers. k14's thread holds 64 accumulators, 16 fragment registers (a column of A and a row
of B for one k), 8 registers staging the next tile's loads, and its addresses: at the cap the
compiler fits them only by giving things up (an earlier form of the edge guards spilled inside the
K loop: docs/perf-notes.md, "k14 unrolled at definition"; with the guards as calls it fits, with
little room to load the next row's fragments early). Here the bound is one block per SM
(`min_blocks` = 1): up to 255 registers a thread; the compiler takes well over 128 (the count is in
the resource table, `tilegemm resources`, and docs/ladder.md), and the fragment loads of row p+1
overlap row p's FFMAs (offline SASS: LDS.128 interleaved with the FFMAs). The price is occupancy:
8 warps per SM instead of 16, two per scheduler. Whether fewer warps with more independent work
each (Volkov's "better performance at lower occupancy") beat more warps that stall is what this
rung measures; ncu's counters for it and for cuBLAS's SGEMM (which also runs 8 warps per SM, near
the 255-register limit) are in docs/ladder.md.

Attacks: stalls that 16 warps of register-starved threads cannot hide (the LDS → FFMA chain inside
a K row, the barrier), by giving each thread room for more independent work.

The budget is chosen per configuration: the scalar-access variant (rows not 16-byte aligned, e.g.
N = 4097) keeps k14's two blocks per SM. Its tile loads are 8 one-element loads a K step instead of
2 vector ones, it fits 128 registers without spilling, and it ran faster with 16 warps per SM
than with 8 (docs/perf-notes.md). Everything else is k14's: tiles, warp tiles, the double-buffered
shared tiles with one barrier a K step. In k16's routing (k16 hands it the products its bigger
tiles do not suit), products whose M or grid is small go to k13 (k12's skinny kernel, split-K
tiles), where filling the SMs matters more than a tile's speed; the rest run here. (k17, the FP32
`auto` rung, runs this kernel where its own plan picks the 128×128 tile unsplit.)

Global traffic and intensity are k10's (elements; s the element size):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N
    intensity ≈ 2/(s·(1/BM + 1/BN)) FLOP/byte = 128/s (32 FLOP/B in FP32) at BM = BN = 128
Per K step a thread issues BK·(WMITER + WNITER) LDS.128 and BK·TM·TN FFMA (32 and 512): the
same instructions as k14, in 8 resident warps per SM instead of 16.
"""

from __future__ import annotations

from . import k10_warptile as k10
from . import k12_skinny_m as k12
from . import k13_splitk_tiles as k13
from . import k14_unrolled as k14

DEFAULT = k14.Config(min_blocks=1)  # k14's tiling; one 256-thread block per SM, up to 255 registers
SCALAR = k14.SCALAR  # where 16-byte accesses are not legal: k14's own, two blocks per SM
launch_config = k14.launch_config  # a configuration of it, changed (`tilegemm counters budget:FIELD=value`)
source = k14.source  # a configuration's generated text (`tilegemm kernels --source budget`: DEFAULT's)


RATE = 153_000.0  # FMA per µs per SM in k13's wave model (fitted with k13's tiles: k13.TILES)


def estimate_us(m: int, n: int, k: int, sms: int) -> float:
    """k13's wave model of k15's own kernel: 128×128 tiles, one block per SM, K unsplit."""
    return k13.WAVES.us(m, n, k, DEFAULT.BM, DEFAULT.BN, 1, RATE, 1, sms)


def here(m: int, n: int, k: int, vector: bool) -> bool:
    """Does this product run on k15's own kernel (else k13's plan: skinny M, split-K tiles)? With
    16-byte accesses, where the wave model rates it no slower than k13's plan."""
    if m <= k13.SKINNY_ROWS or (m <= k12.SKINNY_MAX and not vector):
        return False  # k12's one-column-per-thread kernel (its scalar loads serve any alignment)
    if not vector:
        return True
    p = k13.plan(m, n, k)
    return p is None or estimate_us(m, n, k, k13.sm_count()) <= p.us


def launch(a, b, c, stream=None):
    m, n = c.shape
    vector = k10.vector_ok(a, b, c)
    if not here(m, n, a.shape[1], vector):
        return k13.launch(a, b, c, stream)
    k14.run_config(DEFAULT if vector else SCALAR, a, b, c, stream)  # vector_ok: checked above


def traffic(m, n, k, s):
    if not here(m, n, k, k10.vector_shape_ok(k, n, s)):
        return k13.traffic(m, n, k, s)
    return k10.traffic_for(DEFAULT)(m, n, k, s)


NT = DEFAULT.threads


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [k14.kernel_for(dt, DEFAULT), k14.kernel_for(dt, SCALAR)]


def describe(m: int, n: int, k: int, itemsize: int, vector: bool) -> str:
    """What k15 runs for this product (`tilegemm.explain`): its own kernel, or k13's route."""
    if here(m, n, k, vector):
        return "k15's own kernel" + ("" if vector else ", scalar loads (rows off 16 bytes)")
    return ("not k15's own kernel here (few rows, or k13's plan rated faster): "
            + k13.describe(m, n, k, itemsize, vector))
