"""The tuner: which rung and configuration run a problem fastest on this GPU, measured.

`tune(p)` times every rung that can run p over its search space (`space.candidates`) and returns
the winner as a `Decision`, kept in the user's cache. Each rung's tuning checks each candidate's
output against float64 first (a fast configuration that computes something else never wins),
times the rest (`timer.time_ms`: device time, L2 flushed before each sample) and re-times
the fastest few against each other (`timer.settle`). Candidates are ranked by what back-to-back
calls cost a caller at least (`eager_score`: the device time, or the host's time to issue the
candidate's launches where that is longer), the device time breaking ties. Between rungs:
- where split-K can matter (`space.splitk_applicable`: few tiles of C for the SMs), t02, t03
  (where TMA can describe the operands) and t04 compete on their tuned eager scores;
- for products of at least ¾ of a wave of 128×256 tiles that t05 can run, t03's and t05's winners
  are re-timed against each other, interleaved, and the lower eager score wins (their own
  tunings ran at different moments of a GPU whose clocks drift under its power cap);
- everything else runs t03 (t02 where TMA cannot, or below sm_90).
Nothing here runs unless asked: `tilegemm tune`, or a call with TILEGEMM_AUTOTUNE=1.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import torch

from .. import env
from ..kernels import tensorcore as tc
from ..kernels.tensorcore import _problem as P
from . import cache, space, timer
from .cache import Decision

SETTLE = 3  # the fastest few candidates of a tuning, re-timed against each other before one wins
last_tuning: dict = {}  # what the most recent rung tuning did: key, seconds, timings, failures
tuning_log: list = []  # every rung tuning of this process: key, seconds, the fastest few (ms, config)


def run(rung: str, p: P.Problem, cfg: dict):
    """Launch p once on `rung` with configuration cfg, through Triton."""
    return tc.launch_calls(tc.rung_module(rung).launches(p, cfg))


def eager_score(ms: float, launches: int, floor_ms: float) -> float:
    """What a candidate costs a caller per call, at least, when calls come back to back (as a
    model's forward pass makes them): its device time, or the host's time to issue its launches
    (`timer.launch_floor_ms` each), whichever is longer. Graph replays hide the second: t04's
    two-launch split-K won 1×1024×4096 BF16 there (5.4 µs against one launch's 6) and cost a
    caller 31 µs a call where one launch cost 24 (docs/perf-notes.md, 48). Each launch is charged
    a whole call's floor, though a second launch costs the host less (about 7 µs there): an
    upper bound, which leans against many launches where the host sets the pace."""
    return max(ms, launches * floor_ms)


def _ranked(timings: list, counts: dict, floor_ms: float) -> list:
    """(ms, config) pairs, best first: by eager_score (counts: id(config) -> its launches), then ms."""
    return sorted(timings, key=lambda t: (eager_score(t[0], counts[id(t[1])], floor_ms), t[0]))


def trial_problem(p: P.Problem) -> P.Problem:
    """p with a scratch output, for tuning: C (and C_in, which may be C itself) stays untouched."""
    return dataclasses.replace(p, c=torch.empty_like(p.c))  # (every other field kept: fast_accum's PROMOTE too)


class _Probe:
    """Checks a tuning candidate's output: up to 16 rows × 256 columns (batch 0) against a float64
    product of the same inputs, to the precision's tolerance (validate.check). A configuration
    that Triton compiles wrongly (seen: a race in one swapped TF32 tile shape, 0.7% of elements
    off) fails here instead of winning on speed."""

    def __init__(self, p: P.Problem):
        from .. import validate

        self.p, self.validate = p, validate
        g = torch.Generator(device="cpu").manual_seed(p.m * 31 + p.n * 17 + p.k)
        self.rows = torch.randperm(p.m, generator=g)[:16].to(p.c.device)
        self.cols = torch.randperm(p.n, generator=g)[:256].to(p.c.device)
        a = p.a[0] if p.a.dim() == 3 else p.a
        b = p.b[0] if p.b.dim() == 3 else p.b
        scale = float(p.alpha)
        if p.scale_a is not None:
            scale *= float(p.scale_a.double().prod() * p.scale_b.double().prod())
        self.a = (P.take(a, 0, self.rows).double() * scale).cpu().numpy()
        self.b = P.take(b, 1, self.cols).double().cpu().numpy()
        self.ref = self.a @ self.b
        if p.has_beta:
            ci = p.c_in[0] if p.c_in.dim() == 3 else p.c_in
            self.ref = self.ref + float(p.beta) * ci[self.rows][:, self.cols].double().cpu().numpy()
        self.tol = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "ieee": "float32"}.get(
            p.precision, "float8_e4m3fn")
        names = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}
        self.out = names.get(p.c.dtype)

    def wrong(self) -> str:
        c = self.p.c[0] if self.p.c.dim() == 3 else self.p.c
        got = c[self.rows][:, self.cols].double().cpu().numpy()
        chk = self.validate.check(got, self.a, self.b, dtype=self.tol, ref=self.ref, out_dtype=self.out)
        return "" if chk.ok else str(chk).splitlines()[0][:300]


def budget_s() -> float:
    """Seconds of timing a rung's candidates may take for one shape, their compiles not counted:
    a compile costs about a second, and a budget that counted them timed 2 of 40 candidates when it
    was short, and none of them on a machine whose compiles were slower (docs/perf-notes.md, 53)."""
    return env.number("TILEGEMM_TUNE_BUDGET_S", 30.0)


def max_candidates() -> int | None:
    """TILEGEMM_TUNE_MAX_CANDIDATES: time only the first N of a rung's candidates (known-good first)."""
    n = env.number("TILEGEMM_TUNE_MAX_CANDIDATES", 0, integer=True, positive=False)
    return int(n) if n > 0 else None  # 0 (or none): all


def _err(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def tune_rung(rung: str, p: P.Problem, candidates=None, variant: str = "") -> dict:
    """rung's tuning entry for p's class and bucket: {"config": …, "ms": tuned median or None, …},
    from the user's cache, else tuned now over `candidates` (default: the rung's search space)."""
    key = cache.tune_key(rung, p, variant)
    hit = None if cache.forced(key) else cache.cached_entry(key)
    if hit is not None and not _rung_entry(hit):  # (a hand-edited cache: it was a KeyError or TypeError in
        # tune, on every call of the bucket under TILEGEMM_AUTOTUNE=1)
        if key not in cache._WARNED:
            cache._WARNED.add(key)
            warnings.warn(f"tilegemm: ignoring entry {key!r} of the tuning cache {cache.cache_path()} (not a "
                          "rung's tuning: a 'config' object and an 'ms' number); it is tuned again",
                          RuntimeWarning, stacklevel=2)
        hit = None
    if hit is not None and hit.get("floor_ms", 0.0) < timer.floor_minimum():
        hit = None  # ranked at a lower launch floor than a database's tuning assumes (cache.SHIP_FLOOR_MS)
    if hit is not None:
        return hit
    cache.retuned(key)
    candidates = list(candidates if candidates is not None else space.candidates(rung, p)[:max_candidates()])
    limit = budget_s()
    trial = trial_problem(p)
    t0 = time.perf_counter()
    spent = 0.0  # seconds of timing so far: the budget's clock (compiles and checks are not on it)
    timings, failed, skipped = [], [], 0
    probe = _Probe(trial)
    per_ms = min(60.0, max(10.0, limit * 1000 / (4 * max(len(candidates), 1))))
    floor = timer.launch_floor_ms()
    counts: dict = {}  # id(config) -> its launches
    for c in candidates:
        if spent > limit and timings:
            skipped += 1  # the tuning budget is spent: not timed, and not a failure
            continue
        try:
            trial.c.fill_(float("nan"))
            counts[id(c)] = len(tc.rung_module(rung).launches(trial, c))
            run(rung, trial, c)
            torch.cuda.synchronize(p.c.device)
            wrong = probe.wrong()
            if wrong:  # never pick a fast configuration that computes something else
                failed.append((c, "wrong result: " + wrong))
                continue
            t1 = time.perf_counter()
            timings.append((timer.time_ms(lambda c=c: run(rung, trial, c), budget_ms=per_ms), c))
            spent += time.perf_counter() - t1
        except Exception as e:  # noqa: BLE001  (a config that does not compile is information, not an error)
            failed.append((c, _err(e)))
    default = space.default(rung, p)
    if not timings:
        last_tuning.clear()
        last_tuning.update(key=key, seconds=time.perf_counter() - t0, timings=[], failed=failed, config=default)
        return {"config": default, "ms": None}
    timings = _ranked(timings, counts, floor)
    first, settled = list(timings), 0  # the single pass, kept for the log
    if len(timings) > 1:  # the best few, again, against each other; they are known to run
        top = timings[:SETTLE]
        try:
            again = timer.settle([lambda c=c: run(rung, trial, c) for _, c in top], budget_ms=per_ms, graph=False)
            timings = _ranked(list(zip(again, (c for _, c in top))), counts, floor) + timings[SETTLE:]
            settled = len(top)
        except Exception as e:  # noqa: BLE001  (the single pass stands; the log says why)
            failed.append((top[0][1], "settle: " + _err(e)))
    seconds = time.perf_counter() - t0
    best_ms, best = timings[0]
    entry = dict(config=best, ms=best_ms, launches=counts[id(best)],
                 score_ms=eager_score(best_ms, counts[id(best)], floor), floor_ms=round(floor, 5),
                 timing="eager", tune_s=round(seconds, 3),
                 tried=len(timings), failed=len(failed), skipped=skipped, settled=settled,
                 m=p.m, n=p.n, k=p.k, when=time.strftime("%Y-%m-%dT%H:%M:%S"))
    cache.store_entry(key, entry)
    last_tuning.clear()
    last_tuning.update(key=key, seconds=seconds, timings=timings, failed=failed, config=best)
    del tuning_log[:-255]
    tuning_log.append(dict(key=key, seconds=round(seconds, 2), tried=len(timings), failed=len(failed), skipped=skipped,
                           fastest=[(round(ms, 5), c) for ms, c in timings[:6]],
                           single_pass=[(round(ms, 5), c) for ms, c in first[:SETTLE]]))
    return entry


def _rung_entry(e: dict) -> bool:
    """Is e a rung's tuning as tune_rung keeps it: a configuration, and its times numbers (ms None:
    nothing ran)?"""
    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x

    return (isinstance(e.get("config"), dict) and (e.get("ms") is None or number(e["ms"]))
            and number(e.get("score_ms", 0)) and number(e.get("launches", 1)))


def _score(entry: dict) -> float:
    """A rung tuning's eager_score (its tuned median where it was tuned before scores were kept)."""
    return entry.get("score_ms", entry["ms"])


def _fastest(tuned: list[tuple[str, dict]]) -> tuple[str, dict] | None:
    """The (rung, entry) with the lowest eager_score, then tuned median (the earlier one on a
    tie); None when none timed anything."""
    timed = [(_score(e), e["ms"], i, r, e) for i, (r, e) in enumerate(tuned) if e.get("ms") is not None]
    if not timed:
        return None
    *_, rung, entry = min(timed, key=lambda t: t[:3])
    return rung, entry


def _tuned(rungs: list[str], p: P.Problem) -> tuple[list[tuple[str, dict]], dict]:
    """Each rung's tuning entry for p (best effort: a tuner that fails leaves the others), and why
    the others have none."""
    tuned, why = [], {}
    for rung in rungs:
        try:
            entry = tune_rung(rung, p)
        except Exception as e:  # noqa: BLE001
            why[rung] = _err(e)
            continue
        if entry.get("ms") is None:
            why[rung] = "no configuration ran"
        else:
            tuned.append((rung, entry))
    return tuned, why


def _settled(p: P.Problem, tuned: list[tuple[str, dict]]) -> tuple[str, dict]:
    """Of the tuned rungs, the one whose configuration ran fastest when their winners were timed
    against each other, interleaved. The verdict is cached while the rungs' tuned configurations
    are the ones it compared."""
    key = cache.tune_key("+".join(r for r, _ in tuned), p)
    configs = {r: e["config"] for r, e in tuned}
    hit = None if cache.forced(key) else cache.cached_entry(key)
    if hit is not None and hit.get("configs") == configs and isinstance(hit.get("winner"), str) \
            and hit["winner"] in configs and hit.get("floor_ms", 0.0) >= timer.floor_minimum():  # (a hand-edited
        # winner may be a list: unhashable; a verdict at a lower launch floor than a database's tuning's is redone)
        return next((r, e) for r, e in tuned if r == hit["winner"])
    cache.retuned(key)
    trial = trial_problem(p)
    ms = [e["ms"] for _, e in tuned]
    why = ""
    try:
        ms = timer.settle([lambda r=r, c=e["config"]: run(r, trial, c) for r, e in tuned], budget_ms=30.0, graph=False)
    except Exception as e:  # noqa: BLE001  (keep the tuned medians; cache no verdict)
        why = "settle: " + _err(e)
    floor = timer.launch_floor_ms()
    scores = [eager_score(t, e.get("launches", 1), floor) for t, (_, e) in zip(ms, tuned)]
    i = min(range(len(tuned)), key=lambda j: (scores[j], ms[j], j))
    times = {r: t for (r, _), t in zip(tuned, ms)}
    tuning_log.append(dict(key=key, settled=times, **({"why": why} if why else {})))
    if not why:
        cache.store_entry(key, dict(winner=tuned[i][0], ms=times, configs=configs, floor_ms=round(floor, 5),
                                    when=time.strftime("%Y-%m-%dT%H:%M:%S")))
    rung, entry = tuned[i]
    return rung, dict(entry, ms=ms[i], score_ms=scores[i])


def tune(p: P.Problem) -> Decision | None:
    """Tune every rung that can run p and return the fastest (None when nothing could be timed)."""
    from ..kernels.tensorcore import t03_tma_persistent as t03

    budget_s(), max_candidates()  # a setting that is not understood is the caller's ConfigError: each rung's
    # tuning below is best effort, and took it as its own failure ("no configuration ran", nothing tuned)
    hopper = P.capability(p.a.device) >= (9, 0)
    tma = hopper and not t03.usable(p)
    if space.splitk_applicable(p):
        rungs = ([space.T03] if tma else []) + [space.T02, space.T04]
        if not tc.rung_module(space.T06).usable(p):  # decode's M ≤ 4: the GEMV form as well
            rungs.append(space.T06)
        tuned, _ = _tuned(rungs, p)
        won = _fastest(tuned)
    else:
        big = space.T03 if tma else space.T02
        rungs = [big]
        if big == space.T03 and tc.gluon_ready() and space.t05_worth_tuning(p) \
                and not tc.rung_module(space.T05).usable(p):
            rungs.append(space.T05)
        if not tc.rung_module(space.T06).usable(p):  # M ≤ 4 with a short K or narrow N
            rungs.append(space.T06)
        tuned, _ = _tuned(rungs, p)
        won = (_settled(p, tuned) if len(tuned) > 1 else _fastest(tuned))
    if won is None:
        return None
    rung, entry = won
    at = tuple(entry.get(d, getattr(p, d)) for d in "mnk")
    elsewhere = at != (p.m, p.n, p.k)
    if elsewhere:  # its rungs were tuned at another shape of p's bucket (the user's cache): an entry says
        # where it was timed, and its time there (the rule for unaligned rows reads that shape)
        entry = dict(tuned)[rung]
    decision = Decision(rung, entry["config"], "tuned on this GPU (your tuning cache)", entry.get("ms"),
                        at if elsewhere else None)
    key = cache.decision_key(p, P.gpu_name(p.a.device))
    cache.store_entry(key, cache.record(p, decision))
    cache.retuned(key)
    return decision
