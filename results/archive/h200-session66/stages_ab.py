"""A/B of the fused split-K's pipelined sum (t04.sum_stages; "old" = never pipelined) at the H200
database's fused entries it changes (TF32 64x64 and 128x64 tiles in 4 slices) and at
128x1024x4096 (32x64 in 6 slices, 2 at a time: unchanged, a control), through the library's
measure_shape: both clocks, cuBLAS in the same runs, 3 rounds, the order alternating. Writes
$OUT/stages_ab.json."""
import json, os, statistics
import torch
from tilegemm.kernels.tensorcore import t04_splitk as t04
from tilegemm.tuning import cache
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp")
rule = t04.sum_stages
SHAPES = [(192, 1024, 4096), (256, 1024, 4096), (384, 1024, 4096), (1024, 384, 4096), (512, 1024, 4096),
          (1024, 512, 4096), (128, 1024, 4096)]
clock = L._Clock()
res = []
for m, n, k in SHAPES:
    runs = {"old": [], "new": []}
    for rnd in range(3):
        for which in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
            t04.sum_stages = (lambda s, r: 0) if which == "old" else rule
            cache.reset()
            runs[which].append(L.measure_shape(clock, "tf32", m, n, k, ("eager", "device"), 0.3))
    rec = dict(dtype="tf32", m=m, n=n, k=k, runs=runs)
    line = f"tf32 {m}x{n}x{k}"
    for mode in ("eager", "device"):
        for which in ("old", "new"):
            rs = [r[mode] for r in runs[which] if mode in r]
            rec[f"{which}_{mode}_us"] = statistics.median(r["ours_ms"] for r in rs) * 1e3
            rec[f"{which}_{mode}_ratio"] = statistics.median(r["ref_ms"] / r["ours_ms"] for r in rs)
        line += (f" | {mode} us {rec[f'old_{mode}_us']:.2f} -> {rec[f'new_{mode}_us']:.2f}"
                 f" ratio {rec[f'old_{mode}_ratio']:.3f} -> {rec[f'new_{mode}_ratio']:.3f}")
    line += f" checks {sorted({r.get('check') for w in runs.values() for r in w})}"
    print(line, flush=True)
    res.append(rec)
t04.sum_stages = rule
json.dump(dict(gpu=torch.cuda.get_device_name(), records=res), open(f"{OUT}/stages_ab.json", "w"), indent=1,
          default=str)
