"""Time chosen t03 configurations of one product side by side, with cuBLAS in the same run.

    . scripts/device/env.sh && python3 scripts/device/config_probe.py --out $OUT/probe.json \
        --case tf32:2048x2048x2048 --vary FLAT=1 --vary GROUP_M=4

For each case (precision:MxNxK): the base configuration is the one the committed bench run
(--from, default results/h200/tensorcore.json) used for that shape, or t03's first candidate;
each --vary K=V[,K=V] adds one variant of it (`--all` adds every t03 candidate instead). Every
configuration is checked against float64 on a sample (tuner's probe) and then timed:
  eager: triton.testing.do_bench median, L2 flushed before every call;
  warm:  the same without the flush (what L2-resident operands give);
  graph: launches captured in a CUDA graph (products under 0.5 ms only);
  host:  µs per call of the launch path (t03.gemm on its cached plan), calls back to back.
cuBLAS (torch.matmul, TF32 allowed for tf32; torch._scaled_mm for fp8) is timed the same way.
This is a tool for one question at a time (change one thing, measure), not the bench.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_vary(s: str) -> dict:
    out = {}
    for kv in s.split(","):
        k, v = kv.split("=")
        out[k] = {"1": True, "0": False, "true": True, "false": False}.get(v.lower(), None)
        if out[k] is None:
            out[k] = int(v)
    return out


def timings(fn, torch, triton, graph_ms, per_call_us, graph: bool) -> dict:
    eager = triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median")
    out = dict(eager_ms=eager, warm_ms=_no_flush(fn, torch), host_us=per_call_us(fn, n=200))
    if graph and eager < 0.5:
        out["graph_ms"], _ = graph_ms(fn, torch, eager)
    return out


def _no_flush(fn, torch, reps=100) -> float:
    """Median of device-event times of back-to-back calls without an L2 flush."""
    for _ in range(5):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in ev)
    return t[len(t) // 2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "probe.json"))
    ap.add_argument("--case", action="append", required=True, help="precision:MxNxK, e.g. fp8:4096x4096x4096")
    ap.add_argument("--vary", action="append", default=[], help="K=V[,K=V]: one variant of the base config")
    ap.add_argument("--drop", default="WS", help="keys removed from the base config (comma-separated)")
    ap.add_argument("--all", action="store_true", help="every t03 candidate instead of the variants")
    ap.add_argument("--from", dest="src", default="results/h200/tensorcore.json")
    ap.add_argument("--no-graph", action="store_true")
    args = ap.parse_args(argv)

    import torch
    import triton

    from host_probe import per_call_us
    from tensorcore_bench import graph_ms, library_call, operands, out_dtype
    from tilegemm.kernels.tensorcore import _common as C
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03

    used = {}
    try:
        with open(args.src) as f:
            for r in json.load(f)["records"]:
                used[(r["dtype"], r["m"], r["n"], r["k"])] = r.get("config", {})
    except (OSError, ValueError, KeyError):
        pass
    dev = torch.device("cuda")
    result = dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  versions=dict(torch=torch.__version__, triton=triton.__version__), rows=[])
    torch.manual_seed(0)
    for case in args.case:
        dtype, shape = case.split(":")
        m, n, k = (int(x) for x in shape.split("x"))
        a, b, sa, sb = operands(dtype, m, n, k, dev, torch)
        c = torch.empty((m, n), dtype=out_dtype(dtype, torch), device=dev)
        p = C.Problem(a, b, c, dtype, scale_a=sa, scale_b=sb)
        base = {kk: v for kk, v in used.get((dtype, m, n, k), {}).items()
                if kk not in ("kernel", "fallback") and kk not in args.drop.split(",")}
        if base.get("SPLIT") or not base:
            base = {kk: v for kk, v in t03.candidates(p)[0].items() if kk not in args.drop.split(",")}
        configs = t03.candidates(p) if args.all else [base] + [dict(base, **parse_vary(v)) for v in args.vary]
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        ref = library_call(dtype, a, b, sa, sb, torch)
        ref()
        row = dict(dtype=dtype, m=m, n=n, k=k, flops=2.0 * m * n * k,
                   cublas=timings(ref, torch, triton, graph_ms, per_call_us, not args.no_graph), configs=[])
        torch.backends.cuda.matmul.allow_tf32 = prev
        probe = C._Probe(p)
        for cfg in configs:
            rec = dict(config=cfg)
            try:
                c.fill_(float("nan"))
                t03.gemm(p, cfg)
                torch.cuda.synchronize()
                rec["wrong"] = probe.wrong()
                if not rec["wrong"]:
                    rec.update(timings(lambda: t03.gemm(p, cfg), torch, triton, graph_ms, per_call_us,
                                       not args.no_graph))
                    rec["ratio_eager"] = row["cublas"]["eager_ms"] / rec["eager_ms"]
            except Exception as e:  # noqa: BLE001  (one failing configuration is a finding)
                rec["error"] = f"{type(e).__name__}: {e}"[:300]
                torch.cuda.synchronize()
            row["configs"].append(rec)
            tf = row["flops"] / rec.get("eager_ms", float("nan")) / 1e9
            print(f"{dtype} {m}x{n}x{k} {json.dumps(cfg)}: eager {rec.get('eager_ms', float('nan')) * 1e3:.1f} µs "
                  f"({tf:.0f} TF/s, {rec.get('ratio_eager', float('nan')):.3f}× cuBLAS "
                  f"{row['cublas']['eager_ms'] * 1e3:.1f} µs) warm {rec.get('warm_ms', float('nan')) * 1e3:.1f} "
                  f"graph {rec.get('graph_ms', float('nan')) * 1e3:.1f} (cuBLAS {row['cublas'].get('graph_ms', float('nan')) * 1e3:.1f}) "
                  f"host {rec.get('host_us', float('nan')):.0f} µs {rec.get('wrong', '')}{rec.get('error', '')}", flush=True)
        result["rows"].append(row)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        del a, b, c
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
