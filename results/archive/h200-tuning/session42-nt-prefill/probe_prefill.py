"""Prefill's products as a model calls them (BF16, B = W^T), ours vs cuBLAS, device and eager clocks."""
import json, os, sys, time
import torch
import tilegemm
from tilegemm.bench import library as L

SHAPES = {"8b": [(4096, 4096, 2), (1024, 4096, 2), (14336, 4096, 2), (4096, 14336, 1), (128256, 4096, 0)],
          "70b": [(8192, 8192, 2), (1024, 8192, 2), (28672, 8192, 2), (8192, 28672, 1), (128256, 8192, 0)]}
MS = [int(x) for x in os.environ.get("MS", "2048,8192").split(",")]
budget = float(os.environ.get("BUDGET", "1.0"))
clock = L._Clock()
out = []
for model, ws in SHAPES.items():
    for m in MS:
        for n, k, per_layer in ws:
            a = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.empty(n, k, device="cuda", dtype=torch.bfloat16)
            try:
                how = tilegemm.explain(a, w.t())
            except Exception as e:
                how = f"explain failed: {e}"
            del a, w
            rec = L.measure_shape(clock, "bf16", m, n, k, ("device", "eager"), budget, w_t=True)
            rec.update(model=model, per_layer=per_layer, explain=how)
            out.append(rec)
            d, e = rec.get("device", {}), rec.get("eager", {})
            print(f"{model} {m}x{n}x{k} dev {d.get('ours_ms',0)*1e3:.1f}/{d.get('ref_ms',0)*1e3:.1f} "
                  f"= {d.get('ref_ms',0)/max(d.get('ours_ms',1e-9),1e-9):.3f}  eager "
                  f"{e.get('ref_ms',0)/max(e.get('ours_ms',1e-9),1e-9):.3f}  check {rec.get('check')} | "
                  f"{how.splitlines()[0][:150] if isinstance(how,str) else how}", flush=True)
            torch.cuda.empty_cache()
path = os.path.join(os.environ.get("OUT", "."), os.environ.get("NAME", "prefill.json"))
json.dump(dict(environment=__import__("tilegemm.bench.results", fromlist=["environment"]).environment(), records=out),
          open(path, "w"), indent=1, default=str)
