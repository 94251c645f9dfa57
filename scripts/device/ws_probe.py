"""Time t05 (warp-specialised, Gluon) configurations beside t03's committed configuration and cuBLAS.

    . scripts/device/env.sh && python3 scripts/device/ws_probe.py --out $OUT/ws_probe.json \
        --case bf16:8192x8192x8192 --cfg BM=128,BN=256,BK=64,STAGES=4,SPLIT=2

Every configuration's result is compared with cuBLAS's (relative Frobenius error) before it is
timed; eager times are triton.testing.do_bench medians with the L2 flushed before each call.
cuBLAS is timed before and after the configurations of a case, so drift within a case shows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DEFAULT_CFGS = ["BM=128,BN=256,BK=64,STAGES=3,SPLIT=1", "BM=128,BN=256,BK=64,STAGES=4,SPLIT=2",
                "BM=128,BN=256,BK=64,STAGES=4,SPLIT=4", "BM=128,BN=128,BK=64,STAGES=6,SPLIT=1"]


def parse(s: str) -> dict:
    return {k: int(v) for k, v in (kv.split("=") for kv in s.split(","))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "ws_probe.json"))
    ap.add_argument("--case", action="append", required=True, help="precision:MxNxK")
    ap.add_argument("--cfg", action="append", default=[], help="K=V,... for t05")
    ap.add_argument("--from", dest="src", default="results/h200/tensorcore.json")
    args = ap.parse_args(argv)

    import torch
    import triton

    from tensorcore_bench import operands, out_dtype
    from tilegemm.kernels.tensorcore import _common as C
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03
    from tilegemm.kernels.tensorcore import t05_warp_specialized as t05

    used = {}
    with open(args.src) as f:
        for r in json.load(f)["records"]:
            used[(r["dtype"], r["m"], r["n"], r["k"])] = r.get("config", {})
    dev = torch.device("cuda")
    result = dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  versions=dict(torch=torch.__version__, triton=triton.__version__), rows=[])
    bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")  # noqa: E731
    torch.manual_seed(0)
    for case in args.case:
        dtype, shape = case.split(":")
        m, n, k = (int(x) for x in shape.split("x"))
        a, b, sa, sb = operands(dtype, m, n, k, dev, torch)
        c = torch.empty((m, n), dtype=out_dtype(dtype, torch), device=dev)
        ref = (a @ b).float()
        flops = 2.0 * m * n * k
        row = dict(dtype=dtype, m=m, n=n, k=k, cublas_ms=[bench(lambda: torch.matmul(a, b))], runs=[])
        base = {kk: v for kk, v in used.get((dtype, m, n, k), {}).items() if kk not in ("kernel", "fallback", "WS")}
        todo = [("t03", base)] if base and not base.get("SPLIT") else []
        todo += [("t05", parse(s)) for s in (args.cfg or DEFAULT_CFGS)]
        for kernel, cfg in todo:
            rec = dict(kernel=kernel, config=cfg)
            try:
                if kernel == "t03":
                    p = C.Problem(a, b, c, dtype)
                    fn = lambda: t03.gemm(p, cfg)  # noqa: E731
                else:
                    p = C.Problem(a, b, c, dtype)
                    cfg = dict(t05.cfg(128, 256, 64, 3), **cfg)
                    rec["config"] = cfg
                    fn = lambda: t05.gemm(p, cfg)  # noqa: E731
                c.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                rec["rel_err"] = float((c.float() - ref).norm() / ref.norm())
                if rec["rel_err"] < 1e-2:
                    rec["ms"] = bench(fn)
            except Exception as e:  # noqa: BLE001  (a failing configuration is a finding)
                rec["error"] = f"{type(e).__name__}: {e}"[:400]
                torch.cuda.synchronize()
            row["runs"].append(rec)
            ms = rec.get("ms", float("nan"))
            print(f"{dtype} {shape} {kernel} {json.dumps(cfg)}: {ms * 1e3:.1f} µs {flops / ms / 1e9:.0f} TF/s "
                  f"{row['cublas_ms'][0] / ms:.3f}× cuBLAS err {rec.get('rel_err', float('nan')):.1e} "
                  f"{rec.get('error', '')}", flush=True)
        row["cublas_ms"].append(bench(lambda: torch.matmul(a, b)))
        print(f"{dtype} {shape} cuBLAS {row['cublas_ms'][0] * 1e3:.1f} then {row['cublas_ms'][1] * 1e3:.1f} µs "
              f"({flops / min(row['cublas_ms']) / 1e9:.0f} TF/s best)", flush=True)
        result["rows"].append(row)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        del a, b, c, ref
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
