"""Where the 1-D engine's peer transport spends the time its products alone do not take.

    torchrun --nproc-per-node 4 scripts/device/peer_1d_trace.py --json $OUT/peer-1d-trace.json
    torchrun --nproc-per-node 4 scripts/device/peer_1d_trace.py --grid 2x2 --json $OUT/peer-summa-trace.json

--grid pr×pc (pc > 1): SUMMA's peer transport instead (_core.run on a layout made once, as
dist-bench times it; A's and B's blocks of the square N³ product on the grid).
--transport nccl [--after]: the 1-D engine's NCCL loop (--after: each panel's all-gather issued
after the GEMM before it, not beside it); --beyond: the size dist-bench's product beyond the GPUs'
memory has (operands made in row chunks as dist-bench makes them, never whole in FP32).

On four H200s the peer loop ran 4.27 ms at 16384 against 3.39 ms of products alone (efficiency
0.79) and 28.7 against 26.7 at 32768 (docs/perf-notes.md, 69). BF16, N^3 split by rows over the
ranks (default sizes 16384 and 32768); per size and rank: the loop and its products alone
(medians of --reps, events between barriers), then one loop under torch.profiler, whose GPU
timeline is cut into what each stream did: each kernel and copy with its start and length (ms
from the loop's first GPU event), the compute stream's idle time before its first GEMM, between
GEMMs and after its last.
"""

import argparse
import datetime
import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

from tilegemm.distributed import _core


def timed(fn, reps):
    got = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        got.append(s.elapsed_time(e))
    return statistics.median(got)


def timeline(fn):
    """The GPU events of one call of fn: (kind, name, stream, start ms, ms), from its first event."""
    from torch.profiler import ProfilerActivity, profile

    dist.barrier()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    evs = [e for e in json.load(open(path))["traceEvents"]
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    t0 = min(e["ts"] for e in evs)
    return [(e["cat"], e["name"][:60], e["args"].get("stream"), round((e["ts"] - t0) / 1e3, 4),
             round(e["dur"] / 1e3, 4)) for e in sorted(evs, key=lambda e: e["ts"])]


def summary(events):
    gemm_like = [e for e in events if e[0] == "kernel" and "barrier" not in e[1].lower()
                 and "elementwise" not in e[1].lower() and "copy" not in e[1].lower()
                 and "nccl" not in e[1].lower()]
    if not gemm_like:
        return {}
    compute = max({e[2] for e in gemm_like}, key=lambda s: sum(e[4] for e in gemm_like if e[2] == s))
    mine = [e for e in events if e[2] == compute]
    span = max(e[3] + e[4] for e in events)
    busy = sum(e[4] for e in mine)
    gemms = [e for e in gemm_like if e[2] == compute]
    gaps = [round(b[3] - (a[3] + a[4]), 4) for a, b in zip(gemms, gemms[1:])]
    copies = [e for e in events if e[0] == "gpu_memcpy"]
    return dict(span_ms=round(span, 4), compute_busy_ms=round(busy, 4), gemm_ms=round(sum(e[4] for e in gemms), 4),
                first_gemm_at_ms=gemms[0][3], after_last_gemm_ms=round(span - gemms[-1][3] - gemms[-1][4], 4),
                gaps_between_gemms_ms=gaps, each_gemm_ms=[e[4] for e in gemms], copies=len(copies), copy_ms=round(sum(e[4] for e in copies), 4),
                other_on_compute=[(e[1], e[3], e[4]) for e in mine if e not in gemms])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="16384,32768")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json")
    p.add_argument("--grid", help="pr x pc with pc > 1: SUMMA's peer transport (default: the 1-D engine)")
    p.add_argument("--transport", default="peer", choices=("peer", "nccl"))
    p.add_argument("--after", action="store_true", help="NCCL: each all-gather after the GEMM before it")
    p.add_argument("--beyond", action="store_true", help="dist-bench's product beyond the GPUs' memory")
    args = p.parse_args()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    out = dict(gpu=torch.cuda.get_device_name(), world=world, torch=torch.__version__,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), reps=args.reps, sizes={})
    grid = tuple(int(x) for x in args.grid.split("x")) if args.grid else (world, 1)
    out.update(grid=list(grid), transport=args.transport, after=args.after)
    sizes = list(map(int, args.sizes.split(",")))
    if args.beyond:
        from tilegemm.bench.distributed import _beyond_size

        sizes = [_beyond_size(world, 2, torch.device("cuda"))]
    for n in sizes:
        if grid[1] == 1:
            from tilegemm.bench.distributed import _blocks, _Operands

            ops, rb = _Operands(n, torch.bfloat16, torch.device("cuda")), _blocks(n, world)
            a, b = ops.rows(0, rb[rank], rb[rank + 1]), ops.rows(1, rb[rank], rb[rank + 1])
            lay = _core.layout_1d(a, b, transport=args.transport, ahead=not args.after)
            loop = lambda: _core.run_1d(a, b, lay)  # noqa: E731
            alone = lambda: _core.run_1d(a, b, lay, communicate=False)  # noqa: E731
            steps = len(lay.panels)
        else:
            pr, pc = grid
            a = torch.randn(n // pr, n // pc, device="cuda").to(torch.bfloat16)
            b = torch.randn(n // pr, n // pc, device="cuda").to(torch.bfloat16)
            lay = _core.layout(a, b, grid, transport="peer")
            loop = lambda: _core.run(a, b, lay)  # noqa: E731
            alone = lambda: _core.run(a, b, lay, communicate=False)  # noqa: E731
            steps = len(lay.bands) - 1
        for fn in (loop, loop, alone)[1 if args.beyond else 0:]:
            fn()
        mine = dict(loop_ms=timed(loop, args.reps), alone_ms=timed(alone, args.reps), panel=lay.width,
                    panels=steps, n=n)
        ev = timeline(loop)
        mine["summary"] = summary(ev)
        mine["events"] = ev
        if args.beyond:  # the products alone's timeline too: each GEMM's length beside the loop's
            ev = timeline(alone)
            mine["alone_summary"] = summary(ev)
            mine["alone_events"] = ev
        every = [None] * world
        dist.all_gather_object(every, mine)
        out["sizes"][n] = every
        if rank == 0:
            for r, m in enumerate(every):
                s = m["summary"]
                print(f"n {n} rank {r}: loop {m['loop_ms']:.3f} ms, products alone {m['alone_ms']:.3f}; traced span "
                      f"{s.get('span_ms')}, GEMMs {s.get('gemm_ms')}, first GEMM at {s.get('first_gemm_at_ms')}, "
                      f"after the last {s.get('after_last_gemm_ms')}, gaps {s.get('gaps_between_gemms_ms')}, "
                      f"each GEMM {s.get('each_gemm_ms')}; alone's GEMMs {m.get('alone_summary', {}).get('each_gemm_ms')}",
                      flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
