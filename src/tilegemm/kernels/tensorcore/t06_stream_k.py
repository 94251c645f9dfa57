"""t06 stream-K tensor-core GEMM: t03's TMA persistent kernel, with the last wave's tiles shared out
by k-steps so that no SM idles at the end.

Changes against t03: t03 walks T tiles over P programs (one per SM), so the last round has
T mod P tiles and the rest of the SMs wait; at 8192³ with 128×256 tiles that is 2048 tiles =
15 rounds of 132 and one of 68, 3% of the kernel with half the GPU idle. Here all but the
last S = (T mod P) + P·SK tiles run as in t03 (whole tiles, strided over the programs); the
S·KT k-steps of the rest (KT = ⌈K/BK⌉) are cut into P equal, contiguous runs, one per program
(Stream-K, Osama et al. 2023). A run at least KT long touches a tile in at most two programs: one computes the tile's first k-steps
(a "head", at the end of its run), the other its last ones (a "tail", at the start of its run).
The tail's program writes its FP32 partial to a workspace slot and raises a flag; the head's
program, which reaches that tile last, waits for the flag (cleared as it is taken), adds the
partial and finishes the tile. Programs take runs in the reverse of their ids, so a tail's
writer always has the lower id (the interpreter runs programs in id order, and cannot wait).

Work per program: T·KT/P k-steps instead of ⌈T/P⌉·KT, e.g. 15.5 tiles' worth instead of
16 at 8192³. Extra traffic: P partial tiles written and read once, 2·P·BM·BN·4 bytes (34 MB at
128×256 on 132 SMs, about 3% of the operand traffic at 8192³). What it risks: the stream-K
runs start at different k-steps, so programs sharing an A row or B column of tiles no longer
read the same k-slices at the same time, and the last S tiles get less reuse from L2 than in
t03's lock-step rounds.

Global traffic otherwise t03's:
    reads  = M·K·⌈N/BN⌉ + K·N·⌈M/BM⌉ + 2·P·BM·BN·4/s,  writes = M·N   (elements of s bytes)
Arithmetic intensity as t03 (≈ 2·BM·BN / (s·(BM + BN)) FLOP/byte from DRAM without L2 reuse).
Takes what t03's plain form takes: one matrix (no batch), A and B in any layout that needs no
swap or copy (FP16/BF16 any; TF32 and FP8 with B K-major), alpha/beta and FP8 scales. It runs
only where the split changes something: T mod P ≠ 0 and T ≥ (T mod P) + P·SK.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...registry import ceil_div
from . import _common as C
from . import t03_tma_persistent as t03
from ._common import grouped_tile, mma_a, scale_acc, store_ptr

NAME = "tc_stream_k"


@triton.jit
def _k_steps(a_desc, b_desc, off_m, off_n, k0, k1, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             PRECISION: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr, REG_A: tl.constexpr):
    """The FP32 sum over k-steps k0 ≤ kt < k1 of the (off_m, off_n) tile's products."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kt in range(k0, k1):
        off_k = kt * BK
        a = t03._load_tile(a_desc, 0, off_m, off_k, BM, BK, A_T, False)
        b = t03._load_tile(b_desc, 0, off_k, off_n, BK, BN, B_T, False)
        acc = tl.dot(mma_a(a, REG_A), b, acc, input_precision=PRECISION)
    return acc


@triton.jit
def _finish(acc, c_desc, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, scm, scn, sim, sin_, alpha, beta, off_m, off_n,
            BM: tl.constexpr, BN: tl.constexpr, C_TMA: tl.constexpr, HAS_BETA: tl.constexpr,
            HAS_SCALE: tl.constexpr):
    acc = scale_acc(acc, i_ptr, sa_ptr, sb_ptr, M, N, sim, sin_, alpha, beta, off_m, off_n, BM, BN, HAS_BETA,
                    HAS_SCALE)
    if C_TMA:
        c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
    else:
        store_ptr(acc, c_ptr, M, N, scm, scn, off_m, off_n, BM, BN)


@triton.jit
def _slot(ws_ptr, v, BM: tl.constexpr, BN: tl.constexpr):
    """Pointers to workspace slot v, a BM×BN FP32 tile (made where used: kept across the loop, they
    would hold BM·BN/threads registers the whole time)."""
    return ws_ptr + v * (BM * BN) + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]


