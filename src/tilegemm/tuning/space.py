"""The search space: which configurations each tensor-core rung may run a problem with.

For every rung: `candidates(rung, p)` (what the tuner times, known-good ones first),
`default(rung, p)` (what runs with no tuning and no database entry) and `adapt(rung, p, cfg)`
(a configuration tuned for another shape, made fit for p, or None where it cannot run p: the
database's nearest-bucket rule). A configuration is a dict of the rung's tile constants (BM, BN,
BK, GROUP_M, warps, stages) and options:
- t02/t03: C_TMA (C stored with TMA), FLAT (tile and k loops flattened), SWAP (C^T = B^T·A^T),
  REG_A (the MMA's A operand from registers), KMAJOR (a K-major copy first);
- t03/t05: PAD ("a", "b", "ab": those operands first copied to rows 128 bytes apart);
- t04: SPLIT (K slices), FUSED (the reduction in the same launch), TMA (tiles loaded by TMA), SWAP, REG_A;
- t05: STAGES, SPLIT (C's epilogue slices), CONSUMERS (consumer partitions), SWAP, OVERLAP (FP8
  without fast accumulation: the promotion overlapped with the next k-step's wgmma);
- t06: BN (columns of C a program), BK (K a step), warps and stages only.
Which MMA forms a layout allows is `_problem.reg_a`/`swap_form`'s rule; every width keeps BK·s of
128 bytes, the TMA swizzle's row, where the rung's pipeline allows.
"""

from __future__ import annotations

import math

import triton

from ..kernels.tensorcore import _problem as P
from ..kernels.tensorcore import t03_tma_persistent as t03
from ..kernels.tensorcore import t04_splitk as t04
from ..kernels.tensorcore import t06_gemv as t06
from ..registry import ceil_div

SMEM_BUDGET = P.SMEM_BUDGET
T02, T03, T04, T05 = "tc_persistent", "tc_tma_persistent", "tc_splitk", "tc_warp_specialized"
T06 = "tc_gemv"
TILE_KEYS = ("BM", "BN", "BK", "GROUP_M", "num_warps", "num_stages")


def cfg(bm, bn, bk, warps, stages, group=8, **extra) -> dict:
    return dict(BM=bm, BN=bn, BK=bk, GROUP_M=group, num_warps=warps, num_stages=stages, **extra)


def smem_bytes(c: dict, in_size: int, out_size: int, tma_store: bool) -> int:
    """Pipelined A and B tiles, plus the C tile staged for a TMA store."""
    pipe = P.stage_bytes(c, in_size) * c["num_stages"]
    return pipe + (c["BM"] * c["BN"] * out_size if tma_store else 0)


# Known-good configurations, tried first (a tuning budget that runs out cannot lose them): the
# H200 winners of runs 2 and 3 by operand width and regime, and the deep rings of session 31: a
# 64-row tile with 6–8 stages (192 KB in flight an SM) where the tiles make about one wave, each
# SM streaming a long K alone (1024×1024×8192, 128×8192×8192: docs/perf-notes.md, 68).
# (BM, BN, BK, warps, stages)
SEEDS = {
    1: {"big": [(128, 256, 128, 8, 3)], "mid": [(64, 128, 128, 4, 8), (64, 128, 128, 4, 4), (128, 64, 128, 4, 6),
                                                (128, 64, 128, 4, 4)],
        "small": [(64, 128, 128, 4, 8), (64, 64, 256, 4, 6), (64, 64, 256, 4, 4), (16, 64, 256, 4, 5)]},
    2: {"big": [(128, 256, 64, 8, 3)], "mid": [(64, 128, 64, 4, 8), (64, 128, 64, 4, 6), (64, 128, 64, 4, 4),
                                               (128, 64, 64, 4, 4)],
        "small": [(64, 128, 64, 4, 8), (64, 64, 128, 4, 6), (64, 64, 128, 4, 4), (16, 32, 256, 4, 4)]},
    4: {"big": [(128, 256, 32, 8, 3)], "mid": [(64, 128, 32, 4, 4), (128, 64, 32, 4, 4)],
        "small": [(32, 64, 64, 4, 4), (16, 64, 64, 4, 4)]},
}


def _mid_configs(size: int) -> list[dict]:
    """Tiles for products with few 128×128 tiles for the SMs (1024³: 64 of them for 132 SMs):
    64×128, 128×64 and 64×64, BK one or two 128-byte rows, 4 warps, 3–5 stages."""
    bk = {1: 128, 2: 64, 4: 32}.get(size, 64)
    return [cfg(64, 128, bk, 4, 4), cfg(128, 64, bk, 4, 4), cfg(64, 64, 2 * bk, 4, 4), cfg(64, 128, 2 * bk, 4, 3),
            cfg(128, 64, 2 * bk, 4, 3), cfg(64, 64, bk, 4, 5), cfg(64, 128, bk, 4, 3), cfg(64, 64, 2 * bk, 2, 3),
            cfg(128, 64, bk, 8, 5)]


def seeded(configs: list[dict], size: int, regime: str) -> list[dict]:
    """configs with this width's and regime's known-good ones moved (or added) to the front."""
    def sig(c):
        return (c["BM"], c["BN"], c["BK"], c["num_warps"], c["num_stages"])
    front = [cfg(*t) for t in SEEDS.get(size, {}).get(regime, [])]
    seen = {sig(c) for c in front}
    return front + [c for c in configs if sig(c) not in seen and not seen.add(sig(c))]


def few_tiles(p: P.Problem) -> bool:
    """Fewer 128×128 tiles of C than twice the SMs: smaller tiles may fill the GPU better."""
    tiles = ceil_div(p.m, 128) * ceil_div(p.n, 128) * p.batch
    return tiles < 2 * P.num_sms(p.a.device)


