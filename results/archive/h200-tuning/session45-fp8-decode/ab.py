"""(session 45: DTYPE added to session 43's ab_lib.py) Changed decode picks through the public API (tilegemm.matmul as the library bench calls it), device and
eager clocks, cuBLAS interleaved. SHAPES: m x n x k x layout, comma-separated. Run once per database."""
import json, os, time
import torch
from tilegemm.bench import library as L

shapes = [s.split("x") for s in os.environ["SHAPES"].split(",")]
budget = float(os.environ.get("BUDGET", "0.8"))
clock = L._Clock()
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
t0 = time.time()
while time.time() - t0 < 2:
    x @ x
torch.cuda.synchronize()
L.measure_shape(clock, "bf16", 16, 4096, 4096, ("device", "eager"), 0.3, w_t=True)  # warm the harness itself
out = []
for m, n, k, lay in shapes:
    rec = L.measure_shape(clock, os.environ.get("DTYPE", "bf16"), int(m), int(n), int(k), ("device", "eager"), budget, w_t=lay == "t")
    rec["layout"] = lay
    out.append(rec)
    d, e = rec["device"], rec["eager"]
    print(f"{lay} {m}x{n}x{k} dev {d['ours_ms']*1e3:.1f}/{d['ref_ms']*1e3:.1f} = {d['ref_ms']/d['ours_ms']:.3f}  "
          f"eager {e['ours_ms']*1e3:.1f}/{e['ref_ms']*1e3:.1f} = {e['ref_ms']/e['ours_ms']:.3f} {rec.get('check', '')}", flush=True)
json.dump(out, open(os.path.join(os.environ["OUT"], os.environ["NAME"] + ".json"), "w"), indent=1, default=str)
