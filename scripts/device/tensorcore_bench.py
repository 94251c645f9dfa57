"""Tensor-core GEMM on the device: validate, tune, and time our Triton kernels against cuBLAS.

    PYTHONPATH=src python3 scripts/device/tensorcore_bench.py --out $OUT/tensorcore.json

For bf16, fp16, tf32 and fp8-e4m3 over square and LLM shapes: check each result first (sampled
rows × columns against a float64 product of the same inputs), then time our kernel (tuned, with
the tuning cache written beside the JSON) and the library in the same run on the same inputs:
torch.matmul (cuBLAS; TF32 with allow_tf32) or torch._scaled_mm for FP8 with per-tensor scales.
Times are medians of triton.testing.do_bench, which flushes L2 between runs. One failure is
recorded and the run goes on. Prints a table last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback

SQUARES = [1024, 2048, 4096, 8192, 16384]
LLM = [(4096, 14336, 4096), (8192, 8192, 1024), (16, 4096, 4096), (128, 4096, 4096), (1, 4096, 4096),
       (64, 8192, 8192)]


def shapes_for(dtype: str, quick: bool):
    sq = [(s, s, s) for s in SQUARES if dtype in ("bf16", "fp8") or s <= 8192]
    out = sq + LLM
    return out[:3] if quick else out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tensorcore.json")
    ap.add_argument("--dtypes", default="bf16,fp16,fp8,tf32")
    ap.add_argument("--budget-s", type=float, default=270.0, help="stop starting new shapes after this")
    ap.add_argument("--tune-s", type=float, default=8.0, help="tuning cap per shape (seconds)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    os.environ.setdefault("TILEGEMM_CACHE_DIR", os.path.join(out_dir, "tilegemm-cache"))
    os.environ.setdefault("TILEGEMM_TUNE_BUDGET_S", str(args.tune_s))

    import torch
    import triton

    from tilegemm import validate
    from tilegemm.kernels.tensorcore import _common as C
    from tilegemm.kernels.tensorcore import t03_tma_persistent as t03

    t_start = time.perf_counter()
    dev = torch.device("cuda")
    result = dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  versions=dict(torch=torch.__version__, triton=triton.__version__, python=sys.version.split()[0],
                                cuda=torch.version.cuda),
                  cache=C.cache_path(), records=[], fallbacks={})
    torch.manual_seed(0)

    def save():
        result["fallbacks"] = dict(t03.fallbacks)
        result["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    for dtype in args.dtypes.split(","):
        for (m, n, k) in shapes_for(dtype, args.quick):
            if time.perf_counter() - t_start > args.budget_s:
                result["records"].append(dict(dtype=dtype, m=m, n=n, k=k, ok=False, error="skipped: time budget"))
                continue
            rec = dict(dtype=dtype, kernel=t03.NAME, m=m, n=n, k=k)
            try:
                rec.update(one(dtype, m, n, k, dev, torch, triton, C, t03, validate))
            except Exception as e:  # noqa: BLE001  (record, go on)
                rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:500], trace=traceback.format_exc()[-1500:])
            finally:
                torch.cuda.empty_cache()
            result["records"].append(rec)
            print(f"{dtype:5s} {m:>6d}×{n:<6d}×{k:<6d} ok={rec.get('ok')} "
                  f"{rec.get('tflops', float('nan')):7.1f} vs {rec.get('ref_tflops', float('nan')):7.1f} TFLOP/s "
                  f"ratio {rec.get('ratio', float('nan')):.3f} tune {rec.get('tune_s', 0):.1f}s "
                  f"{rec.get('config', '')} {rec.get('error', '')[:160]}", flush=True)
            save()
    save()
    table(result, C)
    return 0


def operands(dtype, m, n, k, dev, torch):
    """Fresh inputs in [-1, 1) (never zeros). FP8: B column-major, as torch._scaled_mm wants."""
    a32 = torch.rand(m, k, device=dev) * 2 - 1
    b32 = torch.rand(k, n, device=dev) * 2 - 1
    if dtype == "bf16":
        return a32.bfloat16(), b32.bfloat16(), None, None
    if dtype == "fp16":
        return a32.half(), b32.half(), None, None
    if dtype == "tf32":
        return a32, b32, None, None
    fmax = torch.finfo(torch.float8_e4m3fn).max
    sa = (a32.abs().amax() / fmax).reshape(1).float()
    sb = (b32.abs().amax() / fmax).reshape(1).float()
    a8 = (a32 / sa).to(torch.float8_e4m3fn)
    b8 = (b32 / sb).to(torch.float8_e4m3fn).t().contiguous().t()  # K×N, column-major
    return a8, b8, sa, sb


def one(dtype, m, n, k, dev, torch, triton, C, t03, validate):
    a, b, sa, sb = operands(dtype, m, n, k, dev, torch)
    precision = {"bf16": "bf16", "fp16": "fp16", "tf32": "tf32", "fp8": "fp8"}[dtype]
    out_dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp8": torch.bfloat16}[dtype]
    c = torch.full((m, n), float("nan"), dtype=out_dt, device=dev)  # poisoned
    p = C.Problem(a, b, c, precision, scale_a=sa, scale_b=sb)
    C.last_tuning.clear()
    t0 = time.perf_counter()
    used = t03.gemm(p)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    tune_s = C.last_tuning.get("seconds", 0.0)
    # validate a sample of rows × columns against float64
    g = torch.Generator(device="cpu").manual_seed(m * 7 + n * 3 + k)
    rows = torch.randperm(m, generator=g)[:min(m, 48)].to(dev)
    cols = torch.randperm(n, generator=g)[:min(n, 256)].to(dev)
    def take(x, dim, idx):  # index_select through a uint8 view for FP8 (same bytes)
        if x.element_size() == 1:
            return x.view(torch.uint8).index_select(dim, idx).view(x.dtype)
        return x.index_select(dim, idx)

    a_s = take(a, 0, rows).double() * (sa.double() if sa is not None else 1)
    b_s = take(b, 1, cols).double() * (sb.double() if sb is not None else 1)
    c_s = c[rows][:, cols].double()
    tol_name = {"bf16": "bfloat16", "fp16": "float16", "tf32": "tf32", "fp8": "float8_e4m3fn"}[dtype]
    chk = validate.check(c_s.cpu().numpy(), a_s.cpu().numpy(), b_s.cpu().numpy(), dtype=tol_name, kernel=t03.NAME,
                         out_dtype="bfloat16" if dtype == "fp8" else None)
    rec = dict(ok=bool(chk.ok), rel_err=chk.rel_err, config={kk: v for kk, v in used.items()},
               tune_s=round(tune_s, 2), first_call_s=round(first_s, 2))
    if not chk.ok:
        rec["check"] = str(chk)[:800]
    flops = 2.0 * m * n * k
    rep = 100

    def ours():
        t03.gemm(p, config=cfg_fixed)

    cfg_fixed = {kk: v for kk, v in used.items() if kk not in ("kernel", "fallback")}
    if used.get("kernel") != t03.NAME:
        def ours():  # noqa: F811  (t03 fell back: time what actually ran)
            t03.gemm(p)
    ms = triton.testing.do_bench(ours, warmup=20, rep=rep, return_mode="median")
    if dtype == "fp8":
        def ref():
            torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    else:
        def ref():
            torch.matmul(a, b)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        ref()
        ref_ms = triton.testing.do_bench(ref, warmup=20, rep=rep, return_mode="median")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    rec.update(ms=ms, tflops=flops / ms / 1e9, ref_ms=ref_ms, ref_tflops=flops / ref_ms / 1e9, ratio=ref_ms / ms,
               ran=used.get("kernel"))
    return rec


def table(result, C):
    print()
    print(f"{'dtype':6s} {'M×N×K':>22s} {'ok':>3s} {'ours':>8s} {'ref':>8s} {'ratio':>6s}  config")
    by = {}
    for r in result["records"]:
        shape = f"{r['m']}×{r['n']}×{r['k']}"
        if "ratio" not in r:
            print(f"{r['dtype']:6s} {shape:>22s} {'--':>3s}  {r.get('error', '')[:90]}")
            continue
        cfg = r.get("config", {})
        cs = f"{cfg.get('BM')}x{cfg.get('BN')}x{cfg.get('BK')} w{cfg.get('num_warps')} s{cfg.get('num_stages')}" \
             f"{' WS' if cfg.get('WS') else ''}{' KM' if cfg.get('KMAJOR') else ''} {cfg.get('kernel', '')}"
        print(f"{r['dtype']:6s} {shape:>22s} {'y' if r['ok'] else 'N':>3s} {r['tflops']:8.1f} {r['ref_tflops']:8.1f} "
              f"{r['ratio']:6.3f}  {cs}")
        by.setdefault(r["dtype"], []).append(r)
    print()
    for dt, rs in by.items():
        big = [r["ratio"] for r in rs if r["m"] * r["n"] * r["k"] >= 8192**3]
        print(f"{dt:6s} geo-mean ratio {C.geomean([r['ratio'] for r in rs]):.3f}  (≥8192³: {C.geomean(big):.3f})"
              f"  min {min(r['ratio'] for r in rs):.3f}  all ok: {all(r['ok'] for r in rs)}")
    if result.get("fallbacks"):
        print("fallbacks:", json.dumps(result["fallbacks"])[:1500])
    print(f"elapsed {result.get('elapsed_s')} s; JSON and tuning cache under {os.path.dirname(result['cache'])}")


if __name__ == "__main__":
    sys.exit(main())