def base_configs(p: P.Problem) -> list[dict]:
    """t01–t03's tile space before pruning, by operand width and by M (known-good ones first)."""
    size = p.a.element_size()
    m = p.m
    if size == 1:  # FP8
        big = [cfg(128, 256, 128, 8, 3), cfg(128, 128, 128, 8, 4), cfg(256, 128, 128, 8, 3),
               cfg(128, 128, 128, 4, 4)]
        small = [cfg(64, 128, 128, 4, 4), cfg(64, 64, 256, 4, 4), cfg(32, 64, 256, 4, 4), cfg(16, 64, 256, 4, 5),
                 cfg(16, 32, 256, 4, 4), cfg(16, 64, 512, 4, 3), cfg(16, 32, 512, 4, 4)]
        # decode on the large weights: stages of B of 32 and 64 KB (BF16's `decode` below at one
        # byte an element: twice the K, or twice the columns again); 70B gate/up at M = 1 and 16
        # (t03 swapped, 256 columns by 256 of K, 3 stages): 62–64 µs → 57–58 (docs/perf-notes.md, 89)
        # and at the 4096 × 4096 weights, 64 columns by 512 of K with 4 stages (160 KB in flight an
        # SM): 9.8–10.1 µs → 9.2–9.7 with L2 flushed, 5.8 → 5.2 warm (M = 16; docs/perf-notes.md, 100)
        decode = [cfg(16, 256, 256, 4, 3), cfg(16, 128, 256, 4, 4), cfg(16, 128, 512, 4, 3), cfg(16, 64, 512, 4, 4)]
        batch = batch128 = []
    elif size == 2:  # FP16 / BF16
        big = [cfg(128, 256, 64, 8, 3), cfg(128, 256, 64, 8, 4), cfg(128, 128, 64, 8, 4), cfg(256, 128, 64, 8, 3),
               cfg(128, 128, 64, 4, 4)]
        small = [cfg(64, 128, 64, 4, 4), cfg(64, 64, 128, 4, 4), cfg(32, 64, 128, 4, 4), cfg(16, 64, 128, 4, 5),
                 cfg(16, 32, 256, 4, 4)]
        # decode on the large weights: a stage of B twice as large as (16, 64, 128)'s, 32 KB (one
        # TMA copy on t03; t02 takes the tiles too, with pointer loads) and 128 KB in flight an SM,
        # as 128 columns (8B gate/up at M = 16: 35.5 → 31.6 µs) or 256 of K (8B q/o at M = 16:
        # 14.4 → 13.1 µs); docs/perf-notes.md, 86
        decode = [cfg(16, 128, 128, 4, 4), cfg(16, 64, 256, 4, 4)]
        # a batch of decode (16 < M ≤ 64) on the same weights: mostly 32 KB stages of B again, as
        # 256 of K on 64 columns (a 32-row tile, swapped: wgmma's N), 128 columns by 128 of K, or
        # 256 columns on two warpgroups; 256 of K on 32 columns, and 6 stages of 64×128×64 (16 KB
        # each); 70B gate/up at M = 64: 128.9 → 115.7 µs, 8B q/o 16.5 → 13.7 (docs/perf-notes.md, 87)
        batch = [cfg(32, 64, 256, 4, 4), cfg(64, 128, 128, 4, 4), cfg(64, 128, 128, 4, 3), cfg(64, 32, 256, 4, 4),
                 cfg(64, 256, 64, 8, 4), cfg(64, 128, 64, 4, 6)]
        # past M = 64 (one 128-row tile at M = 128): 128×128×64 with a fifth stage, 160 KB in
        # flight; 8B gate/up at M = 128, 36.1–36.4 → 34.0–35.4 µs (docs/perf-notes.md, 90)
        batch128 = [cfg(128, 128, 64, 4, 5)]
    else:  # FP32 inputs (TF32 or IEEE)
        # TF32: 128×256×32 (3 stages, 2 consumer warpgroups) won runs 2–4; the others test deeper
        # pipelines (4–5 stages of BK = 32) and BK = 64
        big = [cfg(128, 256, 32, 8, 3), cfg(128, 256, 32, 8, 4), cfg(128, 128, 64, 8, 3), cfg(128, 128, 32, 8, 5),
               cfg(256, 128, 32, 8, 3), cfg(128, 128, 32, 4, 4)]
        small = [cfg(64, 128, 32, 4, 4), cfg(64, 64, 64, 4, 4), cfg(32, 64, 64, 4, 4), cfg(16, 64, 64, 4, 4)]
        # decode: 32 columns a program, 128 programs at 4096 columns, each over all of K with no
        # split to reduce (cuBLAS's GEMV there: 128 blocks; docs/perf-notes.md, 29)
        decode = [cfg(16, 32, 128, 4, 4), cfg(16, 32, 256, 4, 3)]
        batch = batch128 = []
    if m <= 16:
        return seeded((small[3:] if size == 1 else small[-3:]) + decode, size, "small")
    if m <= 64:
        return seeded(small[:4] if size == 1 else small + batch, size, "small")
    if m <= 256:
        return seeded(small[:2] + _mid_configs(size)[:3] + big + batch128, size, "small")
    if few_tiles(p):
        mid = _mid_configs(size)
        return seeded(mid[:2] + big[:1] + mid[2:] + big[-1:], size, "mid")
    return seeded(big, size, "big")


def _oversized(c: dict, p: P.Problem) -> bool:
    """A tile more than twice the (power-of-two rounded) problem in M or N."""
    return c["BM"] > 2 * max(triton.next_power_of_2(p.m), 16) or c["BN"] > 2 * max(triton.next_power_of_2(p.n), 16)


def prune(configs: list[dict], p: P.Problem, tma_store: bool) -> list[dict]:
    """Drop configurations that overflow shared memory, and tiles far larger than the problem."""
    ins, outs = p.a.element_size(), p.c.element_size()
    keep = [c for c in configs if smem_bytes(c, ins, outs, tma_store) <= SMEM_BUDGET and not _oversized(c, p)]
    return keep or [min(configs, key=lambda c: c["BM"] * c["BN"])]


