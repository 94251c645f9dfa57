"""Configurations for the tensor-core rungs: chosen at once, tuned only when asked.

    d = tuning.choose(p)      # Decision(rung, config, source): which rung and configuration run p
    tilegemm tune ...         # measure, and keep the winners (the user's cache, or --ship: the database)

No call waits for tuning. A problem gets, in order: what this machine tuned for its class and
shape bucket (the user's cache); with TILEGEMM_AUTOTUNE=1, a tuning now; the database shipped in
the package for this GPU (the exact bucket, else the nearest tuned bucket whose configuration
fits the problem), or for the known GPU most like it; else a heuristic (split-K for M ≤ 64 where
it applies, t03 where TMA can run, t02 otherwise). The only cost of a new shape is then the JIT
compile of its kernel. `Decision.source` says which of these it was (`tilegemm.explain`).

The package: `space` (the search space), `timer` (the tuner's clock), `cache` (the user's cache
and the shipped database), `tuner` (the measurement), `command` (`tilegemm tune`).
"""

from __future__ import annotations

import dataclasses

from .. import arrays, dispatch
from ..kernels import tensorcore as tc
from . import cache
from .cache import Decision, autotune_on_call

__all__ = ["Decision", "choose", "usable_rungs", "autotune_on_call"]

_MEMO: dict = {}  # _memo_key(p) [+ (M, N) where marked _BY_WAVES] -> Decision, this process
MEMO_MAX = 4096  # decisions kept (a new one past this empties the memo, as dispatch.PLAN_MAX does the plans): the
# key holds K, and M and N for a bucket weighed by waves, so a process of many shapes would keep one per shape
cache.ON_RESET.append(_MEMO.clear)
cache.ON_RESET.append(dispatch.reset)  # plans hold decisions: registered here, where decisions come from


def usable(rung: str, p) -> bool:
    """Can `rung` run p here (capability, TMA's alignment rules, Gluon, t05's layouts)?"""
    from ..kernels.tensorcore import _problem as P
    from . import space

    hopper = P.capability(p.a.device) >= (9, 0)
    if rung == space.T03:
        return hopper and not tc.rung_module(rung).usable(p)
    if rung == space.T05:
        return hopper and tc.gluon_ready() and not tc.rung_module(rung).usable(p)
    if rung == space.T06:
        return not tc.rung_module(rung).usable(p)
    return rung in (space.T02, space.T04, "tc_tiled")


def usable_rungs(p) -> list[str]:
    from . import space

    return [r for r in (space.T02, space.T03, space.T04, space.T05, space.T06) if usable(r, p)]


def heuristic(p) -> Decision:
    """With nothing tuned: split-K for M ≤ 64 where few tiles leave SMs idle, else t03 (TMA)
    where it can run, else t02."""
    from . import space

    if p.m <= 64 and space.splitk_applicable(p):
        rung = space.T04
    else:
        rung = space.T03 if usable(space.T03, p) else space.T02
    return Decision(rung, space.default(rung, p), "heuristic (nothing tuned or shipped for this shape)")


def _from_database(p, want: str | None) -> Decision | None:
    from ..kernels.tensorcore import _problem as P

    if p.a.device.type != "cuda":
        return None
    sms, cc, gpu = P.device_facts(p.a.device)
    db, phrase = database(gpu, cc, sms, p.promoted)
    return None if db is None else pick(db, phrase, p, want)


def database(gpu: str, capability: tuple, sms: int, promoted: bool = False) -> tuple[dict | None, str]:
    """The shipped database a problem on this GPU reads, and a phrase saying which
    (`cache.database_for`). For FP8 without fast accumulation (promoted) on a GPU whose database
    has no entry of its class: that database with the promoted entries of the GPU most like it that
    has some (same compute capability, nearest SM count), before FP8's own entries, which ran it
    up to 2.2x slower than its own tuning's on the H100 (docs/perf-notes.md, 146)."""
    db, phrase = cache.database_for(gpu, capability, sms)
    if db is None or not promoted or cache.holds(db, cache.PROMOTED):
        return db, phrase
    lent, said = cache.database_for(gpu, capability, sms, having=cache.PROMOTED)
    if lent is None:
        return db, phrase
    borrowed = {k: e for k, e in lent.get("entries", {}).items() if k.startswith(cache.PROMOTED + "|")}
    return dict(db, entries={**db.get("entries", {}), **borrowed}), \
        f"{phrase}, and for FP8 without fast accumulation {said}"  # (once a decision: the tuner's memo keeps it)


