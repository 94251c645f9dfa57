"""t02 persistent tensor-core GEMM: one program per SM, each walking tiles strided by the SM count.

Changes against t01: the grid is min(#SMs, tiles) programs instead of one per tile; program p
computes tiles p, p + #SMs, p + 2·#SMs, … (over all batches). The tile order inside the walk is
t01's grouped order, so at any moment the #SMs tiles in flight form a compact block of C and
share their A and B panels in L2. Launch and block-scheduling costs are paid once per SM, and the
last wave's tail is no longer a separate, partly idle wave of blocks; the next tile's first loads
can overlap the previous tile's epilogue inside one program.

Global traffic is t01's (the tiles and their order are the same):
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM),  writes = M·N   (elements)
Arithmetic intensity ≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte for large K. What improves is how much of
the re-read traffic L2 absorbs: #SMs consecutive grouped tiles (132 on an H200) touch about
sqrt(132)·(BM + BN)·K elements of A and B instead of 132·(BM + BN)·K.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ...registry import ceil_div
from . import _common as C
from ._common import grouped_tile, mainloop_ptr, scale_acc, store_ptr

NAME = "tc_persistent"


@triton.jit
def persistent_kernel(a_ptr, b_ptr, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, K, BATCH,
                      sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, sib, sim, sin_, alpha, beta,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                      NUM_SMS: tl.constexpr, PRECISION: tl.constexpr, HAS_BETA: tl.constexpr,
                      HAS_SCALE: tl.constexpr):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    tiles = num_pid_m * num_pid_n
    for t in tl.range(start, tiles * BATCH, NUM_SMS):
        bid = (t // tiles).to(tl.int64)
        pid_m, pid_n = grouped_tile(t % tiles, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = mainloop_ptr(a_ptr + bid * sab, b_ptr + bid * sbb, M, N, K, sam, sak, sbk, sbn, off_m, off_n,
                           BM, BN, BK, PRECISION)
        acc = scale_acc(acc, i_ptr + bid * sib, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, off_m, off_n,
                        BM, BN, HAS_BETA, HAS_SCALE)
        store_ptr(acc, c_ptr + bid * scb, M, N, scm, scn, off_m, off_n, BM, BN)


def _args(p: C.Problem, cfg: dict):
    """(grid, every parameter of persistent_kernel in order) for p."""
    c_in, sa, sb = C.epilogue_args(p)
    sms = C.num_sms(p.a.device)
    tiles = ceil_div(p.m, cfg["BM"]) * ceil_div(p.n, cfg["BN"]) * p.batch
    args = [p.a, p.b, p.c, c_in, sa, sb, p.m, p.n, p.k, p.batch,
            p.bstride(p.a), *p.mat_strides(p.a), p.bstride(p.b), *p.mat_strides(p.b),
            p.bstride(p.c), *p.mat_strides(p.c), p.bstride(c_in), *p.mat_strides(c_in),
            float(p.alpha), float(p.beta),
            cfg["BM"], cfg["BN"], cfg["BK"], cfg["GROUP_M"], sms, p.dot_precision, p.has_beta, p.scale_a is not None]
    return (min(sms, tiles), ), args


def run(p: C.Problem, cfg: dict):
    """Launch once with configuration cfg; returns the compiled kernel."""
    grid, args = _args(p, cfg)
    return persistent_kernel[grid](*args, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def candidates(p: C.Problem) -> list[dict]:
    return C.prune(C.base_configs(p), p, tma_store=False)


def default_config(p: C.Problem) -> dict:
    return candidates(p)[0]


# Launch plans, as t03's (t03_tma_persistent.Plan): a product of the same shapes, strides, dtypes
# and alignment as an earlier one launches the compiled kernel directly, without the tuner lookup
# and Triton's argument binding. Without them a call costs the host about as long as a decode-sized
# product runs on the GPU (docs/perf-notes.md, 29).
_PLANS: dict = {}
C.PLAN_CACHES.append(_PLANS)
DIRECT: dict = {"enabled": True, "launches": 0, "reused_args": 0, "error": ""}


def _plan_args(p: C.Problem, cfg: dict):
    from . import t03_tma_persistent as t03

    grid, args = _args(p, cfg)
    return grid, t03.by_address(args)


def gemm(p: C.Problem, config: dict | None = None, key: tuple | None = None) -> dict:
    """Run p (tuned or cached configuration unless one is given); returns the configuration used,
    with "kernel". key: p's plan_key, when the caller (auto_gemm) has computed it already."""
    from . import t03_tma_persistent as t03  # t03 imports this module (its fallback)

    return t03.through_plan(_PLANS, DIRECT, p, config, key, "t02", _gemm_slow, _plan_args)


def _gemm_slow(p: C.Problem, config: dict | None):
    cfg = config or C.choose(NAME, p, lambda: candidates(p), default_config(p), run)
    return dict(cfg, kernel=NAME), run(p, cfg)


def launch(a, b, c, stream=None):
    with C.on_stream(stream):
        gemm(C.problem_2d(a, b, c))


def traffic(m, n, k, s, bm=128, bn=128):
    return (m * k * ceil_div(n, bn) + k * n * ceil_div(m, bm) + m * n) * float(s)

