"""Session 48 probe: the host split's lags as measured (end - products' busy time), 2 and 4 GPUs, 16384-65536."""
import json, os, statistics, sys, time
import torch
import tilegemm
from tilegemm import multigpu
sys.path.insert(0, "scripts/device")
from host_split_trace import per_gpu, sync

res = []
for gpus in (4, 2):
    ids = list(range(gpus))
    for n in (16384, 32768, 65536):
        a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
        b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
        call = lambda: tilegemm.matmul(a, b, devices=ids)
        call(); call()
        whole = []
        for _ in range(3):
            sync(); t0 = time.perf_counter(); call(); sync(); whole.append((time.perf_counter() - t0) * 1e3)
        traces = [per_gpu(call) for _ in range(2)]
        split = [list(r) for r in multigpu.describe_split(n, n, n, tuple(ids), 2, 0)]
        rec = dict(gpus=gpus, n=n, split=split, whole_ms=[round(x, 3) for x in whole], traces=traces)
        for t in traces:
            ks = sorted(t, key=str)
            print(gpus, n, "whole", round(statistics.median(whole), 2), "ends", [t[k]["end_ms"] for k in ks],
                  "lags", [round(t[k]["end_ms"] - t[k]["products_ms"], 2) for k in ks],
                  "us/row", [round(t[k]["products_ms"] * 1e3 / (r1 - r0), 3) for k, (g, r0, r1) in zip(ks, split)],
                  "first", [t[k]["first_product_ms"] for k in ks], flush=True)
        res.append(rec)
        del a, b
        torch.cuda.empty_cache()
json.dump(res, open(os.environ.get("OUT", "/tmp") + "/probe-lags.json", "w"), indent=1)
