"""A/B of the fused split-K reduction (RED = 1, the previous kernel, against reduce_width's rule)
through the library's own measure_shape: both clocks, cuBLAS in the same runs, 3 rounds, the order
alternating. Writes $OUT/red_ab.json."""
import json, os, statistics
import torch
from tilegemm.kernels.tensorcore import t04_splitk as t04
from tilegemm.tuning import cache
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp")
rule = t04.reduce_width
SHAPES = [("bf16", m, n, k, True) for m in (8, 16, 32, 64) for n, k in ((1024, 4096), (1024, 8192))] + \
         [("bf16", m, 4096, 14336, True) for m in (8, 16)] + \
         [("bf16", 128, 1024, 4096, False), ("bf16", 128, 1024, 8192, False), ("fp16", 128, 1024, 4096, False),
          ("fp8", 128, 1024, 8192, False), ("fp8", 16, 1024, 8192, False), ("tf32", 128, 1024, 4096, False),
          ("tf32", 16, 1024, 4096, False)]
clock = L._Clock()
res = []
for dtype, m, n, k, w_t in SHAPES:
    runs = {"old": [], "new": []}
    for rnd in range(3):
        for which in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
            t04.reduce_width = (lambda cfg, s: 1) if which == "old" else rule
            cache.reset()
            runs[which].append(L.measure_shape(clock, dtype, m, n, k, ("eager", "device"), 0.3, w_t=w_t))
    rec = dict(dtype=dtype, m=m, n=n, k=k, w_t=w_t, runs=runs)
    line = f"{dtype} {m}x{n}x{k} {'nt' if w_t else 'nn'}"
    for mode in ("eager", "device"):
        for which in ("old", "new"):
            rs = [r[mode] for r in runs[which] if mode in r]
            rec[f"{which}_{mode}_us"] = statistics.median(r["ours_ms"] for r in rs) * 1e3
            rec[f"{which}_{mode}_ratio"] = statistics.median(r["ref_ms"] / r["ours_ms"] for r in rs if "ref_ms" in r) if rs and "ref_ms" in rs[0] else None
        line += f" | {mode} us {rec[f'old_{mode}_us']:.2f} -> {rec[f'new_{mode}_us']:.2f}"
        if rec[f"old_{mode}_ratio"]:
            line += f" ratio {rec[f'old_{mode}_ratio']:.3f} -> {rec[f'new_{mode}_ratio']:.3f}"
    checks = {r.get("check") for w in runs.values() for r in w}
    line += f" checks {checks}"
    print(line, flush=True)
    res.append(rec)
t04.reduce_width = rule
json.dump(dict(gpu=torch.cuda.get_device_name(), records=res), open(f"{OUT}/red_ab.json", "w"), indent=1, default=str)
