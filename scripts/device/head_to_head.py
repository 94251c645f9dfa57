"""t03 and t05 head to head with the library, all interleaved in one series, repeated.

    . scripts/device/env.sh && python3 scripts/device/head_to_head.py --out $OUT/h2h.json \
        --case bf16:8192x8192x8192 --reps 6

For each case, four forced configurations on 128×256 tiles (t03, t03 with the flattened loop, t05
with one and with two consumer partitions) and the library (cuBLAS, or torch._scaled_mm for FP8)
are timed as the bench times (tensorcore_bench: ABBA, L2 flushed, device time after a hold), all
five in the same interleaved series, `--reps` times over. The spread of each ratio over the
repetitions is the measurement's own noise at that shape. --tuner also re-times the four the way
the tuner's t03/t05 verdict does (`_common.settle`), twice, to compare that verdict's spread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "h2h.json"))
    ap.add_argument("--case", action="append", required=True, help="precision:MxNxK")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--budget-s", type=float, default=4.0, help="timing budget per repetition")
    ap.add_argument("--tuner", action="store_true", help="also time the four as the tuner's verdict does")
    ap.add_argument("--hold-us", type=int, default=None,
                    help="the hold before each sample, for both series (default: the bench's and the tuner's own)")
    args = ap.parse_args(argv)

    import torch
    import triton

    from tensorcore_bench import HOLD_US, library_call, operands, out_dtype
    from tilegemm.bench.timing import DeviceClock, L2Flush, interleave
    from tilegemm.kernels.tensorcore import _common as C
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05

    hold_us = HOLD_US if args.hold_us is None else args.hold_us
    if args.hold_us is not None:
        C.HOLD_CYCLES = int(args.hold_us * 1980)  # µs at the H200's 1980 MHz top clock: longer when capped
    flush = L2Flush(framework="torch")
    result = dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  versions=dict(torch=torch.__version__, triton=triton.__version__),
                  timing=f"all runs of a case interleaved in one series (ABBA, L2 flushed, {hold_us} µs hold, "
                         "device time), repeated", tuner_hold_cycles=C.HOLD_CYCLES, rows=[])
    torch.manual_seed(0)
    for case in args.case:
        dtype, shape = case.split(":")
        m, n, k = (int(x) for x in shape.split("x"))
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        a, b, sa, sb = operands(dtype, m, n, k, torch.device("cuda"), torch)
        c = torch.empty((m, n), dtype=out_dtype(dtype, torch), device="cuda")
        p = C.Problem(a, b, c, dtype, scale_a=sa, scale_b=sb)
        bk = {1: 128, 2: 64, 4: 32}[a.element_size()]
        t03_cfg = dict(C.cfg(128, 256, bk, 8, 3), C_TMA=True)
        forced = {"t03": (t03, t03_cfg), "t03 FLAT": (t03, dict(t03_cfg, FLAT=True)),
                  "t05 1 consumer": (t05, t05.cfg(128, 256, bk, 3)),
                  "t05 2 consumers": (t05, t05.cfg(128, 256, bk, 3, consumers=2))}
        runs = {name: (lambda mod=mod, cfg=cfg: mod.gemm(p, cfg)) for name, (mod, cfg) in forced.items()}
        runs["library"] = library_call(dtype, a, b, sa, sb, torch)
        row = dict(dtype=dtype, m=m, n=n, k=k, configs={nm: cfg for nm, (_, cfg) in forced.items()}, reps=[])
        for _ in range(args.reps):
            t = interleave(runs, clock=DeviceClock("torch", hold_us=hold_us), flush=flush, warmup_s=0.05,
                           budget_s=args.budget_s, min_reps=10, max_reps=60, target_rse=0.001)
            row["reps"].append({nm: x.median_ms for nm, x in t.items()})
        row["ratio"] = {}
        for nm in forced:
            ratios = [r["library"] / r[nm] for r in row["reps"]]
            row["ratio"][nm] = dict(median=statistics.median(ratios), min=min(ratios), max=max(ratios))
            print(f"{case} {nm}: ×{row['ratio'][nm]['median']:.3f} of the library "
                  f"(range {min(ratios):.3f}–{max(ratios):.3f} over {len(ratios)} repetitions)", flush=True)
        if args.tuner:
            trial = C.trial_problem(p)
            names = list(forced)
            row["tuner"] = []
            for _ in range(2):
                ms = C.settle([lambda mod=forced[nm][0], cfg=forced[nm][1]: mod.run(trial, cfg) for nm in names],
                              budget_ms=30.0, graph=False)
                row["tuner"].append(dict(zip(names, ms)))
                print(f"{case} tuner's settle (ms): " + ", ".join(f"{nm} {x:.4f}" for nm, x in zip(names, ms)),
                      flush=True)
        result["rows"].append(row)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        del a, b, c, p, runs
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
