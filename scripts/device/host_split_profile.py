"""What the host split's host time is made of: one call under cProfile.

    python3 scripts/device/host_split_profile.py --json $OUT/host-split-profile.json

tilegemm.matmul(a, b, devices="all") (BF16 N^3, default 16384, A and B on cuda:0): the call's
host time (until it returns: every GPU's work queued), medians of --calls after a warm call;
then the same calls under cProfile (which sees every thread), its top functions by own and by
cumulative time; and a few primitives' host cost alone. (Session 33 ran it with the GPUs' work
queued from one worker thread each: 7-8 ms of a call's 9 ms went to their turns at the GIL.)
"""

import argparse
import cProfile
import io
import json
import pstats
import statistics
import time

import torch

import tilegemm


def per_call_us(fn, reps=200):
    got = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        got.append(time.perf_counter_ns() - t0)
    return round(statistics.median(got) / 1e3, 2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=16384)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args()
    n = args.size
    a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    call = lambda: tilegemm.matmul(a, b, devices="all")  # noqa: E731
    call()
    host = []
    for _ in range(args.calls):
        for g in range(torch.cuda.device_count()):
            torch.cuda.synchronize(g)
        t0 = time.perf_counter()
        call()
        host.append((time.perf_counter() - t0) * 1e3)
    prof = cProfile.Profile()
    profiled = []
    for _ in range(args.calls):
        for g in range(torch.cuda.device_count()):
            torch.cuda.synchronize(g)
        t0 = time.perf_counter()
        prof.enable()
        call()
        prof.disable()
        profiled.append((time.perf_counter() - t0) * 1e3)
    out = {}
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(30)
        out[key] = buf.getvalue()
        print(buf.getvalue()[:6000], flush=True)
    x = torch.empty(1024, 1024, device="cuda:1").to(torch.bfloat16)
    y = torch.empty(1024, 1024, device="cuda:1").to(torch.bfloat16)
    with torch.cuda.device(1):
        prims = dict(mem_get_info=per_call_us(lambda: torch.cuda.mem_get_info(1)),
                     memory_reserved=per_call_us(lambda: torch.cuda.memory_reserved(1), 50),
                     event_record=per_call_us(lambda: torch.cuda.Event().record()),
                     matmul_1024=per_call_us(lambda: tilegemm.matmul(x, y)),
                     matmul_1024_kernel=per_call_us(lambda: tilegemm.matmul(x, y, kernel="auto")),
                     torch_mm_1024=per_call_us(lambda: torch.mm(x, y)))
    print(prims, flush=True)
    print("host ms", host, "profiled", profiled, flush=True)
    res = dict(gpu=torch.cuda.get_device_name(0), n=n, torch=torch.__version__,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               host_ms=host, profiled_host_ms=profiled, primitives_us=prims, profile=out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