@triton.jit
def stream_k_kernel(a_desc, b_desc, c_desc, c_ptr, i_ptr, sa_ptr, sb_ptr, ws_ptr, flag_ptr, M, N, K, DP_TILES,
                    scm, scn, sim, sin_, alpha, beta,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                    NUM_SMS: tl.constexpr, PRECISION: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr,
                    C_TMA: tl.constexpr, HAS_BETA: tl.constexpr, HAS_SCALE: tl.constexpr, REG_A: tl.constexpr,
                    FLAT: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    # whole tiles, as in t03
    for t in tl.range(pid, DP_TILES, NUM_SMS, flatten=FLAT):
        pid_m, pid_n = grouped_tile(t, num_pid_m, num_pid_n, GROUP_M)
        acc = _k_steps(a_desc, b_desc, pid_m * BM, pid_n * BN, 0, k_tiles, BM, BN, BK, PRECISION, A_T, B_T, REG_A)
        _finish(acc, c_desc, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, scm, scn, sim, sin_, alpha, beta, pid_m * BM,
                pid_n * BN, BM, BN, C_TMA, HAS_BETA, HAS_SCALE)
    # the rest, as P equal runs of k-steps; run v belongs to program P-1-v
    v = (NUM_SMS - 1 - pid).to(tl.int64)
    base = DP_TILES.to(tl.int64) * k_tiles
    total = (tiles - DP_TILES).to(tl.int64) * k_tiles
    it = base + v * total // NUM_SMS
    end = base + (v + 1) * total // NUM_SMS
    while it < end:
        t = (it // k_tiles).to(tl.int32)
        kt0 = (it - t.to(tl.int64) * k_tiles).to(tl.int32)
        kt1 = tl.minimum(k_tiles, kt0 + (end - it).to(tl.int32))
        pid_m, pid_n = grouped_tile(t, num_pid_m, num_pid_n, GROUP_M)
        acc = _k_steps(a_desc, b_desc, pid_m * BM, pid_n * BN, kt0, kt1, BM, BN, BK, PRECISION, A_T, B_T, REG_A)
        if kt0 > 0:  # a tail: run v-1 holds this tile's first k-steps and finishes it
            tl.store(_slot(ws_ptr, v, BM, BN), acc, cache_modifier=".cg")
            tl.debug_barrier()  # every thread's part is written before the flag goes up
            tl.atomic_xchg(flag_ptr + v, 1, sem="release")
        else:
            if kt1 < k_tiles:  # a head: run v+1 computed the rest, at the start of its run
                while tl.atomic_cas(flag_ptr + v + 1, 1, 0, sem="acquire") != 1:
                    pass
                tl.debug_barrier()
                acc += tl.load(_slot(ws_ptr, v + 1, BM, BN), cache_modifier=".cg")
            _finish(acc, c_desc, c_ptr, i_ptr, sa_ptr, sb_ptr, M, N, scm, scn, sim, sin_, alpha, beta, pid_m * BM,
                    pid_n * BN, BM, BN, C_TMA, HAS_BETA, HAS_SCALE)
        it += kt1 - kt0


# ---- host side --------------------------------------------------------------------------------


def whole_tiles(tiles: int, sms: int, sk: int) -> int | None:
    """How many tiles run whole (t03's way) when the last (tiles mod sms) + sms·sk are shared out by
    k-steps; None when that changes nothing (no partial round) or there are too few tiles."""
    rest = tiles % sms
    if rest == 0 or sk < 1 or tiles < rest + sms * sk:
        return None
    return tiles - rest - sms * sk


def _split_ok(p: C.Problem, c: dict, sms: int) -> bool:
    return whole_tiles(ceil_div(p.m, c["BM"]) * ceil_div(p.n, c["BN"]), sms, c.get("SK", 1)) is not None


def usable(p: C.Problem) -> str:
    """'' when this rung can run p, else why not."""
    why = t03.usable(p)
    if why:
        return why
    if p.batch != 1:
        return "one matrix only (no batch)"
    if C.reg_a(p, False) is None:
        return "needs a K-major B for TF32/FP8 (t03 swaps or copies; this rung does not)"
    return ""


def candidates(p: C.Problem) -> list[dict]:
    """t03's plain-form candidates whose tiles leave a partial last round, with SK = 1 and 2."""
    sms = C.num_sms(p.a.device)
    out = []
    for c in t03.candidates(p):
        if c.get("SWAP") or c.get("KMAJOR"):
            continue
        for sk in (1, 2):
            v = dict(c, SK=sk)
            if _split_ok(p, v, sms):
                out.append(v)
    return out


def worth_tuning(p: C.Problem) -> bool:
    """True where some candidate tile leaves a partial last round (else t03 does the same work)."""
    return not usable(p) and bool(candidates(p))


def default_config(p: C.Problem) -> dict:
    return candidates(p)[0]


# Workspace per (device, stream): P partial tiles (FP32) and P flags, which every launch leaves at
# zero. Two streams never share one; a buffer is never first made inside a CUDA-graph capture
# (its zeroing would not run before the graph's first replay).
_WORKSPACE: dict = {}


def workspace(device: torch.device, sms: int, tile: int) -> tuple[torch.Tensor, torch.Tensor]:
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    have = _WORKSPACE.get(key)
    if have is None or have[0].numel() < sms * tile:
        if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"{NAME}: no workspace for this stream yet; run once outside the graph capture")
        have = (torch.empty(sms * tile, dtype=torch.float32, device=device),
                torch.zeros(sms + 1, dtype=torch.int32, device=device))
        _WORKSPACE[key] = have
    return have


def _launch_args(p: C.Problem, cfg: dict, by_address: bool = False):
    a, b = t03._squeeze(p.a), t03._squeeze(p.b)
    c2 = t03._squeeze(p.c)
    a_t, b_t = a.stride(-1) != 1, b.stride(-1) != 1
    BM, BN, BK = cfg["BM"], cfg["BN"], cfg["BK"]
    sms = C.num_sms(p.a.device)
    dp = whole_tiles(ceil_div(p.m, BM) * ceil_div(p.n, BN), sms, cfg.get("SK", 1))
    if dp is None:
        raise ValueError(f"{NAME}: {p.m}×{p.n} in {BM}×{BN} tiles leaves no partial round on {sms} SMs")
    a_desc = t03._desc(a, BM, BK, a_t, by_address)
    b_desc = t03._desc(b, BK, BN, b_t, by_address)
    c_tma = bool(cfg.get("C_TMA")) and c2.dim() == 2
    c_desc = t03._desc(c2, BM, BN, False, by_address) if c_tma else a_desc
    c_in, sa, sb = C.epilogue_args(p)
    ws, flags = workspace(p.a.device, sms, BM * BN)
    kwargs = dict(
        a_desc=a_desc, b_desc=b_desc, c_desc=c_desc, c_ptr=c2, i_ptr=t03._squeeze(c_in), sa_ptr=sa, sb_ptr=sb,
        ws_ptr=ws, flag_ptr=flags, M=p.m, N=p.n, K=p.k, DP_TILES=dp, scm=c2.stride(-2), scn=c2.stride(-1),
        sim=c_in.stride(-2), sin_=c_in.stride(-1), alpha=float(p.alpha), beta=float(p.beta),
        BM=BM, BN=BN, BK=BK, GROUP_M=cfg["GROUP_M"], NUM_SMS=sms, PRECISION=p.dot_precision, A_T=a_t, B_T=b_t,
        C_TMA=c_tma, HAS_BETA=p.has_beta, HAS_SCALE=p.scale_a is not None,
        REG_A=bool(cfg.get("REG_A")) and not C.interpreting(), FLAT=bool(cfg.get("FLAT")),
    )
    return (sms,), kwargs


def run(p: C.Problem, cfg: dict):
    """Launch once with configuration cfg; returns Triton's compiled kernel (None in the interpreter)."""
    grid, kwargs = _launch_args(p, cfg)
    return stream_k_kernel[grid](**kwargs, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def _plan_args(p: C.Problem, cfg: dict):
    grid, kwargs = _launch_args(p, cfg, by_address=True)
    return grid, t03.positional(stream_k_kernel, kwargs)


class Plan(t03.Plan):
    """t03's plan, whose kept arguments also hold for one stream only (the workspace is per stream)."""

    __slots__ = ()

    def launch(self, p: C.Problem) -> None:
        where = (t03.addresses(p), torch.cuda.current_stream(p.a.device).cuda_stream)
        if where == self.addresses:
            self.direct["reused_args"] += 1
        else:
            grid, self.args = self.build(p, self.cfg)
            self.run = t03.runner(self.compiled, grid)
            self.addresses = where
        self.run(*self.args)


_PLANS: dict = {}
C.PLAN_CACHES.append(_PLANS)
DIRECT: dict = {"enabled": True, "launches": 0, "reused_args": 0, "error": ""}


def gemm(p: C.Problem, config: dict | None = None, key: tuple | None = None) -> dict:
    """Run p here when this rung can split it; else through t03. Returns the configuration used,
    with "kernel" naming the rung that ran."""
    return t03.through_plan(_PLANS, DIRECT, p, config, key, "t06", _gemm_slow, _plan_args, Plan)


def _gemm_slow(p: C.Problem, config: dict | None):
    if usable(p) or not candidates(p):
        return t03.gemm(p), None
    cfg = config or C.choose(NAME, p, candidates(p), default_config(p), run)
    return dict(cfg, kernel=NAME), run(p, cfg)


def launch(a, b, c, stream=None):
    """The registry's launcher: this rung where it can split the product, else t03."""
    with C.on_stream(stream):
        gemm(C.problem_2d(a, b, c))


def traffic(m, n, k, s, bm=128, bn=256, sms=132):
    return t03.traffic(m, n, k, s, bm, bn) + 2 * sms * bm * bn * 4