def pick(db: dict, phrase: str, p, want: str | None = None) -> Decision | None:
    """The decision database `db` gives p: the nearest bucket (exact first) whose configuration
    fits p (`_fitting`); where that is another bucket's, and M and N are both over 256
    (`cache.weighs_waves`), the entry within `cache.WAVE_WINDOW` of it whose tile's waves cost p
    least (`space.wave_cost`; on a tie the farther, as measured), where that is at most
    `cache.WAVE_GAIN` of the nearest's. The nearest bucket is a few quarter octaves off p's sides,
    and its tile's count there is not p's: over 73 held-out shapes × BF16, TF32 and FP8 (M > 128;
    up to 6 entries within 3 steps of the nearest, each timed at the shape), the fastest entry
    within 2 steps ran 1.065× the nearest's (geometric mean), this choice among the timed ones
    1.036×, 38 faster by more than 5% and none slower (docs/perf-notes.md, 115).
    want: only entries of that rung."""
    from . import space

    fitting = _fitting(db, phrase, p, want)
    dist0, exact, nearest = next(fitting, (None, None, None))
    cost0 = nearest and space.wave_cost(p, nearest.rung, nearest.config)
    if nearest is None or exact or not cache.weighs_waves(p) or cost0 is None:
        return nearest
    best, least = nearest, cost0 * cache.WAVE_GAIN
    for dist, _, d in fitting:
        if dist > dist0 + cache.WAVE_WINDOW:
            break
        cost = space.wave_cost(p, d.rung, d.config)
        if cost is not None and cost <= least:
            best, least, far = d, cost, dist - dist0
    if best is nearest:
        return dataclasses.replace(nearest, by_waves=True)
    source = best.source.replace("nearest tuned bucket", "tuned bucket", 1).replace("the nearest usable", "a usable")
    return dataclasses.replace(best, source=f"{source}, {far:.1f} steps past the nearest, whose {nearest.rung} "
                               f"{nearest.config['BM']}×{nearest.config['BN']} makes waves here {cost0 / least:.2f}× "
                               f"as costly", by_waves=True)


