"""In-process host-cost A/B: several copies of the package (renamed) and torch.mm, alternated
batch by batch (300 back-to-back calls, then a sync), 25 rounds in rotating order; µs per call,
median, and each copy's median of per-round ratios against HEAD's (tilegemm)."""
import importlib, json, statistics, sys, time
import torch
NAMES = sys.argv[1].split(",")
mods = {n: importlib.import_module(n) for n in NAMES}
torch.manual_seed(0)
out = {}
for dt in (torch.bfloat16, torch.float32):
    a = torch.randn(64, 64, device="cuda", dtype=dt); b = torch.randn(64, 64, device="cuda", dtype=dt)
    o = torch.empty(64, 64, device="cuda", dtype=dt)
    paths = {"matmul": lambda m: (lambda: m.matmul(a, b)), "matmul out": lambda m: (lambda: m.matmul(a, b, out=o))}
    if dt is torch.bfloat16:
        paths["gemm"] = lambda m: (lambda: m.gemm(a, b))
        paths["gemm c"] = lambda m: (lambda: m.gemm(a, b, c=o, beta=1.0))
    for pname, make in paths.items():
        fns = {n: make(m) for n, m in mods.items()}
        fns["torch.mm"] = lambda: torch.mm(a, b)
        for fn in fns.values():
            for _ in range(100): fn()
        torch.cuda.synchronize()
        ts = {n: [] for n in fns}
        order = list(fns)
        for r in range(25):
            order = order[1:] + order[:1]
            for n in order:
                fn = fns[n]
                t0 = time.perf_counter()
                for _ in range(300): fn()
                torch.cuda.synchronize()
                ts[n].append((time.perf_counter() - t0) / 300 * 1e6)
        head = ts[NAMES[0]]
        row = {n: (round(statistics.median(v), 2), round(statistics.median([x / h for x, h in zip(v, head)]), 3))
               for n, v in ts.items()}
        out[f"{pname} {str(dt)[6:]}"] = row
        print(f"{pname} {str(dt)[6:]}", json.dumps(row), flush=True)
