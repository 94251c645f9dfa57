"""Does a GEMM keep its rate while the copy engines bring the other GPUs' rows of B beside it?

    python3 scripts/device/ce_overlap_probe.py --json $OUT/ce-overlap.json

The 1-D engine's panel loop ran at 0.79-0.89 of its products alone on two H200s (docs/perf-notes.md,
43): NCCL's all-gather kernels take SMs from the GEMM beside them. An all-gather done by the copy
engines instead (peer copies, no SM) would leave the GEMM whole, if the copies do not slow it
through memory. One process, GPU 0 and its P - 1 peers, BF16, at N (default 32768): GPU 0's share
of a P-way 1-D product, (N/P) x N x N, and the P - 1 blocks of B's rows (N/P x N each) that it
would gather. Each figure the median of --reps repeats, by events on GPU 0:
- gemm: the local product alone;
- pull: GPU 0's copy stream pulls the peers' blocks (tilegemm.multigpu.copy_2d, cuMemcpy2DAsync);
- push: each peer's own copy stream pushes its block to GPU 0 (one copy engine a peer);
- gemm+pull, gemm+push: the product with the copies issued just before it on other streams; the
  GEMM's own time (events around it on its stream) and the whole (both done).
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
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args()
    gpus, n = torch.cuda.device_count(), args.size
    rows = n // gpus
    a = torch.randn(rows, n, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    src = [torch.randn(rows, n, device=f"cuda:{g}").to(torch.bfloat16) for g in range(1, gpus)]
    dst = [torch.empty(rows, n, dtype=torch.bfloat16, device="cuda:0") for _ in src]
    for g in range(1, gpus):  # torch enables peer access at a first copy between two devices, both ways
        src[g - 1][:1, :8].to("cuda:0")
        b[:1, :8].to(f"cuda:{g}")
    compute, pull = torch.cuda.Stream(0), torch.cuda.Stream(0)
    push = [torch.cuda.Stream(g) for g in range(1, gpus)]
    out = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda:0")

    def sync():
        for g in range(gpus):
            torch.cuda.synchronize(g)

    def copies(kind):
        if kind == "pull":
            for d, s in zip(dst, src):
                multigpu.copy_2d(d, s, pull)
        else:
            for d, s, st in zip(dst, src, push):
                with torch.cuda.device(st.device):
                    multigpu.copy_2d(d, s, st)

    def one(kind):
        """(gemm ms, whole ms) of one repeat."""
        sync()
        start, g0, g1 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        t0 = time.perf_counter()
        start.record(compute)
        if kind in ("pull", "push", "gemm+pull", "gemm+push"):
            copies(kind.removeprefix("gemm+"))
        if kind.startswith("gemm"):
            with torch.cuda.stream(compute):
                g0.record(compute)
                torch.mm(a, b, out=out)
                g1.record(compute)
        sync()
        whole = (time.perf_counter() - t0) * 1e3
        return (g0.elapsed_time(g1) if kind.startswith("gemm") else None), whole

    res = dict(gpu=torch.cuda.get_device_name(0), gpus=gpus, n=n, rows=rows, torch=torch.__version__,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), reps=args.reps,
               copy_bytes=sum(s.numel() * 2 for s in src), gemm_tflops_of=2 * rows * n * n, figures={})
    for kind in ("gemm", "pull", "push", "gemm+pull", "gemm+push", "gemm"):
        one(kind)  # warm
        got = [one(kind) for _ in range(args.reps)]
        fig = dict(whole_ms=statistics.median(w for _, w in got))
        if got[0][0] is not None:
            fig["gemm_ms"] = statistics.median(g for g, _ in got)
            fig["gemm_tflops"] = 2 * rows * n * n / fig["gemm_ms"] / 1e9
        if kind in ("pull", "push"):
            fig["copy_gbps"] = res["copy_bytes"] / fig["whole_ms"] / 1e6
        res["figures"][kind + ("-again" if kind in res["figures"] else "")] = fig
        print(f"{kind:10s} " + "  ".join(f"{k} {v:.3f}" for k, v in fig.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