def _fitting(db: dict, phrase: str, p, want: str | None):
    """(distance, exact bucket?, Decision) for each entry of `db` whose configuration fits p
    (`space.adapt`), nearest bucket first (exact first): among its class's entries, for FP16 BF16's
    (and back), and the same dtypes in another layout, that layout counted a step of M farther
    (`cache.LAYOUT_STEP`; on a tie one's own class first, then the sibling's); for promoted FP8,
    the fast class's after every one of its own (`cache.FAST_STEP`); another bucket's
    t05 tile fitted to its waves (`space.t05_wave_fitted`), where t05 runs p, only if it fits p's
    (`space.t05_fits_waves`); past decode, a split-K tile only where p's K is near the one it was
    timed at (`space.t04_fits_k`)."""
    from . import space

    b = cache.bucket(p)
    cls = cache.problem_class(p)
    entries = db.get("entries", {})
    found = [(cache.distance(tb, b), tb, e) for tb, e in cache.nearest(entries, cls, b)]
    sibling = cache.sibling_class(cls)
    if sibling:  # FP16 and BF16 share configurations (same width, same MMA rate): the sibling's nearer
        # bucket beats one's own farther one (docs/perf-notes.md, 35)
        found += [(cache.distance(tb, b), tb, dict(e, sibling=sibling)) for tb, e in cache.nearest(entries, sibling, b)]
    fast = cache.fast_class(cls)
    for own, step in ((cls, 0.0),) + (((fast, cache.FAST_STEP),) if fast else ()):  # (promoted FP8: the fast
        # class's entries after all of its own, cache.FAST_STEP)
        if own != cls:
            found += [(cache.distance(tb, b) + step, tb, dict(e, sibling=own))
                      for tb, e in cache.nearest(entries, own, b)]
        for other in cache.other_layouts(own):  # adapt refits the MMA form; a far bucket of one's own layout
            # (a decode tile for a prefill shape) is worse evidence than the same bucket in another. Not
            # t06's: its tile is a layout's own (B K-major reads 16 bytes a row of W; N-major, 2.4-7×
            # slower on the H200, session 15)
            found += [(cache.distance(tb, b) + step + cache.LAYOUT_STEP, tb, dict(e, sibling=other))
                      for tb, e in cache.nearest(entries, other, b) if e.get("rung") != space.T06]
    found.sort(key=lambda t: t[0])  # stable: own class, sibling, other layouts on a tie
    for dist, tuned_bucket, entry in found:
        rung, note, timed_here = entry.get("rung"), "", True
        if want and rung != want:
            continue
        to, why = rung, ""  # the rung that runs the entry's tile, and why it is another
        if not usable(rung, p):
            # A TMA rung's entry that cannot run p: its tile on the next rung that can, rather
            # than the nearest entry of a rung that can (often a decode bucket's split-K tile).
            # t05's on t03 (t05 takes no batch, alpha, or beta but a bias row, and no operand
            # that needs realigning); t03's on t02's pointer loads (a batched operand TMA cannot describe).
            if want or rung not in (space.T03, space.T05):
                continue
            to = next((r for r in (space.T03, space.T02) if r != rung and usable(r, p)), None)
            if to is None:
                continue
            why = tc.rung_module(rung).usable(p) or "not on this GPU or Triton"
        elif not want and rung in (space.T02, space.T04) and _rows_unaligned(p) and not _timed_unaligned(entry, p):
            # A pointer rung's tile timed on 16-byte-aligned rows: on rows that are not, its loads
            # are not vectorised and it runs several times slower than timed (777×1234×4321 BF16
            # on the H100: t04's entry 0.31× cuBLAS, its tile on t03 after the realigning copy
            # 1.62×; docs/perf-notes.md, 44): past decode, t03 runs the tile. An entry timed on
            # unaligned rows itself (TF32 100×12345×678 on the H100: t02 0.93× eager, t03 after
            # the copies 0.69×; note 66) runs as timed.
            to, why = space.T03, "its pointer loads of unaligned rows are slow"
        if to == rung:
            cfg = space.adapt(rung, p, entry.get("config") or {})
            if cfg and rung == space.T05 and tuned_bucket != b and not space.t05_fits_waves(p, cfg):
                continue  # a tile fitted to its own bucket's waves, not to p's
            if cfg and rung == space.T04 and not space.t04_fits_k(p, cfg, cache.timed_shape(entry)):
                continue  # K split for a longer K than p's
        else:
            as_to = space.as_t03 if to == space.T03 else space.as_t02
            cfg = space.adapt(to, p, as_to(rung, entry.get("config") or {}))
            rung, note, timed_here = to, f": {rung}'s tile on {to} ({why})", False
        if rung == space.T03 and cfg is not None and tc.rung_module(rung).needs_realign(p):
            note, timed_here = note + " (A or B first copied for TMA, which needs 16-byte aligned rows)", False
        pad = cfg and rung in (space.T03, space.T05) and tc.rung_module(space.T03).padded(p, cfg)
        if pad:
            note += f" ({' and '.join(w.upper() for w in pad)} first copied to rows 128 bytes apart: PAD)"
        if cfg is None:
            continue
        shape = cache.timed_shape(entry)
        where = "exact bucket" if tuned_bucket == b else \
            f"nearest tuned bucket {tuned_bucket}" + (f" (tuned at {arrays.dims(shape)})" if shape else "")
        if entry.get("sibling"):
            theirs, mine = entry["sibling"].split("|"), cls.split("|")
            lay = f" in layout {theirs[3]}" if theirs[3] != mine[3] else ""
            where += (f", of layout {theirs[3]} (the nearest usable entry)" if theirs[:3] == mine[:3] else
                      f", of FP8 with fast accumulation{lay} (no promoted entry fits)" if mine[0] == cache.PROMOTED else
                      f", of {theirs[0]} (same width; the nearest usable entry)")
        timed_at = shape if timed_here else None
        yield dist, tuned_bucket == b, Decision(rung, cfg, f"{phrase}, {where}{note}",
                                                entry.get("ms") if timed_here else None, timed_at)


