"""Where a one-process row split over 2 GPUs loses against two processes (issue 24's 1.79× vs 2.10×).

    python3 scripts/device/host_split_probe.py --json $OUT/host-split-probe.json

BF16 N³ (default 16384 and 32768), B already on both GPUs, each GPU's half of A's rows there too;
each way of driving the two half-products, the median of --reps repeats (each from both GPUs idle
to both synchronized):
- one-gpu: cuBLAS's whole product on GPU 0 (the reference);
- half-alone-g: GPU g's half-product with the other GPU idle;
- thread-per-call: a new Python thread per GPU per call runs torch.mm on its half (issue 24's probe);
- one-thread: the main thread launches both halves (both asynchronous), then synchronizes both;
- one-thread-out: the same into preallocated outputs (no allocation in the call);
- workers: tilegemm.multigpu's persistent per-GPU workers run torch.mm on their halves;
- devices: tilegemm.matmul(a, b, devices=[0, 1]) from cuda:0 operands, every copy counted;
- copy-w: GB/s of tilegemm.multigpu.copy_2d moving a K × w column panel of B from GPU 0 to GPU 1
  (copy engines, strided rows of w elements), w = 1024, 2048, 4096 and N (contiguous).
"""

import argparse
import json
import statistics
import threading
import time

import torch

import tilegemm
from tilegemm import multigpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="16384,32768")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--json")
    args = p.parse_args()
    out = dict(gpu=torch.cuda.get_device_name(0), gpus=torch.cuda.device_count(), torch=torch.__version__,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), reps=args.reps, sizes={})
    for n in map(int, args.sizes.split(",")):
        a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
        b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
        h = n // 2
        parts = [(a[:h], b), (a[h:].to("cuda:1"), b.to("cuda:1"))]
        outs = [torch.empty(h, n, device=f"cuda:{g}", dtype=torch.bfloat16) for g in range(2)]

        def sync():
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)

        def timed(fn):
            fn()
            sync()
            ts = []
            for _ in range(args.reps):
                sync()
                t0 = time.perf_counter()
                fn()
                sync()
                ts.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(ts)

        def half(g, out=None):
            x, y = parts[g]
            with torch.cuda.device(g):
                return torch.mm(x, y, out=out) if out is not None else torch.mm(x, y)

        def thread_per_call():
            ts = [threading.Thread(target=lambda g=g: (half(g), torch.cuda.synchronize(g))) for g in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        def workers():
            fs = [multigpu.worker(g).submit(lambda w, g=g: (half(g), torch.cuda.synchronize(g))) for g in range(2)]
            for f in fs:
                f.result()

        row = {"one-gpu": timed(lambda: torch.mm(a, b)),
               "half-alone-0": timed(lambda: half(0)), "half-alone-1": timed(lambda: half(1)),
               "thread-per-call": timed(thread_per_call),
               "one-thread": timed(lambda: (half(0), half(1))),
               "one-thread-out": timed(lambda: (half(0, outs[0]), half(1, outs[1]))),
               "workers": timed(workers),
               "devices": timed(lambda: tilegemm.matmul(a, b, devices=[0, 1]))}
        row["split"] = multigpu.describe_split(n, n, n, (0, 1), 2, 0)
        s1 = torch.cuda.Stream(1)
        for w in (1024, 2048, 4096, n):
            dst = torch.empty(n, w, device="cuda:1", dtype=torch.bfloat16)

            def move(dst=dst, w=w):
                with torch.cuda.device(1):
                    multigpu.copy_2d(dst, b[:, :w], s1)
            ms = timed(move)
            row[f"copy-{w}-GBps"] = round(n * w * 2 / (ms * 1e-3) / 1e9, 1)
            ok = torch.equal(dst.to("cuda:0"), b[:, :w])
            row[f"copy-{w}-exact"] = ok
        out["sizes"][n] = row
        print(n, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()},
              {k: round(row["one-gpu"] / v, 3) for k, v in row.items() if isinstance(v, float) and "copy" not in k},
              flush=True)
        del a, b, parts, outs
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
