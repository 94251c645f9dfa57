"""Session 59 (docs/perf-notes.md, 115): how well a choice among the database entries near a shape's
nearest does, against the nearest itself, over the probe's data (runs/cand-*.json: held-out draws
20261206-08, M > 128, BF16/TF32/FP8, every fitting entry within 3 steps of the nearest, up to 6,
each timed at the shape on the H200, device clock; cand_probe.py made them). Rules:
  oracle Wn: the fastest entry within n steps (what any choice among them could give);
  wave L.. : tuning.pick's rule (space.wave_cost, cache.WAVE_*) with the load rate L bytes an SM clock,
             window W and gain G, the entry's own bucket kept, on a tie the farther entry; gate: M and
             N > 256 (as committed). Only the probe's entries are weighed (up to 6 a shape: at 2 shapes
             the committed rule takes one it did not time);
  v1       : the same with K slices weighed (plus their FP32 partial sums' round trip) and tiles under 64;
  carried F: each entry's database time carried to the shape, F + (ms - F) × (waves × K here) / (waves × K
             where timed), F the call's floor in µs; the range over W in 1-3 and G in 0.8-1.0;
  filter   : a tile timed in one wave taken only where the shape makes one wave at least half as full.
Geometric mean of nearest's time / the rule's, and the shapes more than 5% slower (-) and faster (+).
    PYTHONPATH=src python3 results/archive/h200-session59/fit.py"""
import glob, json, math, sys
from unittest import mock
sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import cache, space

recs = []
for f in sorted(glob.glob("results/archive/h200-session59/runs/cand-*.json")):
    recs += [r for r in json.load(open(f)) if r["candidates"] and "ms" in r["candidates"][0]]


def oracle(window):
    def rule(r):
        d0 = r["candidates"][0]["dist"]
        return min((c for c in r["candidates"] if c["dist"] <= d0 + window and "ms" in c), key=lambda c: c["ms"])
    return rule


def v1_cost(p, c):
    """v1's count: K slices and tiles of any size weighed, a split's partial sums written and read."""
    g, sms, width = c["config"], 132, p.a.element_size()
    if "BM" not in g or "BN" not in g:
        return None
    split = int(g.get("SPLIT", 1)) if c["rung"] == space.T04 else 1
    tiles = -(-p.m // g["BM"]) * -(-p.n // g["BN"])
    if split > 1 and tiles >= sms:
        return None
    step = max(g["BM"] * g["BN"] / space.MMA_PER_CLOCK[width], (g["BM"] + g["BN"]) * width / 32)
    partials = 2 * split * p.m * p.n * 4 / (32 * sms) if split > 1 else 0.0
    return -(-tiles * split // sms) * step * p.k / split + partials


def chooser(cost_of, window, gain, gate, nearer_on_tie=False):
    def rule(r):
        p = W.problem(r["dtype"], r["m"], r["n"], r["k"], r["dtype"] == "fp8")
        cs = r["candidates"]
        if cs[0]["exact"] or (gate and not cache.weighs_waves(p)):
            return cs[0]
        c0 = cost_of(p, r, cs[0])
        if c0 is None:
            return cs[0]
        best, least = cs[0], c0 * gain
        for c in cs[1:]:
            if c["dist"] > cs[0]["dist"] + window:
                break
            x = cost_of(p, r, c)
            if x is not None and x <= least and "ms" in c and not (nearer_on_tie and best is not cs[0] and x == least):
                best, least = c, x
        return best
    return rule


def wave(load, window, gain, gate=True, nearer_on_tie=False):
    def cost(p, r, c):
        with mock.patch.object(space, "LOAD_BYTES_PER_CLOCK", load):
            return space.wave_cost(p, c["rung"], c["config"])
    return chooser(cost, window, gain, gate, nearer_on_tie)


def carried(floor_us):
    def cost(p, r, c):
        g, at = c["config"], c.get("timed_at")
        if "BM" not in g or "BN" not in g or not at or c.get("db_ms") is None:
            return None
        split = int(g.get("SPLIT", 1)) if c["rung"] == space.T04 else 1
        waves = lambda m, n: -(-(-(-m // g["BM"]) * -(-n // g["BN"]) * split) // 132)  # noqa: E731
        f = floor_us / 1e3
        return f + max(c["db_ms"] - f, 0) * waves(r["m"], r["n"]) * r["k"] / (waves(*at[:2]) * at[2])
    return cost


def one_wave(r):
    cs = r["candidates"]
    if cs[0]["exact"]:
        return cs[0]
    for c in cs:
        if c["dist"] > cs[0]["dist"] + 2:
            break
        g, at = c["config"], c.get("timed_at")
        if "BM" not in g or not at:
            return c
        split = int(g.get("SPLIT", 1)) if c["rung"] == space.T04 else 1
        tiles = lambda m, n: -(-m // g["BM"]) * -(-n // g["BN"]) * split  # noqa: E731
        timed, mine = tiles(*at[:2]), tiles(r["m"], r["n"])
        if timed > 132 or timed <= 2 * mine <= 2 * 132:
            return c
    return cs[0]


def score(rule, dtype=None):
    rs = [r for r in recs if dtype in (None, r["dtype"])]
    s = [r["candidates"][0]["ms"] / rule(r)["ms"] for r in rs]
    return math.exp(sum(map(math.log, s)) / len(s)), sum(x < 0.95 for x in s), sum(x > 1.05 for x in s)


with mock.patch.object(P, "num_sms", return_value=132):
    print(f"{len(recs)} shapes×dtypes")
    rules = [(f"oracle W{w}", oracle(w)) for w in (1, 2, 3)]
    rules += [(f"wave L{L} W{w} G{g}", wave(L, w, g)) for L in (24, 32, 48, 64) for w, g in ((2, 0.8), (2, 0.9), (3, 0.8))]
    rules += [("wave L32 W2 G0.8, no gate", wave(32, 2, 0.8, gate=False)),
              ("wave L32 W2 G0.8, nearer on a tie", wave(32, 2, 0.8, nearer_on_tie=True)),
              ("v1 L32 W2 G0.8, no gate", chooser(lambda p, r, c: v1_cost(p, c), 2, 0.8, False)),
              ("filter W2", one_wave)]
    for name, rule in rules:
        cells = [score(rule, d) for d in (None, "bf16", "tf32", "fp8")]
        print(f"{name:34}" + " | ".join(f"{lab} {g:.3f} -{lo} +{hi}" for lab, (g, lo, hi) in zip(("all", "bf16", "tf32", "fp8"), cells)))
    for floor in (0, 2, 4, 6):
        got = [score(chooser(lambda p, r, c, f=floor: carried(f)(p, r, c), w, g, False)) for w in (1, 2, 3) for g in (1.0, 0.9, 0.8)]
        print(f"carried F{floor}: geometric means {min(x[0] for x in got):.3f}-{max(x[0] for x in got):.3f}, "
              f"slower {min(x[1] for x in got)}-{max(x[1] for x in got)}, faster {min(x[2] for x in got)}-{max(x[2] for x in got)}")
