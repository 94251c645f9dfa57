"""Where the host split loses time on four GPUs: the host's issue, or each GPU's wait.

    python3 scripts/device/host_split_trace.py --json $OUT/host-split-trace.json

tilegemm.matmul(a, b, devices="all") with A and B on cuda:0, BF16 N^3 (default 16384 and 32768).
Per size: the call's host time (until it returns: every worker has queued its GPU's work) and
its whole time (until every GPU is done), medians of --reps; then one call under torch.profiler,
and per GPU from the call's first GPU event: its first product's start, its products' busy time,
its copies' (in and out) busy time, and its last event's end.
"""

import argparse
import json
import os
import statistics
import tempfile
import time

import torch

import tilegemm
from tilegemm import multigpu


def sync():
    for g in range(torch.cuda.device_count()):
        torch.cuda.synchronize(g)


def per_gpu(fn):
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    evs = [e for e in json.load(open(path))["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    t0 = min(e["ts"] for e in evs)
    out = {}
    where = lambda e: e["args"].get("device", e.get("pid"))  # noqa: E731
    for d in sorted({where(e) for e in evs}, key=str):
        mine = [e for e in evs if where(e) == d]
        gemm = [e for e in mine if e["cat"] == "kernel" and "elementwise" not in e["name"]]
        copy = [e for e in mine if e["cat"] == "gpu_memcpy"]
        out[d] = dict(first_product_ms=round((min(e["ts"] for e in gemm) - t0) / 1e3, 3) if gemm else None,
                      products_ms=round(sum(e["dur"] for e in gemm) / 1e3, 3), products=len(gemm),
                      copies_ms=round(sum(e["dur"] for e in copy) / 1e3, 3), copies=len(copy),
                      end_ms=round((max(e["ts"] + e["dur"] for e in mine) - t0) / 1e3, 3),
                      first_copy_ms=round((min(e["ts"] for e in copy) - t0) / 1e3, 3) if copy else None)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="16384,32768")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--json")
    args = p.parse_args()
    res = dict(gpu=torch.cuda.get_device_name(0), gpus=torch.cuda.device_count(), torch=torch.__version__,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), sizes={})
    for n in map(int, args.sizes.split(",")):
        a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
        b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
        call = lambda: tilegemm.matmul(a, b, devices="all")  # noqa: E731
        call()
        call()
        host, whole = [], []
        for _ in range(args.reps):
            sync()
            t0 = time.perf_counter()
            call()
            t1 = time.perf_counter()
            sync()
            host.append((t1 - t0) * 1e3)
            whole.append((time.perf_counter() - t0) * 1e3)
        fig = dict(host_ms=round(statistics.median(host), 3), whole_ms=round(statistics.median(whole), 3),
                   split=[list(r) for r in multigpu.describe_split(n, n, n, tuple(range(res["gpus"])), 2, 0)],
                   gpus_traced=per_gpu(call))
        res["sizes"][n] = fig
        print(f"n {n}: host {fig['host_ms']} ms, whole {fig['whole_ms']} ms", flush=True)
        for d, g in fig["gpus_traced"].items():
            print(f"   GPU {d}: {g}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
