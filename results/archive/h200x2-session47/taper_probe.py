"""A/B of the host split's first/last panels and first-panel row chunks on 2 GPUs (BF16 N^3, A, B
on cuda:0): whole-call time (all GPUs synchronised), variants interleaved over rounds, one GPU's
tilegemm product beside each round; one trace per variant (first product, each GPU's end)."""
import json, statistics, sys, time, importlib.util
import torch
import tilegemm
from tilegemm import multigpu as M

spec = importlib.util.spec_from_file_location("hst", "scripts/device/host_split_trace.py")
hst = importlib.util.module_from_spec(spec); spec.loader.exec_module(hst)
BIG = 10 ** 9
variants = {"ship": (BIG, BIG), "edge": (2048, BIG), "rows": (BIG, 2048), "new": (2048, 2048)}

def use(v):
    M.EDGE_PANEL, M.FIRST_ROWS = variants[v]
    M.describe_split.cache_clear()
    M.describe_panels.cache_clear()

sizes = [int(x) for x in sys.argv[1].split(",")]
rounds = int(sys.argv[2])
if len(sys.argv) > 4:
    variants = {v: variants[v] for v in sys.argv[4].split(",")}
out = {"gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "sizes": {}}
for n in sizes:
    a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    reps = 3 if n >= 65536 else 7 if n >= 32768 else 15
    res = {v: [] for v in variants}
    one = []
    ref = tilegemm.matmul(a, b)
    for rnd in range(rounds):
        for v in variants:
            use(v)
            c = tilegemm.matmul(a, b, devices="all")
            if rnd == 0:
                assert torch.equal(c, ref), v
            w = []
            for _ in range(reps):
                hst.sync(); t0 = time.perf_counter()
                tilegemm.matmul(a, b, devices="all")
                hst.sync(); w.append((time.perf_counter() - t0) * 1e3)
            res[v].append(statistics.median(w))
        t = []
        tilegemm.matmul(a, b)
        for _ in range(reps):
            hst.sync(); t0 = time.perf_counter(); tilegemm.matmul(a, b); hst.sync(); t.append((time.perf_counter() - t0) * 1e3)
        one.append(statistics.median(t))
        print(n, rnd, {v: round(x[-1], 3) for v, x in res.items()}, "one", round(one[-1], 3), flush=True)
    fig = {"one_gpu_ms": one, "variants": {}}
    o = statistics.median(one)
    for v in variants:
        use(v)
        med = statistics.median(res[v])
        tr = hst.per_gpu(lambda: tilegemm.matmul(a, b, devices="all"))
        fig["variants"][v] = {"rounds_ms": res[v], "median_ms": med, "speedup": o / med,
                              "split": [list(x) for x in M.describe_split(n, n, n, (0, 1), 2, 0)],
                              "panels": [y - x for x, y in M.describe_panels(n, n, n, 2, 2, True)], "trace": tr}
        print(f"n {n} {v}: median {med:.3f} speed-up {o/med:.4f} split {fig['variants'][v]['split']} trace {tr}", flush=True)
    out["sizes"][n] = fig
    del a, b, ref
    torch.cuda.empty_cache()
json.dump(out, open(sys.argv[3], "w"), indent=1)
