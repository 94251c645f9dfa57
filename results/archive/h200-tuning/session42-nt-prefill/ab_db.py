"""Old database's pick against the new one's, per nt shape, device clock, cuBLAS beside (interleaved)."""
import json, os, statistics
import torch
from tilegemm import tuning, dispatch
from tilegemm.tuning.command import problem
from tilegemm.bench import library as L

old = json.load(open(".dev/db-before.json"))
new = json.load(open("src/tilegemm/data/tuning/nvidia-h200.json"))
W = [(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (128256, 4096),
     (8192, 8192), (1024, 8192), (28672, 8192), (8192, 28672), (128256, 8192)]
MS = [int(x) for x in os.environ.get("MS", "256,512,1024,2048,4096,8192,16384").split(",")]
budget = float(os.environ.get("BUDGET", "1.5"))
clock = L._Clock()
out = []
for m in MS:
    for n, k in W:
        p = problem("bf16", m, n, k, "t")
        do, dn = tuning.pick(old, "old", p), tuning.pick(new, "new", p)
        rec = dict(m=m, n=n, k=k, old=dict(rung=do.rung, config=do.config), new=dict(rung=dn.rung, config=dn.config))
        if (do.rung, do.config) == (dn.rung, dn.config):
            rec["same"] = True
            out.append(rec)
            print(f"{m}x{n}x{k}: same pick", flush=True)
            continue
        fo = lambda: dispatch.run_problem(p, do.rung, config=do.config)
        fn = lambda: dispatch.run_problem(p, dn.rung, config=dn.config)
        ref = lambda: torch.matmul(p.a, p.b)
        for f in (fo, fn, ref):
            f(); f()
        torch.cuda.synchronize()
        so, sn, sr = L._interleaved([lambda k_, f=f: clock.device(f, k_) for f in (fo, fn, ref)], budget)
        mo, mn, mr = (statistics.median(s) for s in (so, sn, sr))
        rec.update(old_ms=mo, new_ms=mn, ref_ms=mr)
        out.append(rec)
        print(f"{m}x{n}x{k}: old {mo*1e3:.1f} new {mn*1e3:.1f} cuBLAS {mr*1e3:.1f} us  new/old {mn/mo:.3f}  "
              f"| {do.rung} {do.config} -> {dn.rung} {dn.config}", flush=True)
        del p
        torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "ab-db.json"), "w"), indent=1)
