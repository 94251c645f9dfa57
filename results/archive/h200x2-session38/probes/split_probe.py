"""A/B of the host split's row split on 2 GPUs: whole-call time (all GPUs synchronised) for several
home-row counts, interleaved over rounds; host time; one GPU's torch.mm beside; one trace a size."""
import json, statistics, sys, time, importlib.util
import torch
import tilegemm
from tilegemm import multigpu

spec = importlib.util.spec_from_file_location("hst", "scripts/device/host_split_trace.py")
hst = importlib.util.module_from_spec(spec); spec.loader.exec_module(hst)
ship = multigpu.describe_split
out = {"gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "sizes": {}}
plan = {8192: [8192, 4096, 4352, 4608, 4864, 5120], 16384: [8192, 8320, 8448, 8576, 8704],
        32768: [16384, 16512, 16640, 16768, 16896]}
sizes = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [32768, 16384, 8192]
for n in sizes:
    a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    reps = 7 if n >= 32768 else 15
    res = {h: {"whole": [], "host": []} for h in plan[n]}
    mm = []
    shipped = ship(n, n, n, (0, 1), 2, 0)
    for rnd in range(3):
        for h in plan[n]:
            blocks = ((0, 0, h), (1, h, n))
            multigpu.describe_split = lambda *args, blocks=blocks: blocks
            tilegemm.matmul(a, b, devices="all")
            w, hs = [], []
            for _ in range(reps):
                hst.sync(); t0 = time.perf_counter()
                tilegemm.matmul(a, b, devices="all")
                t1 = time.perf_counter(); hst.sync()
                w.append((time.perf_counter() - t0) * 1e3); hs.append((t1 - t0) * 1e3)
            res[h]["whole"].append(statistics.median(w)); res[h]["host"].append(statistics.median(hs))
        multigpu.describe_split = ship
        torch.mm(a, b); t = []
        for _ in range(reps):
            hst.sync(); t0 = time.perf_counter(); torch.mm(a, b); hst.sync(); t.append((time.perf_counter() - t0) * 1e3)
        mm.append(statistics.median(t))
    one = statistics.median(mm)
    fig = {"shipped": [list(x) for x in shipped], "one_gpu_ms": mm, "variants": {}}
    for h in plan[n]:
        med = statistics.median(res[h]["whole"])
        fig["variants"][h] = dict(res[h], median_ms=med, speedup=one / med)
        print(f"n {n} home {h}: whole {['%.3f' % x for x in res[h]['whole']]} median {med:.3f} speed-up {one/med:.4f} host {statistics.median(res[h]['host']):.3f}", flush=True)
    print(f"n {n}: one GPU {mm}; shipped {shipped}", flush=True)
    for h in (shipped[0][2],) + ((n,) if n == 8192 else ()):
        blocks = ((0, 0, h), (1, h, n)) if h < n else ((0, 0, n),)
        multigpu.describe_split = lambda *args, blocks=blocks: blocks
        fig.setdefault("trace", {})[h] = tr = hst.per_gpu(lambda: tilegemm.matmul(a, b, devices="all"))
        for d, g in tr.items():
            print(f"   home {h} GPU {d}: {g}", flush=True)
    multigpu.describe_split = ship
    out["sizes"][n] = fig
    del a, b
    torch.cuda.empty_cache()
json.dump(out, open(sys.argv[2] if len(sys.argv) > 2 else "/tmp/out/split.json", "w"), indent=1)
