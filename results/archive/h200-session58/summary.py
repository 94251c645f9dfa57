"""Session 58 (docs/perf-notes.md, 114): the held-out draws before (database and code at 0e6d33c: head), with the 81
FP8/TF32 buckets (norule) and with them and space.t04_fits_k (rule: what is committed), device clock (eager where
said), geometric mean of the ratios to the reference over the shapes both runs rated, and each shape that moved more
than 8%.    python3 results/archive/h200-session58/summary.py"""
import json, math

R = "results/archive/h200-session58/runs/"
COMMITTED = "results/h200/held-out.json"  # draw 20261205, every dtype, the committed database and code


def ratios(path, dtype, mode="device"):
    doc = json.load(open(path))
    return {(r["m"], r["n"], r["k"]): r["ratio"] for r in doc["records"]
            if r["dtype"] == dtype and r["mode"] == mode and "ratio" in r}


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


ROWS = [("tf32", "20261202", "norule"), ("tf32", "20261202", "rule"), ("tf32", "20261203", "norule"),
        ("tf32", "20261203", "rule"), ("tf32", "20261205", "rule"), ("fp8", "20261202", "norule"),
        ("fp8", "20261203", "norule"), ("fp8", "20261204", "norule"), ("fp8", "20261205", "rule")]
print("| dtype | draw | after | shapes | before | after | moved > 8% (before → after) |\n|---|---|---|---:|---:|---:|---|")
for dtype, seed, after in ROWS:
    for mode in ("device", "eager") if seed == "20261205" else ("device",):
        b = ratios(f"{R}head-held-out-{seed}-{dtype}.json", dtype, mode)
        a = ratios(COMMITTED if seed == "20261205" else f"{R}tuned-{after}-held-out-{seed}-{dtype}.json", dtype, mode)
        keys = [k for k in b if k in a]
        moved = ", ".join(f"{'×'.join(map(str, k))} {b[k]:.2f} → {a[k]:.2f}" for k in keys if abs(a[k] / b[k] - 1) > 0.08)
        print(f"| {dtype} | {seed}{'' if mode == 'device' else ' eager'} | {after} | {len(keys)} | "
              f"{gm([b[k] for k in keys]):.3f} | {gm([a[k] for k in keys]):.3f} | {moved if mode == 'device' else ''} |")
