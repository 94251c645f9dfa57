"""How fast do the copy engines move B between the GPUs of one host, by layout and by pattern?

    python3 scripts/device/copy_paths_probe.py --json $OUT/copy-paths.json

The host split (A and B on GPU 0) and the 1-D engine's peer transport both gather B's column
panels by the copy engines. On four H200s the host split reached 2.65x at 32768^3, against 3.6x
wanted (docs/perf-notes.md, 69): GPU 0 sent all of B to each of three GPUs. One process, BF16, B
N x N (default 32768), each figure the median of --reps repeats, GB/s of the bytes that land:
- flat: a contiguous block of K x w elements, GPU 0 -> GPU 1 (multigpu.copy_flat, cuMemcpyAsync);
- strided-w: a K x w column panel of B, its rows w elements apart in N (multigpu.copy_2d);
- fan-out: GPUs 1..P-1 each pull the same strided panel from GPU 0 at once (what the host split
  did), the sum over the readers;
- chain: GPU g pulls a flat block from GPU g - 1, for every g at once (what a relay does), the
  sum over the links;
- fan-in: GPU 0 pulls a flat block from every other GPU at once, on one stream and on one stream
  a peer.
"""

import argparse
import json
import statistics
import time

import torch

from tilegemm import multigpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=32768)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--json")
    args = p.parse_args()
    gpus, n, w = torch.cuda.device_count(), args.size, args.width
    for x in range(gpus):
        for y in range(gpus):
            if x != y:
                multigpu._peer(x, y)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    widths = sorted({1024, 2048, w, 8192})
    flat = [torch.randn(n * w, device=f"cuda:{g}").to(torch.bfloat16) for g in range(gpus)]
    land = [torch.empty(n * max(widths), dtype=torch.bfloat16, device=f"cuda:{g}") for g in range(gpus)]
    into0 = [torch.empty(n * w, dtype=torch.bfloat16, device="cuda:0") for _ in range(gpus)]
    streams = [torch.cuda.Stream(g) for g in range(gpus)]
    side0 = [torch.cuda.Stream(0) for _ in range(gpus)]
    panel_bytes = n * w * 2

    def sync():
        for g in range(gpus):
            torch.cuda.synchronize(g)

    def timed(issue, nbytes):
        issue()
        got = []
        for _ in range(args.reps):
            sync()
            t0 = time.perf_counter()
            issue()
            sync()
            got.append(time.perf_counter() - t0)
        s = statistics.median(got)
        return dict(ms=round(s * 1e3, 3), gbps=round(nbytes / s / 1e9, 1))

    def on(g, fn):
        with torch.cuda.device(g):
            fn()

    figs = {}
    figs["flat"] = timed(lambda: on(1, lambda: multigpu.copy_flat(land[1][:n * w], flat[0], streams[1])), panel_bytes)
    for width in widths:
        col = b[:, :width]
        dst = land[1][:n * width].view(n, width)
        figs[f"strided-{width}"] = timed(lambda: on(1, lambda: multigpu.copy_2d(dst, col, streams[1])),
                                         n * width * 2)
    col = b[:, :w]

    def fan_out():
        for g in range(1, gpus):
            on(g, lambda: multigpu.copy_2d(land[g][:n * w].view(n, w), col, streams[g]))

    figs["fan-out"] = timed(fan_out, (gpus - 1) * panel_bytes)
    sync()
    exact = dict(fan_out=all(torch.equal(land[g][:n * w].view(n, w).cpu(), col.cpu()) for g in range(1, gpus)))

    def fan_out_flat():
        for g in range(1, gpus):
            on(g, lambda: multigpu.copy_flat(land[g][:n * w], flat[0], streams[g]))

    figs["fan-out-flat"] = timed(fan_out_flat, (gpus - 1) * panel_bytes)

    def chain():
        for g in range(1, gpus):
            on(g, lambda: multigpu.copy_flat(land[g][:n * w], flat[g - 1], streams[g]))

    figs["chain"] = timed(chain, (gpus - 1) * panel_bytes)
    sync()
    exact["chain"] = all(torch.equal(land[g][:n * w].cpu(), flat[g - 1].cpu()) for g in range(1, gpus))

    def fan_in_one():
        for g in range(1, gpus):
            multigpu.copy_flat(into0[g], flat[g], streams[0])

    def fan_in_many():
        for g in range(1, gpus):
            multigpu.copy_flat(into0[g], flat[g], side0[g])

    figs["fan-in-one-stream"] = timed(lambda: on(0, fan_in_one), (gpus - 1) * panel_bytes)
    figs["fan-in-many-streams"] = timed(lambda: on(0, fan_in_many), (gpus - 1) * panel_bytes)
    for k, v in figs.items():
        print(f"{k:22s} {v['ms']:8.3f} ms {v['gbps']:8.1f} GB/s", flush=True)
    print("exact:", exact)
    res = dict(gpu=torch.cuda.get_device_name(0), gpus=gpus, n=n, width=w, torch=torch.__version__,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), reps=args.reps, figures=figs,
               exact=exact)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
