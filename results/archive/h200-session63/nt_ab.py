"""Narrow products with B = Wᵀ (as nn.Linear passes it) through the library's harness: 3 runs,
BF16 and FP16, eager and device, cuBLAS interleaved in the same runs. Usage: nt_ab.py SHAPES OUT."""
import json
import sys

import torch

from tilegemm.bench import library as L
from tilegemm.bench.results import environment
from tilegemm.bench.shapes import load_shapes

shapes, out = load_shapes(sys.argv[1]), sys.argv[2]
clock, per, modes = L._Clock(), {}, ("eager", "device")
for run in range(3):
    for dtype in ("bf16", "fp16"):
        for m, n, k in shapes:
            per.setdefault((dtype, m, n, k), []).append(L.measure_shape(clock, dtype, m, n, k, modes, 0.3, w_t=True))
            torch.cuda.empty_cache()
    print(f"run {run + 1}/3 done", flush=True)
recs = L.records(per, modes)
summary = L.summarise(recs)
json.dump(dict(layout="nt (B = W.t())", environment=environment(), records=recs, summary=summary), open(out, "w"), indent=1)
for key, s in summary.items():
    print(key, f"geomean {s['geomean']:.3f}", f"below 0.95: {s['below_095']}", f"worst {s['worst']}")
