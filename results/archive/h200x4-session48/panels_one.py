"""Session 48: one GPU, tilegemm's product of M x N x K whole against in B's column panels (multigpu.panels), alternated."""
import json, os, statistics, torch, tilegemm
from tilegemm import multigpu as m
dev = torch.device("cuda", int(os.environ.get("GPU", "1")))
torch.cuda.set_device(dev)
res = []
for n, ms, reps in ((32768, (8192, 12288, 16384, 24576, 32768), 3), (65536, (16384, 32768), 1)):
    b = torch.randn(n, n, device=dev).to(torch.bfloat16)
    for M in ms:
        a = torch.randn(M, n, device=dev).to(torch.bfloat16)
        c = torch.empty(M, n, device=dev, dtype=torch.bfloat16)
        whole = lambda: tilegemm.matmul(a, b, out=c)
        pan = lambda: [tilegemm.matmul(a, b[:, j0:j1], out=c[:, j0:j1]) for j0, j1 in m.panels(n)]
        cub = lambda: torch.mm(a, b, out=c)
        t = {"whole": [], "panels": [], "cublas": []}
        for f in (whole, pan, cub):
            f()
        for r in range(4):
            for name, f in (("whole", whole), ("panels", pan), ("cublas", cub))[::(1 if r % 2 == 0 else -1)]:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(reps):
                    f()
                e.record(); e.synchronize()
                t[name].append(s.elapsed_time(e) / reps)
        med = {k: round(statistics.median(v), 3) for k, v in t.items()}
        print(n, M, med, {k: round(2 * M * n * n / (v * 1e-3) / 1e12) for k, v in med.items()}, flush=True)
        res.append(dict(n=n, m=M, median_ms=med, ms=t))
        del a, c
    del b; torch.cuda.empty_cache()
json.dump(res, open(os.environ.get("OUT", "/tmp") + "/panels-one-gpu.json", "w"), indent=1)