def _rows_unaligned(p) -> bool:
    """Past decode (M > 64, where t03's wgmma tiles fit), with A or B not 16-byte aligned (its rows,
    or its start), and t03 able to run p after realigning it."""
    from . import space

    return p.m > 64 and usable(space.T03, p) and tc.rung_module(space.T03).needs_realign(p)


def _rows_off_16(shape, layout: str, size: int) -> tuple[bool, bool]:
    """Are A's and B's rows (K or M for A, N or K for B, as the layout stores them) off 16 bytes?"""
    m, n, k = shape
    return (k if layout[0] == "n" else m) * size % 16 != 0, (n if layout[1] == "n" else k) * size % 16 != 0


def _timed_unaligned(entry: dict, p) -> bool:
    """Was the entry timed with every operand whose rows are off 16 bytes in p off 16 bytes too (its
    own tuned shape, in its own class's layout), so that its pointer loads' time is what p gets?"""
    shape = cache.timed_shape(entry)
    if shape is None:
        return False
    size = p.a.element_size()
    mine = _rows_off_16((p.m, p.n, p.k), p.layout(), size)
    theirs = _rows_off_16(shape, entry["sibling"].split("|")[3] if entry.get("sibling") else p.layout(), size)
    return any(mine) and all(t for u, t in zip(mine, theirs) if u)


def _from_user(p, want: str | None) -> Decision | None:
    from ..kernels.tensorcore import _problem as P
    from . import space

    if p.a.device.type != "cuda":
        return None
    if want:
        key = cache.tune_key(want, p)
        hit = None if cache.forced(key) else cache.cached_entry(key)
        cfg = hit and hit.get("config") and space.adapt(want, p, hit["config"])
        return Decision(want, cfg, f"your tuning cache ({cache.cache_path()})", hit.get("ms")) if cfg else None
    key = cache.decision_key(p, P.gpu_name(p.a.device))
    hit = None if cache.forced(key) else cache.cached_entry(key)  # (force: p's bucket is tuned again)
    if hit and usable(hit.get("rung"), p):
        cfg = space.adapt(hit["rung"], p, hit.get("config") or {})
        if cfg is not None:
            return Decision(hit["rung"], cfg, f"your tuning cache ({cache.cache_path()})", hit.get("ms"),
                            cache.timed_shape(hit))
    return None


def choose(p, kernel: str = "auto", *, tune: bool = True) -> Decision:
    """The rung and configuration p runs with (kernel: "auto", or a tensor-core rung's name).
    tune=False (explain): nothing is timed; where TILEGEMM_AUTOTUNE=1 would tune p's bucket now,
    the decision it would start from is said, and not kept (the call that runs p tunes it)."""
    from . import space

    bucket = _memo_key(p, kernel)
    shape = bucket + ((p.m, p.n),)
    hit = _MEMO.get(bucket)
    if hit is _BY_WAVES:  # the bucket's decisions weigh each shape's own waves
        hit = _MEMO.get(shape)
    if hit is not None:
        cfg = space.adapt(hit.rung, p, hit.config)  # the bucket's decision, fitted to this shape
        if cfg is not None:
            return dataclasses.replace(hit, config=cfg)
    d = _choose(p, None if kernel == "auto" else kernel, tune)
    if d.tunes_later:
        return d
    if len(_MEMO) >= MEMO_MAX:
        _MEMO.clear()
    if d.by_waves:
        _MEMO.setdefault(bucket, _BY_WAVES)
    _MEMO[shape if _MEMO.get(bucket) is _BY_WAVES else bucket] = d
    return d


