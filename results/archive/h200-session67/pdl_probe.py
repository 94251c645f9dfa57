"""Programmatic dependent launch (PDL) on and off: a Llama-3-8B-shaped model cut to LAYERS layers
(random weights), decode (graph and eager) at batch 1 and 8 and prefill 1x2048 eager, ours against
torch in the same runs (model-bench's _phase: alternating calls, 3 runs); the toggle is
_problem.pdl, every plan rebuilt. Then a chain of dependent products through tilegemm.matmul
checked against torch. Writes $OUT/pdl_probe.json."""
import json, os, statistics, sys, time
import torch
import tilegemm
from tilegemm.bench import model as MB
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import cache

OUT = os.environ.get("OUT", "/tmp")
LAYERS = int(os.environ.get("LAYERS", "8"))
rule = P.pdl
dev = torch.device("cuda")

def setpdl(on):
    P.pdl = rule if on else (lambda p: False)
    cache.reset()

# correctness first: 40 dependent products, each reading the one before, PDL on
setpdl(True)
g = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(8, 4096, device=dev, dtype=torch.bfloat16, generator=g)
ws = [torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16, generator=g) / 64 for _ in range(4)]
errs = []
for m in (1, 8, 16, 128):
    y = ref = x[:1].expand(m, 4096).contiguous() if m <= 8 else torch.randn(m, 4096, device=dev, dtype=torch.bfloat16, generator=g)
    for i in range(40):
        y = tilegemm.matmul(y, ws[i % 4].t())
        ref = torch.matmul(ref, ws[i % 4].t())
        y = y / y.float().norm(dim=-1, keepdim=True).clamp_min(1e-3).to(y.dtype) * 64
        ref = ref / ref.float().norm(dim=-1, keepdim=True).clamp_min(1e-3).to(ref.dtype) * 64
    torch.cuda.synchronize()
    errs.append(float((y.float() - ref.float()).norm() / ref.float().norm()))
print("chain rel err", errs, flush=True)

model = MB.build(MB.LLAMA3_8B, LAYERS, dev, torch.bfloat16)
gen = torch.Generator(device="cpu").manual_seed(1)
ids = lambda b, s: torch.randint(0, model.config.vocab_size, (b, s), generator=gen).to(dev)
CASES = [("decode", "graph", 1, 128), ("decode", "graph", 8, 128), ("decode", "eager", 1, 128),
         ("decode", "eager", 8, 128), ("prefill", "eager", 1, 2048), ("prefill", "graph", 1, 2048)]
res = []
for phase, mode, batch, seq in CASES:
    x = ids(batch, seq)
    rec = dict(phase=phase, mode=mode, batch=batch, seq=seq)
    for rnd, on in enumerate((False, True, False, True)):
        setpdl(on)
        with torch.no_grad():
            r = MB._phase(model, phase, mode, x, 64, 3, dev)
        key = "pdl" if on else "off"
        rec.setdefault(key, []).append(dict(ours=statistics.median(r["t_ours"]), ref=statistics.median(r["t_ref"]),
                                            ratio=statistics.median(r["t_ref"]) / statistics.median(r["t_ours"])))
        torch.cuda.empty_cache()
    line = f"{phase} {mode} {batch}x{seq}"
    for key in ("off", "pdl"):
        rs = rec[key]
        line += f" | {key} ours {statistics.mean(r['ours'] for r in rs)*1e3:.3f} ms ref {statistics.mean(r['ref'] for r in rs)*1e3:.3f} ratio {[round(r['ratio'], 3) for r in rs]}"
    print(line, flush=True)
    res.append(rec)
    json.dump(dict(gpu=torch.cuda.get_device_name(), layers=LAYERS, when=time.strftime("%Y-%m-%dT%H:%M:%S"),
                   chain_err=errs, records=res), open(f"{OUT}/pdl_probe.json", "w"), indent=1)
setpdl(True)
