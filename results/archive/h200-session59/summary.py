"""Session 59 (docs/perf-notes.md, 115): held-out draws timed before (old: the code and database at
3cc475a) and after (new) in one device call each (val.sh), every tensor-core dtype, 3 runs: the
geometric mean of the ratios to the reference over the shapes both rated, the shapes under 0.95, and
each shape that moved more than 8% (device clock). The rule in `new` grew over the session:
  20261209, 20261210: v1, every tile weighed (K slices with their partial sums' round trip, tiles
                      under 64), past decode (M > 128);
  20261211, 20261212: v2, no K slices and no tile under 64 (after 20261209-10's two misses);
  20261205, 20261213: as committed (bb4a07b): M and N > 256 too (after 20261212's 138×8192×28672).
    python3 results/archive/h200-session59/summary.py"""
import json, math

R = "results/archive/h200-session59/runs/"
VERSION = {"20261209": "v1", "20261210": "v1", "20261211": "v2", "20261212": "v2", "20261205": "bb4a07b",
           "20261213": "bb4a07b"}


def ratios(path, dtype, mode):
    doc = json.load(open(path))
    return {(r["m"], r["n"], r["k"]): r["ratio"] for r in doc["records"]
            if r["dtype"] == dtype and r["mode"] == mode and "ratio" in r}


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


print("| draw | rule | dtype | clock | shapes | before | after | < 0.95 | moved > 8% (before → after) |")
print("|---|---|---|---|---:|---:|---:|---|---|")
for seed, version in VERSION.items():
    for dtype in ("bf16", "fp16", "tf32", "fp8"):
        for mode in ("device", "eager"):
            a, b = ratios(f"{R}old-held-out-{seed}.json", dtype, mode), ratios(f"{R}new-held-out-{seed}.json", dtype, mode)
            keys = [k for k in a if k in b]
            moved = ", ".join(f"{'×'.join(map(str, k))} {a[k]:.2f} → {b[k]:.2f}" for k in keys if abs(b[k] / a[k] - 1) > 0.08)
            print(f"| {seed} | {version} | {dtype} | {mode} | {len(keys)} | {gm([a[k] for k in keys]):.3f} | "
                  f"{gm([b[k] for k in keys]):.3f} | {sum(a[k] < 0.95 for k in keys)} → {sum(b[k] < 0.95 for k in keys)} | "
                  f"{moved if mode == 'device' else ''} |")