def grid_up(x: int) -> int:
    """x rounded up to the buckets' grid: powers of two to 8, then a quarter octave apart (5, 6, 7
    and 8 eighths of the next power of two: … 2048, 2560, 3072, 3584, 4096, 5120 …).

    A tile's wave count is what a configuration tuned at one shape carries badly to another: with
    power-of-two buckets, 128×14336×4096 took the tile tuned at 128×16384×4096 (0.70× cuBLAS;
    tuned at its own shape 0.95×), 3072³ the one tuned at 4096³ (docs/perf-notes.md, 51 and 52)."""
    x = max(int(x), 1)
    if x <= 8:
        return triton.next_power_of_2(x)
    step = triton.next_power_of_2(x) // 8
    return -(-x // step) * step


def shape_bucket(p: P.Problem) -> str:
    up = grid_up
    return f"{up(p.m)}x{up(p.n)}x{up(p.k)}" + (f"b{p.batch}" if p.batch > 1 else "")


def as_t02(rung: str, c: dict) -> dict:
    """A TMA rung's tuned configuration as t02's (the same tile, pointer loads): t03's tile as
    it is; t05's with 8 warps for tiles of 128×256 and more (its two consumer warpgroups' share
    of the accumulator), else 4, and at most 3 stages. A side that is not a power of two (t05's
    192 rows on three consumer warpgroups, its 192 or 96 columns in two boxes) becomes the power
    of two below it: Triton's blocks are powers of two."""
    if rung != T05:
        return c
    bm, bn = (1 << (x.bit_length() - 1) for x in (c["BM"], c["BN"]))
    warps = 8 if bm * bn >= 128 * 256 else 4
    return cfg(bm, bn, c["BK"], warps, min(int(c.get("STAGES", 3)), 3), c.get("GROUP_M", 8))


def as_t03(rung: str, c: dict) -> dict:
    """A t05 configuration as t03's: t02's form of its tile (`as_t02`), and where t05 computed
    C^T = B^T·A^T (TF32 with a row-major B) the same swapped form on t03, whose swapped tiles
    are at most 128 rows (`_problem.swap_form`); unswapped, that B would need a K-major copy.
    PAD stays."""
    out = as_t02(rung, c)
    if rung == T05 and c.get("SWAP"):
        out = dict(out, BM=min(out["BM"], 128), SWAP=True)
    return dict(out, PAD=c["PAD"]) if c.get("PAD") else out


def _tile(c: dict) -> dict:
    return {k: c[k] for k in TILE_KEYS}


# ---- t02 persistent (and t01) --------------------------------------------------------------------


def _t02_candidates(p: P.Problem) -> list[dict]:
    return prune(base_configs(p), p, tma_store=False)


def _t02_adapt(p: P.Problem, c: dict) -> dict | None:
    c = _tile(c)
    return c if smem_bytes(c, p.a.element_size(), p.c.element_size(), False) <= SMEM_BUDGET else None


# ---- t03 TMA persistent --------------------------------------------------------------------------


MAX_STAGES = 8  # the deepest ring the seeds use (64-row tiles over a long K, SEEDS)


def one_span(p: P.Problem, form: dict) -> dict:
    """form, where its MMA's A operand comes from registers under FP8 promotion, with one promotion
    span a k-step (BK = PROMOTE_K) and the stages that keep its bytes in flight (within the shared
    memory and MAX_STAGES): Triton 3.6 and 3.9 fail to compile such a form (their TritonGPUPipeline
    pass) where a k-step holds more than one span and BN passes 32, which one span a step compiles
    at every tile (docs/perf-notes.md, 156). Any other form as it is."""
    if not (form.get("REG_A") and p.promoted and form["BK"] > P.PROMOTE_K and form["BN"] > 32):
        return form
    out = dict(form, BK=P.PROMOTE_K)
    staged = form["BM"] * form["BN"] * p.c.element_size() if form.get("C_TMA") else 0
    per = P.stage_bytes(out, p.a.element_size())
    room = max(1, (SMEM_BUDGET - staged) // per)
    out["num_stages"] = max(form["num_stages"], min(MAX_STAGES, room, form["num_stages"] * form["BK"] // P.PROMOTE_K))
    return out


def unique(forms: list[dict]) -> list[dict]:
    """forms without repeats (one_span may make two tiles one), in order."""
    seen, out = set(), []
    for f in forms:
        key = tuple(sorted(f.items()))
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _t03_variants(p: P.Problem, c: dict) -> list[dict]:
    """The forms of tile c that run p without a copy (swapped where a narrow tile misses wgmma or
    the plain form needs a copy; plain, with A from registers where a 32/8-bit A is not K-major),
    and where neither works, a K-major copy first and then Triton's own way."""
    narrow = p.a.element_size() != 2  # TF32 / FP8: wgmma wants K-major operands from shared memory
    bad_layout = narrow and (not P.is_kmajor(p.a, "a") or not P.is_kmajor(p.b, "b"))
    plain, swapped = P.reg_a(p, False), P.reg_a(p, True)
    out = []
    swap = P.swap_form(p, c["BM"])
    if swap:
        out.append(one_span(p, dict(c, **swap)))
    if plain is not None:
        out.append(one_span(p, dict(c, REG_A=True)) if plain else c)
    if bad_layout:  # a K-major copy (2·K·N·s extra bytes, counted), then Triton's own way
        if p.k * p.a.element_size() % 16 == 0:  # the copy's rows are K long: TMA needs them 16-byte aligned
            out.append(dict(c, KMAJOR=True))
        if plain is None and swapped is None:
            out.append(c)
    return out


PAD_MIN_MNK = 1 << 33  # M·N·K (2048³) from which PAD's copy, 2·R·C·s bytes, can pay for itself


def pad_forms(p: P.Problem) -> list[str]:
    """The PAD values worth timing for p: B's, A's and both operands' copies to rows 128 bytes
    apart, of those whose rows are 16- but not 128 bytes apart (a shape's property: a base address
    is a call's), in products large enough for a copy to pay. Such rows cost a TMA box row two L2
    lines instead of one: t05 at 3000×5000×7000 BF16 runs 407 µs as given, 294 with B's rows
    padded (docs/perf-notes.md, 51 and 53)."""
    if p.m * p.n * p.k < PAD_MIN_MNK:
        return []
    odd = t03.padded(p, {"PAD": "ab"}, pitch_only=True)
    return [w for w in ("b", "a", "ab") if all(x in odd for x in w)]


def _padded(p: P.Problem, configs: list[dict]) -> list[dict]:
    """configs, each followed by its PAD forms (none for a KMAJOR one: its copy is aligned)."""
    forms = pad_forms(p)
    return [v for c in configs for v in [c] + ([] if c.get("KMAJOR") else [dict(c, PAD=w) for w in forms])]


def _c_tma(p: P.Problem, c: dict) -> bool:
    """Can C be stored with TMA for tile c (one matrix, aligned, and the staged tile fits)?"""
    c2 = t03._squeeze(p.c)
    return (p.batch == 1 and c2.dim() == 2 and t03._tma_ok(c2, -1)
            and smem_bytes(c, p.a.element_size(), p.c.element_size(), True) <= SMEM_BUDGET)


def _t03_candidates(p: P.Problem) -> list[dict]:
    ins = p.a.element_size()
    out = []
    for i, c in enumerate(prune(base_configs(p), p, tma_store=False)):
        c = dict(c, C_TMA=_c_tma(p, c))
        variants = [c]
        if ins != 4 and (i < 2 or c["BN"] == 256) and p.m > 256:
            # FLAT: one loop over (tile, k-step), so the next tile's first copies overlap this
            # tile's epilogue. It won some FP8/FP16 shapes and lost others, so both are timed;
            # it lost every TF32 shape tried, so FP32 operands skip it (docs/perf-notes.md, 16)
            variants = [c, dict(c, FLAT=True)]
        for v in variants:
            forms = _t03_variants(p, v)
            out += _padded(p, forms) if i < 3 else forms
    return unique(out)


def _t03_adapt(p: P.Problem, c: dict) -> dict | None:
    base = _tile(c)
    if smem_bytes(base, p.a.element_size(), p.c.element_size(), False) > SMEM_BUDGET:
        return None
    base = dict(base, C_TMA=_c_tma(p, base), **({"FLAT": True} if c.get("FLAT") and p.a.element_size() != 4 else {}))
    forms = _t03_variants(p, base)
    same = [v for v in forms if bool(v.get("SWAP")) == bool(c.get("SWAP")) and bool(v.get("KMAJOR")) == bool(c.get("KMAJOR"))]
    got = (same or forms or [None])[0]
    return dict(got, PAD=c["PAD"]) if got and c.get("PAD") and not got.get("KMAJOR") else got  # KMAJOR's copy: no PAD


# ---- t04 split-K ---------------------------------------------------------------------------------


def splitk_applicable(p: P.Problem, sms: int | None = None) -> bool:
    """Worth tuning split-K: few tiles of C for the SMs, and K long enough to split."""
    sms = sms or P.num_sms(p.a.device)
    tiles = ceil_div(p.m, 128) * ceil_div(p.n, 128) * p.batch
    return p.k >= 256 and (p.m <= 128 or tiles < sms)


def _t04_bases(size: int) -> list[tuple]:
    """(BM, BN, BK16, warps, stages) with BK16 the depth for 2-byte inputs (×2 for FP8, ÷2 for FP32).
    The 128-row tiles with 4 stages won M = 128 with TMA loads (one program an SM, 2–4 slices:
    docs/perf-notes.md, 55)."""
    return [(16, 64, 128, 4, 4), (16, 128, 128, 4, 4), (32, 64, 128, 4, 4), (64, 64, 128, 4, 4),
            (64, 128, 64, 4, 4), (128, 128, 64, 8, 3), (128, 64, 64, 4, 4), (128, 128, 64, 8, 4),
            (128, 128, 64, 4, 4), (128, 256, 64, 8, 4)]


def _t04_resident(smem: int) -> int:
    """Programs of a tile that fit on one SM by shared memory (the split count aims at filling
    these), at most 3."""
    return max(1, min(3, (SMEM_BUDGET + 1024) // max(smem, 1)))


# Known-good split-K configurations, tried first: (BM, BN, BK16, warps, stages, SPLIT) by regime
T04_SEEDS = {
    "decode": [(16, 64, 128, 4, 4, 4), (16, 64, 128, 4, 4, 6)],
    # FP8 below 64 rows: Hopper's FP8 MMA is wgmma only (64-row tiles); a 16-row tile gets mma.sync
    # on converted operands, so 64-row tiles, three quarters padding, are tried first
    "fp8_decode": [(64, 64, 128, 4, 4, 4), (64, 64, 128, 4, 4, 8), (64, 128, 128, 4, 3, 4), (64, 32, 128, 4, 4, 4),
                   (16, 64, 128, 4, 4, 3), (16, 64, 256, 4, 4, 4), (16, 32, 256, 4, 4, 8), (16, 32, 128, 4, 4, 16)],
    "mid": [(128, 64, 64, 4, 4, 2), (64, 128, 64, 4, 4, 2), (64, 64, 64, 4, 4, 2)],
    # 16-bit, 32 < M ≤ 64 (t04's BM cap): 32 KB stages of B in two slices; the tuner's pick on the
    # 70B's down at M = 64 (112.6 µs; in the probe 114.5, tied with t03's 64×64×128 with 6 stages)
    "batch": [(64, 128, 128, 4, 4, 2)],
}


def _t04_scale(size: int) -> float:
    return {1: 2.0, 2: 1.0, 4: 0.5}.get(size, 1.0)


def _t04_caps(p: P.Problem) -> tuple[int, int]:
    size = p.a.element_size()
    mcap = max(64 if size == 1 else 16, triton.next_power_of_2(p.m))  # FP8: wgmma's 64-row tiles
    return mcap, max(16, triton.next_power_of_2(p.n))


def _t04_fits(p: P.Problem, c: dict) -> bool:
    mcap, ncap = _t04_caps(p)
    return (c["BM"] <= mcap and c["BN"] <= ncap and c["SPLIT"] <= max(1, ceil_div(p.k, c["BK"]))
            and P.stage_bytes(c, p.a.element_size()) * c["num_stages"] <= SMEM_BUDGET)


def _t04_square(p: P.Problem, scale: float, sms: int) -> list[dict]:
    """M > 128 with few tiles (1024³): 64/128-wide tiles, 2–4 splits, about 2–4 programs per SM."""
    out = []
    for bm, bn, bk16, warps, stages in ((128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (64, 64, 64, 4, 4),
                                        (64, 64, 128, 4, 3), (128, 128, 64, 8, 3), (64, 128, 64, 4, 3)):
        bk = int(bk16 * scale)
        tiles = ceil_div(p.m, bm) * ceil_div(p.n, bn) * p.batch
        for split in (2, 3, 4):
            if split > ceil_div(p.k, bk):
                continue
            score = abs(math.log2(tiles * split / (2.5 * sms)))
            out.append((score, dict(cfg(bm, bn, bk, warps, stages), SPLIT=split)))
    out.sort(key=lambda t: t[0])
    return [c for _, c in out]


def _t04_decode(p: P.Problem, size: int, scale: float, sms: int) -> list[dict]:
    mcap, ncap = _t04_caps(p)
    scored = []
    bases = list(_t04_bases(size))
    if size == 1 and p.m <= 16:  # FP8 decode: narrow N tiles, deep K (256/512), many splits
        bases = [(16, 64, 128, 4, 4), (16, 32, 128, 4, 4), (16, 64, 256, 4, 3), (16, 32, 256, 4, 4)] + bases
    for bm, bn, bk16, warps, stages in bases:
        bk = int(bk16 * scale)
        smem = (bm * bk + bk * bn) * size * stages
        if bm > mcap or bn > ncap or smem > SMEM_BUDGET:
            continue
        tiles = ceil_div(p.m, bm) * ceil_div(p.n, bn) * p.batch
        k_tiles = ceil_div(p.k, bk)
        for split in (2, 3, 4, 6, 8, 12, 16):
            if split > k_tiles:
                continue
            score = abs(math.log2(tiles * split / (_t04_resident(smem) * sms)))
            scored.append((score, bm, dict(cfg(bm, bn, bk, warps, stages), SPLIT=split)))
    scored.sort(key=lambda t: (t[0], -t[1]))
    return [c for _, _, c in scored]


def _t04_mma_variants(p: P.Problem, c: dict) -> list[dict]:
    """c as C^T = B^T·A^T (SWAP) and as C = A·B. Swapped, a tile of BM < 64 rows is wgmma's N
    (8…256) instead of mma.sync's rows, and a row-major TF32 B is read from registers instead of
    being transposed in shared memory."""
    swap = P.swap_form(p, c["BM"])
    plain = one_span(p, dict(c, REG_A=True)) if P.reg_a(p, False) and c["BM"] >= 64 else c
    return [one_span(p, dict(c, **swap)), plain] if swap else [plain]


def _t04_default(p: P.Problem) -> dict:
    """Heuristic without tuning: the widest tile M allows, split until ≈ 2 programs per SM."""
    size = p.a.element_size()
    bk = {1: 256, 2: 128, 4: 64}.get(size, 128)
    bm = 16 if p.m <= 16 else (32 if p.m <= 32 else 64)
    tiles = ceil_div(p.m, bm) * ceil_div(p.n, 64) * p.batch
    want = max(1, (2 * P.num_sms(p.a.device)) // max(tiles, 1))
    split = max(1, min(16, want, ceil_div(p.k, bk)))
    return dict(cfg(bm, 64, bk, 4, 4), SPLIT=split)


def _t04_candidates(p: P.Problem, limit: int = 10) -> list[dict]:
    size = p.a.element_size()
    sms = P.num_sms(p.a.device)
    scale = _t04_scale(size)
    if p.m > 128:
        seeds, rest = T04_SEEDS["mid"], _t04_square(p, scale, sms)
    else:
        seeds = (T04_SEEDS["fp8_decode"] if size == 1 and p.m <= 16 else T04_SEEDS["decode"] if p.m <= 16
                 else T04_SEEDS["batch"] if size == 2 and p.m <= 64 else [])
        rest = _t04_decode(p, size, scale, sms)
    front = [dict(cfg(bm, bn, int(bk16 * scale), w, st), SPLIT=sp) for bm, bn, bk16, w, st, sp in seeds]
    out, seen = [], set()
    for c in front + rest:
        sig = (c["BM"], c["BN"], c["BK"], c["num_warps"], c["num_stages"], c["SPLIT"])
        if sig in seen or not _t04_fits(p, c):
            continue
        seen.add(sig)
        out.append(c)
    out = out[:limit + (4 if size == 1 and p.m <= 16 else 0)] or [_t04_default(p)]
    out = unique([v for c in out for v in _t04_mma_variants(p, c)])
    # each with the reduction fused into the same launch first (one launch less: µs at these sizes),
    # and each of those with its tiles loaded by TMA first, where the operands allow it past decode
    out = [v for c in out for v in (dict(c, FUSED=True), c)]
    return [v for c in out for v in (dict(c, TMA=True), c)] if _t04_tma(p) else out


def _t04_tma(p: P.Problem) -> bool:
    """Worth timing t04's TMA loads: the operands allow them (`t04.tma_ready`) and M > 16 (below,
    t06 and t04's 16-row tiles serve decode, tuned without it)."""
    return p.m > 16 and t04.tma_ready(p)


def _t04_adapt(p: P.Problem, c: dict) -> dict | None:
    base = dict(_tile(c), SPLIT=int(c["SPLIT"]))
    if not _t04_fits(p, base) and base != _t04_default(p):  # (the default: what the tuner times where no tile
        # fits p, N ≤ 8 for one; its winner there was refused, and p took the database's or the heuristic's)
        return None
    forms = _t04_mma_variants(p, base)
    same = [v for v in forms if bool(v.get("SWAP")) == bool(c.get("SWAP"))] or forms
    opts = {k: True for k in ("FUSED", "TMA") if c.get(k)}  # TMA where the operands do not allow it: pointer loads
    return dict(same[0], **opts)


# ---- t05 warp-specialised ------------------------------------------------------------------------

# (BM, BN, BK, STAGES, SPLIT, CONSUMERS): the tuner's candidates, first = default. BK is for 16-bit
# inputs; other widths keep its 128 bytes of K per row (BK·2/size: FP8 128, TF32 32)
T05_STAGE_CONFIGS = (
    (128, 256, 64, 3, 1, 1),  # t03's best tile, one consumer partition of 8 warps
    (128, 256, 64, 4, 2, 1),  # a fourth stage, paid for by storing C in two 128×128 slices
    (128, 256, 64, 3, 1, 2),  # two consumer partitions, each freeing its stages on its own
    (128, 128, 64, 6, 1, 1),  # narrower tile, deeper ring
    # 192 rows over three consumer warpgroups (A in three 64-row boxes): 1.5× the tiles of
    # 128×256 where those leave the last wave mostly empty (3072²: 384 tiles for 132 SMs, 2.9
    # waves, against 288 tiles' 2.2 run as 3; docs/perf-notes.md, 64)
    (192, 128, 64, 4, 1, 3),
    # B's tile in two boxes (192 = 128 + 64, 96 = 64 + 32; t05's WIDE form). 192×192 reads 20%
    # fewer bytes a FLOP than 192×128 and its 256 tiles at 3000² fill two waves; 192×96 makes 128
    # tiles at 1536² (one wave, 0.97 full) where 192×128 makes 96 (docs/perf-notes.md, 107)
    (192, 192, 64, 4, 1, 3),
    (192, 96, 64, 5, 1, 3),
)
# The swapped form (TF32 with a row-major B): the MMA's tile is 128 of C's columns × 256 of its
# rows (cuBLAS's TF32 tile, seen in ncu: docs/perf-notes.md, 20), on one consumer partition of 8
# warps (each warpgroup 64 of the 128 columns); SPLIT slices C's rows. Two partitions compute
# correctly, but Triton 3.6's ptxas then serialises every wgmma of the form (warning C7512: with a
# register operand, a worker partition's setmaxnreg defeats its wgmma pipelining), 5–10% slower
# on every shape timed (docs/perf-notes.md, 26), so they are not candidates.
T05_SWAP_CONFIGS = (
    (256, 128, 64, 4, 4, 1),  # 4 stages (192 KB), C stored in four 64×128 FP32 slices
    (256, 128, 64, 3, 2, 1),  # 3 stages (144 KB), two 128×128 slices
    # 192 of C's rows, the MMA's N side as two boxes of A (128 + 64, two wgmmas a k-step): 384
    # tiles at 3072² (2.9 waves) where 256×128 makes 288 (2.2, run as 3; docs/perf-notes.md, 108)
    (192, 128, 64, 4, 1, 1),  # 4 stages (160 KB), C in 64-row slices
    (192, 128, 64, 5, 2, 1),  # 5 stages (200 KB), 32-row slices
)


def t05_cfg(bm, bn, bk, stages, split=1, consumers=1, group=8, swap=False) -> dict:
    c = dict(BM=bm, BN=bn, BK=bk, STAGES=stages, SPLIT=split, CONSUMERS=consumers, GROUP_M=group)
    return dict(c, SWAP=True) if swap else c


def t05_wave_fitted(c: dict) -> bool:
    """A t05 tile of 192 rows, or with an N side of 192 or 96: one the tuner takes for the waves
    its bucket's shape makes (3072²: 384 tiles of 192×128 for 132 SMs, 2.9 waves, where 256×128
    makes 288, run as 3; docs/perf-notes.md, 64, 107, 108)."""
    return c.get("BM", 1) % 3 == 0 or c.get("BN", 1) % 3 == 0


def _waves(p: P.Problem, tiles) -> tuple[int, ...]:
    """The waves p makes of each (BM, BN) tile over the GPU's SMs."""
    sms = P.num_sms(p.a.device)
    return tuple(ceil_div(ceil_div(p.m, bm) * ceil_div(p.n, bn) * p.batch, sms) for bm, bn in tiles)


def t05_fits_waves(p: P.Problem, c: dict) -> bool:
    """Does t05 tile c suit p's waves: a tile that is not wave-fitted always, a wave-fitted one
    where it runs p in less time than the standard tile (128×256; 256×128 swapped)? A wave of
    tiles is counted at what each tile loads a k-step, (BM + BN)·BK: per wave against 128×256,
    192×96 ran 0.70 of its time, TF32's swapped 192×128 0.96, 192×192 1.12, where the loads give
    0.75, 0.83 and 1.00 and the areas 0.56, 0.75 and 1.13. So counted, 26 of the 28 device times
    of wave-fitted tiles against the tile their shape ran (docs/perf-notes.md, 107 and 108; TF32
    2560³: 192×128 156.5 µs, 256×128 113.7) come out the way they ran; the other two are a tie
    (192×192 at 3072³, 0.1%) and 192×96 at 1024×1024×8192, whose tile is t03's 64×128."""
    if not t05_wave_fitted(c):
        return True
    std = (256, 128) if c.get("SWAP") else (128, 256)
    mine, theirs = _waves(p, ((c["BM"], c["BN"]), std))
    return mine * (c["BM"] + c["BN"]) < theirs * sum(std)


def t04_fits_k(p: P.Problem, c: dict, timed_at) -> bool:
    """Does split-K tile c, timed at shape timed_at, suit p's K: past decode (M > 128), a tile that
    splits K only where p's K is at least 3/4 of the timed one's (every K of a bucket is, of its
    own entry's). Each slice's share of K shrinks with K while the partial sums' reduction does
    not: TF32 648×872×2072 ran 0.63× cuBLAS on 768×1024×4096's SPLIT=4 tile and 0.85× on the 1024
    bucket's unsplit t03 tile (docs/perf-notes.md, 114). In decode a split feeds the SMs a weight
    too narrow for them, at any K (TF32 1×4096×4096 with B = Wᵀ takes the row-major 1×4096×14336's
    SPLIT=3)."""
    return int(c.get("SPLIT", 1)) == 1 or not timed_at or p.m <= 128 or 4 * p.k >= 3 * int(timed_at[2])


MMA_PER_CLOCK = {1: 4096, 2: 2048, 4: 1024}  # dense multiply-adds an SM's tensor cores make a clock on
# Hopper, by input width in bytes (FP8, FP16/BF16, TF32): 989 TFLOP/s BF16 at 132 SMs and 1.83 GHz
LOAD_BYTES_PER_CLOCK = 32  # operand bytes a tile is counted to load per SM clock: about the L2's
# bandwidth shared over the SMs (7.7 TB/s at 132 SMs and 1.83 GHz). Chosen over 219 held-out shapes
# past decode, each with its nearest entries timed at the shape: 24 to 48 B pick alike (docs/perf-notes.md, 115)


def k_slices(rung: str, c: dict) -> int:
    """The slices of K each tile of configuration c is cut into: t04's SPLIT (t05's SPLIT cuts its
    epilogue's store of C, not K)."""
    return int(c.get("SPLIT", 1)) if rung == T04 else 1


def wave_cost(p: P.Problem, rung: str, c: dict) -> float | None:
    """What `rung`'s tile c costs p in SM clocks, as its waves count it: the waves its tiles make
    over the SMs, each the longer of a tile's MMAs (BM·BN multiply-adds a step of K) and its
    operand loads ((BM + BN) rows of the input width) over K. Few tiles leave SMs idle (640×400×4336
    BF16: 40 tiles of 64×128; 70 of 64×64 ran 1.21-1.31× faster), a partial last wave costs a whole one
    (348×4958×1919: 234 tiles of 128×64 in two waves; 117 of 128×128 in one, 1.37×). None where
    the count says little: a configuration without a BM×BN tile (t06's), a tile under 64 on a side
    (a decode tile: 464×264×368 BF16 ran 0.60× cuBLAS on 256³'s 16×32, 0.91× on a 64×64), and K
    slices (what a split costs is its reduction as much as its waves: TF32 132×1024×4096 ran 0.68× on
    64×128 in 4 slices, 0.83× on 64×64 in 4; docs/perf-notes.md, 115)."""
    if "BM" not in c or "BN" not in c or min(c["BM"], c["BN"]) < 64 or k_slices(rung, c) > 1:
        return None
    bm, bn, width = c["BM"], c["BN"], p.a.element_size()
    (waves,) = _waves(p, ((bm, bn),))
    return waves * max(bm * bn / MMA_PER_CLOCK[width], (bm + bn) * width / LOAD_BYTES_PER_CLOCK) * p.k


# every tile t05_fits_waves weighs: the standard ones and the wave-fitted candidates
_WAVE_TILES = tuple(sorted({(128, 256), (256, 128)} | {(bm, bn) for bm, bn, *_ in T05_STAGE_CONFIGS + T05_SWAP_CONFIGS
                                                       if t05_wave_fitted(dict(BM=bm, BN=bn))}))


def waves_note(p: P.Problem, rung: str, c: dict, timed_at: tuple | None) -> str | None:
    """For tilegemm.explain: where `rung`'s configuration c was timed at another shape than p's,
    the waves its tile (in t04's K slices) makes there and here; and where p fills its waves much less (a quarter of the SMs'
    time or more left idle that the timed shape used), the command that times tiles at p's own
    waves (docs/perf-notes.md, 113: a tile tuned at a bucket's corner runs a shape inside it at
    0.59-0.82 of cuBLAS where one tuned at the shape ran 0.93 at 1081×3760×2200)."""
    if not timed_at or tuple(timed_at) == (p.m, p.n, p.k) or "BM" not in c or "BN" not in c:
        return None
    sms, split = P.num_sms(p.a.device), k_slices(rung, c)

    def fill(m: int, n: int, batch: int) -> tuple[int, float, float]:
        tiles = ceil_div(m, c["BM"]) * ceil_div(n, c["BN"]) * batch * split
        return tiles, tiles / sms, tiles / (ceil_div(tiles, sms) * sms)

    t0, w0, f0 = fill(timed_at[0], timed_at[1], p.batch)
    t1, w1, f1 = fill(p.m, p.n, p.batch)
    said = (f"its {c['BM']}×{c['BN']} tile{f' in {split} K slices' if split > 1 else ''} was timed at "
            f"{'×'.join(map(str, timed_at))}: {t0} tiles, {w0:.2f} waves of {sms} SMs; here {t1}, {w1:.2f} waves")
    if f1 < f0 - 0.25:
        lay = "" if p.layout()[1] == "n" else " --layouts t"
        said += (f", the waves {f1:.0%} full against {f0:.0%} there: `tilegemm tune --sizes {p.m}x{p.n}x{p.k} "
                 f"--dtypes {'fp8-promoted' if p.promoted else p.precision}{lay}` times tiles at this shape's own "
                 "waves")
    return said


def t05_waves(p: P.Problem) -> tuple[int, ...]:
    """The waves p makes of every tile `t05_fits_waves` weighs: beside p's bucket, what a decision
    that borrows another bucket's wave-fitted tile depends on (two shapes of one bucket may differ:
    2304³ fits 192×128 in two waves, 2560³ does not)."""
    return _waves(p, _WAVE_TILES)


def _t05_sliced(c: dict) -> tuple[int, int]:
    """(the MMA's rows, the length of its N side that SPLIT cuts into C slices): C's rows and B's
    columns, swapped C's columns and A's rows; where the N side is two boxes (192 or 96: 2/3 and
    1/3 of it), the narrower box's (t05.epilogue_box)."""
    rows, n = (c["BN"], c["BM"]) if c.get("SWAP") else (c["BM"], c["BN"])
    return rows, (n // 3 if n % 3 == 0 else n)


def t05_smem_bytes(c: dict, in_size: int, out_size: int) -> int:
    """The ring, the C slices (one per consumer partition: together the MMA's rows × 1/SPLIT of
    the sliced N side) and the barriers."""
    ring = (c["BM"] + c["BN"]) * c["BK"] * in_size * c["STAGES"]
    rows, n = _t05_sliced(c)
    return ring + rows * n // c["SPLIT"] * out_size + 512  # + barriers and alignment


def t05_worth_tuning(p: P.Problem) -> bool:
    """At least three quarters of a wave of 128×256 tiles (2048² is 128 tiles for 132 SMs), or two
    thirds of a wave of 192×128 ones (1536²: 96): below that t03's and t04's smaller tiles are the
    ones to time (every candidate here is 128 by 256, 128 by 128 or 192 by 96 and more), and the
    tuner's time is better spent there."""
    sms = P.num_sms(p.a.device)
    return (4 * ceil_div(p.m, 128) * ceil_div(p.n, 256) >= 3 * sms
            or 3 * ceil_div(p.m, 192) * ceil_div(p.n, 128) >= 2 * sms)


def _t05_candidates(p: P.Problem) -> list[dict]:
    ins, outs = p.a.element_size(), p.c.element_size()
    swap = P.swapped_tf32(p)
    out = []
    for bm, bn, bk, stages, split, consumers in T05_SWAP_CONFIGS if swap else T05_STAGE_CONFIGS:
        if not swap and outs > 2:
            split *= outs // 2  # room for a wider C slice
        c = t05_cfg(bm, bn, bk * 2 // ins, stages, split, consumers, swap=swap)
        if t05_smem_bytes(c, ins, outs) <= SMEM_BUDGET and _t05_sliced(c)[1] % split == 0:
            out.append(c)
    if p.promoted:  # OVERLAP forms first; 128×128 on two partitions of 4 warps is one of them only
        two = t05_cfg(128, 128, 128, 5, 1, 2)
        more = [two] if t05_smem_bytes(two, ins, outs) <= SMEM_BUDGET else []
        out = [dict(c, OVERLAP=True) for c in out + more if t05_overlaps(p, c)] + out
    return _padded(p, out)


def t05_overlaps(p: P.Problem, c: dict) -> bool:
    """Does t05 run p with c's promotion overlapped (OVERLAP)? Where it can (`t05.can_overlap`: FP8
    without fast accumulation, BK the span promoted, one box of N) and at most 64×128 of C a
    consumer warpgroup: acc and two partial sums are 3 × 64 registers a thread there, within the
    240 that one or two consumer partitions get; t05's three get 160-168, and its 192×128 spilled
    1.6 KB (CPU compile for sm_90, ptxas). 64×128 a warpgroup ran promoted 8192³ in 0.764 ms where
    the implicit promotion's best tile took 0.873 (H100; docs/perf-notes.md, 147)."""
    from ..kernels import tensorcore as tc  # (t05 is Gluon's: imported where it runs)

    return p.promoted and c["CONSUMERS"] <= 2 and c["BN"] <= 128 and tc.rung_module(T05).can_overlap(p, c)


def _t05_adapt(p: P.Problem, c: dict) -> dict | None:
    if bool(c.get("SWAP")) != P.swapped_tf32(p):
        return None
    if c.get("OVERLAP") and not t05_overlaps(p, c):
        c = {k: v for k, v in c.items() if k != "OVERLAP"}  # (the same tile, its promotion not overlapped)
    return c if t05_smem_bytes(c, p.a.element_size(), p.c.element_size()) <= SMEM_BUDGET else None


# ---- t06 (GEMV form, M ≤ 4) -------------------------------------------------------------------

# (BN, BK, warps, FOLD): the winners of 16 tiles timed on the H200 over the 8B model's projections
# at M = 1-4 (docs/perf-notes.md, 42), the best across them first. M = 1 favours narrow tiles over
# the whole of K in 1024-2048-element steps; at M = 2-4 a program takes every row, the
# accumulator's registers decide, and FOLD = 8 (K's neighbours summed within a thread each step,
# acc BN×BK/8) wins
_T06_SEEDS = [(4, 1024, 4, 8), (2, 1024, 4, 8), (8, 1024, 4, 8), (1, 1024, 2, 8), (2, 1024, 2, 8), (4, 2048, 8, 8),
              (2, 2048, 8, 1), (16, 256, 4, 1)]
# with a row-major B (x @ W, W K×N) a program's tile is BN contiguous elements of each of BK rows:
# a row of 32 FP32 (128 bytes, a line; 64 bytes in 16 bits) over 128-row steps read the 235 MB of
# TF32 1×14336×4096 at 4.3 TB/s, the read bandwidth torch.sum measures, where the seeds above peak
# at 16 columns (docs/perf-notes.md, 111)
_T06_ROW_SEEDS = [(32, 128, 4, 1), (32, 256, 4, 1)]


T06_ACC_MAX = 128  # FP32 accumulator elements a thread, over the rows a program takes


def _t06_fit(p: P.Problem, bn: int, bk: int, warps: int, fold: int = 1, stages: int = 1) -> dict:
    """A t06 configuration for p: K steps no wider than K needs (a power of two, at least 16), FOLD
    no wider than a 16-byte load's elements, and K steps halved until the accumulators of the rows
    a program takes (ROWS × BN×BK/FOLD over its threads, FOLD as it runs: `t06.fold`) fit in
    T06_ACC_MAX a thread. A tile tuned at M = 1 and carried to M = 3 or 4 otherwise spills: with a
    row-major B, 32×256 on 4 warps compiled for sm_90 to 206 registers at one row and spilled 4.6 KB
    at four; 32×128 took 254 registers at four, none spilled (docs/perf-notes.md, 111)."""
    bk = min(bk, max(16, triton.next_power_of_2(max(p.k, 1))))
    fold = max(1, min(fold, 16 // p.a.element_size(), bk))
    rows = t06.rows_per_program(p.m) if p.m <= t06.MAX_M else 1

    def acc(k):
        c = dict(BN=bn, BK=k, FOLD=fold, num_warps=warps)
        return rows * bn * k // (t06.fold(p, c) * 32 * warps)

    while bk > 16 and acc(bk) > T06_ACC_MAX:
        bk //= 2
    return dict(BN=bn, BK=bk, FOLD=fold, num_warps=warps, num_stages=stages)


def _t06_candidates(p: P.Problem) -> list[dict]:
    out: list[dict] = []
    for bn, bk, warps, fold in _T06_SEEDS + ([] if P.is_kmajor(p.b, "b") else _T06_ROW_SEEDS):
        c = _t06_fit(p, bn, bk, warps, fold)
        if c not in out:
            out.append(c)
    return out


def _t06_adapt(p: P.Problem, c: dict) -> dict | None:
    return _t06_fit(p, int(c["BN"]), int(c["BK"]), int(c["num_warps"]), int(c.get("FOLD", 1)),
                    int(c.get("num_stages", 1)))


# ---- by rung ---------------------------------------------------------------------------------------

_CANDIDATES = {T02: _t02_candidates, T03: _t03_candidates, T04: _t04_candidates, T05: _t05_candidates,
               T06: _t06_candidates, "tc_tiled": _t02_candidates}
_ADAPT = {T02: _t02_adapt, T03: _t03_adapt, T04: _t04_adapt, T05: _t05_adapt, T06: _t06_adapt,
          "tc_tiled": _t02_adapt}


def candidates(rung: str, p: P.Problem) -> list[dict]:
    """What the tuner times for p on `rung`, known-good configurations first."""
    return _CANDIDATES[rung](p)


def default(rung: str, p: P.Problem) -> dict:
    """The configuration `rung` runs p with when nothing was tuned."""
    return _t04_default(p) if rung == T04 else candidates(rung, p)[0]


def adapt(rung: str, p: P.Problem, c: dict) -> dict | None:
    """c (tuned for another shape, or another layout) made fit for p on `rung`, or None."""
    try:
        return _ADAPT[rung](p, c)
    except (KeyError, TypeError, ValueError):  # an entry of another version's format
        return None
