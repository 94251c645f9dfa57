"""The decode tiles' fused sum in one group: RED 8 (red8.diff, applied on the device only) against
reduce_width's 4 at the database's 8-slice fused decode entries (16x64 tiles, B = Wᵀ), through
the library's measure_shape: both clocks, cuBLAS in the same runs, 3 rounds, the order
alternating. Writes $OUT/red8_ab.json."""
import json, os, statistics
import torch
from tilegemm.kernels.tensorcore import t04_splitk as t04
from tilegemm.tuning import cache
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp")
rule = t04.reduce_width
SHAPES = [("bf16", 1, 1024, 4096), ("bf16", 8, 1024, 4096), ("bf16", 16, 1024, 4096), ("bf16", 32, 1024, 4096),
          ("bf16", 16, 1024, 8192), ("bf16", 1, 1024, 8192), ("tf32", 1, 1024, 8192)]
clock = L._Clock()
res = []
for dtype, m, n, k in SHAPES:
    runs = {"rule": [], "red8": []}
    for rnd in range(3):
        for which in (("rule", "red8") if rnd % 2 == 0 else ("red8", "rule")):
            t04.reduce_width = rule if which == "rule" else (lambda c, s: 8 if int(s) >= 8 else rule(c, s))
            cache.reset()
            runs[which].append(L.measure_shape(clock, dtype, m, n, k, ("eager", "device"), 0.3, w_t=True))
    rec = dict(dtype=dtype, m=m, n=n, k=k, runs=runs)
    line = f"{dtype} {m}x{n}x{k}"
    for mode in ("eager", "device"):
        for which in ("rule", "red8"):
            rs = [r[mode] for r in runs[which] if mode in r]
            rec[f"{which}_{mode}_us"] = statistics.median(r["ours_ms"] for r in rs) * 1e3
            rec[f"{which}_{mode}_ratio"] = statistics.median(r["ref_ms"] / r["ours_ms"] for r in rs)
        line += (f" | {mode} us {rec[f'rule_{mode}_us']:.2f} -> {rec[f'red8_{mode}_us']:.2f}"
                 f" ratio {rec[f'rule_{mode}_ratio']:.3f} -> {rec[f'red8_{mode}_ratio']:.3f}")
    line += f" checks {sorted({r.get('check') for w in runs.values() for r in w})}"
    print(line, flush=True)
    res.append(rec)
t04.reduce_width = rule
json.dump(dict(gpu=torch.cuda.get_device_name(), records=res), open(f"{OUT}/red8_ab.json", "w"), indent=1, default=str)