_BY_WAVES = object()  # the memo's mark of a bucket whose decisions pick weighs by each shape's M and N


def _memo_key(p, kernel: str) -> tuple:
    """What a decision in this process depends on: p's class and bucket, the kernel asked for, the
    device, the rungs that can run p, whether t03 must realign first (its source says so) and,
    if so, which of A and B are off 16 bytes (an entry timed on such rows keeps its pointer rung:
    `_timed_unaligned`), whether a bias row is added (its class is the plain product's, its
    kernels are not: a fallback `remember`ed for one is not the other's), the waves p makes of the
    tiles whose fit `pick` weighs (`space.t05_waves`), and K itself (another bucket's split-K tile
    fits p by K against the K it was timed at, `space.t04_fits_k`: 2600 and 3072 share a bucket,
    and only the second is 3/4 of 4096). Shapes of a bucket that differ in M or N share a
    decision, but where pick weighed the waves of the shape's own M and N (`Decision.by_waves`):
    `choose` keys each of those on M and N too."""
    from . import space

    rungs = tuple(usable_rungs(p))
    realign = space.T03 in rungs and tc.rung_module(space.T03).needs_realign(p)
    off = _rows_off_16((p.m, p.n, p.k), p.layout(), p.a.element_size()) if realign else None
    return (cache.problem_class(p), cache.bucket(p), kernel, str(p.a.device), rungs, realign, off, p.bias_row,
            space.t05_waves(p), p.k)


def remember(p, kernel: str, d: Decision) -> None:
    """What ran p (a fallback, when the chosen rung failed here) is what p's bucket gets from now on
    in this process, whatever each shape's waves."""
    if len(_MEMO) >= MEMO_MAX:
        _MEMO.clear()
    _MEMO[_memo_key(p, kernel)] = dataclasses.replace(d, by_waves=False)


def _choose(p, want: str | None, tune: bool = True) -> Decision:
    from . import space

    if want is not None and want not in tc.RUNGS:
        raise KeyError(f"{want!r} is not a tensor-core kernel; one of {', '.join(tc.RUNGS)}")
    if want is not None and not usable(want, p):  # e.g. TMA's alignment rules: the rung below runs it
        instead = (space.T03 if want == space.T05 and usable(space.T03, p) else
                   space.T04 if want == space.T06 else space.T02)
        why = tc.rung_module(want).usable(p) if want in (space.T03, space.T05, space.T06) else "not here"
        d = _choose(p, instead, tune)
        return Decision(instead, d.config, f"{want} cannot run this problem ({why}); {instead} runs it: {d.source}",
                        d.ms, by_waves=d.by_waves, tunes_later=d.tunes_later)
    d = _from_user(p, want)
    if d is not None:
        return d
    if autotune_on_call() and p.a.device.type == "cuda":
        if not tune:  # (explain: what the database or the heuristic says, and that the first call tunes instead)
            d = _from_database(p, want) or (Decision(want, space.default(want, p), f"{want}'s default configuration")
                                            if want else heuristic(p))
            return dataclasses.replace(d, source=f"TILEGEMM_AUTOTUNE=1: the first call tunes this bucket (explain "
                                       f"times nothing); until then {d.source}", tunes_later=True)
        from . import tuner

        if want:
            entry = tuner.tune_rung(want, p)
            return Decision(want, entry["config"], "tuned now (TILEGEMM_AUTOTUNE=1)", entry.get("ms"))
        d = tuner.tune(p)
        if d is not None:
            return Decision(d.rung, d.config, "tuned now (TILEGEMM_AUTOTUNE=1)", d.ms)
    d = _from_database(p, want)
    if d is not None:
        return d
    if want:
        return Decision(want, space.default(want, p), f"{want}'s default configuration (nothing tuned or shipped)")
    return heuristic(p)
