import json, os
from tilegemm.bench import library as L
clock = L._Clock()
out = []
for m, n, k in [(16384, 4096, 4096), (16384, 1024, 4096), (16384, 14336, 4096), (16384, 4096, 14336), (16384, 1024, 8192)]:
    rec = L.measure_shape(clock, "bf16", m, n, k, ("device", "eager"), 1.5)
    out.append(rec)
    d, e = rec["device"], rec["eager"]
    print(f"{m}x{n}x{k} dev {d['ours_ms']*1e3:.1f}/{d['ref_ms']*1e3:.1f} = {d['ref_ms']/d['ours_ms']:.3f} eager {e['ref_ms']/e['ours_ms']:.3f} {rec['check']}", flush=True)
json.dump(out, open(os.path.join(os.environ["OUT"], os.environ["NAME"]), "w"), indent=1)
