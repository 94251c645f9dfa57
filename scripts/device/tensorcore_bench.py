"""Tensor-core GEMM on the device: validate, tune, and time our Triton kernels against cuBLAS.

    PYTHONPATH=src python3 scripts/device/tensorcore_bench.py --out $OUT/tensorcore.json

For bf16, fp16, tf32 and fp8-e4m3 over square and LLM shapes: check each result first (sampled
rows × columns against a float64 product of the same inputs), then time our kernel (tuned, with
the tuning cache written beside the JSON) and the library in the same run on the same inputs:
torch.matmul (cuBLAS; TF32 with allow_tf32) or torch._scaled_mm for FP8 with per-tensor scales and
fast accumulation, as our FP8 accumulates by default (the JSON's "fp8_reference"; runs before
2026-12-06 timed its default mode, FP32 promotion: docs/perf-notes.md, 145).
Two timings per side, both for ours and the library, the same way, and always interleaved
(tilegemm.bench.timing.interleave: batches of ours and the library's alternate, ABBA, so that the
GPU's drift under its power cap falls on both alike; docs/perf-notes.md, 22):
  eager: median of single calls between CUDA events, L2 flushed before every call, a hold kernel
         between the flush and the call so that the events bracket device time only (Python's
         launch overhead is measured apart: `tilegemm library`, host µs per call);
  graph: N back-to-back launches captured in one torch.cuda.CUDAGraph, replays timed with CUDA
         events, per-launch median: device time without host overhead (no L2 flush is possible
         inside a graph, so inputs that fit the 60 MB L2 stay warm: "graph, L2 warm").
The primary ratio ("ratio", mode in "ratio_mode") is the graph one where either side's eager time
is more than 1.3× its graph time, and the eager one elsewhere; both are kept. Both being device
time, that difference is the L2: small products whose operands stay in the 60 MB L2 between calls
(as in a model's loop) are compared warm, large ones from DRAM. Ours runs through
`tilegemm.dispatch.run_problem` (the rung and configuration `tilegemm.tuning` gives the shape: the
shipped database, or with --tune a tuning now, cached beside the JSON).
The result is checked twice against float64 (first call, and a later fast-path call into a
poisoned C). One failure is recorded and the run goes on. Prints a table last.

    --cache-from PATH   warm-start the tuning cache from an earlier run's tuning cache (JSON)
    --tune              tune each shape now (TILEGEMM_AUTOTUNE=1) instead of taking the shipped database
    --merge A B C       no timing (CPU is fine): the runs' per-shape medians into --out, each shape's
                        record the run's whose ratio is the median, every run's ratio beside it

A committed figure is the median of three runs: run it three times, then --merge.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback

SMALL_FLOPS = 2**35  # --small: products below this (once the ones tuned on CUDA graphs)
SQUARES = [1024, 2048, 4096, 8192, 16384]
HOLD_US = 200  # the hold before each timed call: longer than a Python launch of ours (≈ 20–60 µs)
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
    ap.add_argument("--tune-s", type=float, default=5.0, help="tuning cap per shape and rung (seconds)")
    ap.add_argument("--cache-from", default="", help="tuning cache JSON to start from (copied, never written)")
    ap.add_argument("--tune", action="store_true", help="tune each shape now instead of taking the shipped database")
    ap.add_argument("--no-graph", action="store_true", help="eager timings only")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", default="", help="only these, e.g. 16x4096x4096,1024x1024x1024")
    ap.add_argument("--small", action="store_true", help="only products under 2^35 FLOPs")
    ap.add_argument("--merge", nargs="+", metavar="RUN", help="no timing: these runs' per-shape medians into --out")
    args = ap.parse_args(argv)
    if args.merge:
        try:  # (a part that cannot be read, or runs that are not one measurement: merge's ValueError)
            merged = merge([json.load(open(path)) for path in args.merge])
        except (OSError, ValueError) as e:
            print(f"tensorcore_bench --merge: {e}", file=sys.stderr)
            return 2
        with open(args.out, "w") as f:
            json.dump(merged, f, indent=1)
        table(merged)
        return 0
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    os.environ.setdefault("TILEGEMM_CACHE_DIR", os.path.join(out_dir, "tilegemm-cache"))
    os.environ.setdefault("TILEGEMM_TUNE_BUDGET_S", str(args.tune_s))
    if args.tune:
        os.environ["TILEGEMM_AUTOTUNE"] = "1"
    warm = {}
    if args.cache_from:
        try:
            with open(args.cache_from) as f:
                warm = json.load(f)
            target = os.path.join(os.environ["TILEGEMM_CACHE_DIR"], "tuning.json")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            mine = {}
            if os.path.exists(target):
                with open(target) as f:
                    mine = json.load(f)
            with open(target, "w") as f:
                json.dump({**warm, **mine}, f, indent=1, sort_keys=True)
        except (OSError, ValueError) as e:
            print(f"--cache-from {args.cache_from}: not used ({e})", flush=True)
            warm = {}

    import torch
    import triton

    from tilegemm import dispatch, validate
    from tilegemm.bench import clocks
    from tilegemm.bench.library import FP8_REFERENCE
    from tilegemm.bench.timing import L2Flush
    from tilegemm.kernels.tensorcore import _problem as C
    from tilegemm.tuning import cache

    t_start = time.perf_counter()
    dev = torch.device("cuda")
    result = dict(gpu=torch.cuda.get_device_name(0), date=time.strftime("%Y-%m-%dT%H:%M:%S"),
                  versions=dict(torch=torch.__version__, triton=triton.__version__, python=sys.version.split()[0],
                                cuda=torch.version.cuda),
                  cache=cache.cache_path(), warm_start=args.cache_from or None, warm_keys=len(warm),
                  records=[], fallbacks={}, clocks={"idle_before": clocks.read()}, fp8_reference=FP8_REFERENCE)
    torch.manual_seed(0)
    flush = L2Flush(framework="torch")  # on torch's stream, ordered with the hold kernel and the calls
    result["timing"] = dict(order="ours and the library interleaved, ABBA batches of 5", flush=flush.mode,
                            clock=f"CUDA events on torch's stream, one call per sample, after a {HOLD_US} µs hold "
                                  "kernel (device time only)")

    def save():
        result["fallbacks"] = dict(dispatch.fallbacks)
        result["direct_launch"] = json.loads(json.dumps(dispatch.STATS))
        result["elapsed_s"] = round(time.perf_counter() - t_start, 1)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)

    for dtype in args.dtypes.split(","):
        for (m, n, k) in shapes_for(dtype, args.quick):
            if args.small and 2 * m * n * k >= SMALL_FLOPS:
                continue
            if args.shapes and f"{m}x{n}x{k}" not in args.shapes.split(","):
                continue
            if time.perf_counter() - t_start > args.budget_s:
                result["records"].append(dict(dtype=dtype, m=m, n=n, k=k, ok=False, error="skipped: time budget"))
                continue
            rec = dict(dtype=dtype, kernel="auto", m=m, n=n, k=k)  # auto_gemm's choice: "ran" names the rung
            try:
                rec.update(one(dtype, m, n, k, dev, torch, C, validate, flush, graphs=not args.no_graph))
            except Exception as e:  # noqa: BLE001  (record, go on)
                rec.update(ok=False, error=f"{type(e).__name__}: {e}"[:500], trace=traceback.format_exc()[-1500:])
            finally:
                rec["clock"] = clocks.read()  # right after this shape's timings: clocks under load
                torch.cuda.empty_cache()
            result["records"].append(rec)
            print(f"{dtype:5s} {m:>6d}×{n:<6d}×{k:<6d} ok={rec.get('ok')} "
                  f"{rec.get('tflops', float('nan')):7.1f} vs {rec.get('ref_tflops', float('nan')):7.1f} TFLOP/s "
                  f"ratio {rec.get('ratio', float('nan')):.3f} ({rec.get('ratio_mode', '-')}; eager "
                  f"{rec.get('ratio_eager', float('nan')):.3f}) tune {rec.get('tune_s', 0):.1f}s "
                  f"{rec.get('config', '')} {rec.get('error', '')[:160]}", flush=True)
            save()
    loaded = [r["clock"] for r in result["records"] if r.get("clock")]
    if loaded:  # the first and last readings under load (the one before the run is at idle clocks)
        result["clocks"].update(first=loaded[0], last=loaded[-1], warning=clocks.warning(loaded[0], loaded[-1]))
    save()
    table(result)
    if result["clocks"].get("warning"):
        print("clocks:", result["clocks"]["warning"])
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


def out_dtype(dtype, torch):
    """C's dtype in the bench: the input's for FP16/BF16, FP32 for TF32, BF16 for FP8."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp8": torch.bfloat16}[dtype]


def library_call(dtype, a, b, sa, sb, torch):
    """The yardstick's call: torch._scaled_mm for FP8 (per-tensor scales, BF16 out, fast
    accumulation: bench.library.FP8_REFERENCE), else torch.matmul (cuBLAS; the caller sets allow_tf32 for TF32)."""
    if dtype == "fp8":
        return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True)
    return lambda: torch.matmul(a, b)


def captured(fn, torch, eager_ms):
    """(replay, n): N launches of fn captured in one CUDA graph, and a function that replays it.
    fn must already be warm (compiled, tuned): nothing may allocate host-side state or synchronise
    inside the capture."""
    n = max(1, min(50, int(2.0 / max(eager_ms, 1e-3))))  # about 2 ms of launches per replay
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up on a side stream, as torch's graph docs ask
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    return g.replay, n


def timed(runs, flush, budget_s):
    """Interleaved medians and quartiles (ms) of runs {name: fn}, one call per sample. A 200 µs
    hold kernel before each sample lets the host enqueue the call while the GPU is busy, so the
    events bracket device time only, for any call whose Python launch takes under 200 µs
    (ours: 20–60 µs; docs/perf-notes.md, 17 and 23)."""
    from tilegemm.bench.timing import DeviceClock, interleave

    t = interleave(runs, clock=DeviceClock("torch", hold_us=HOLD_US), flush=flush, warmup_s=0.02,
                   budget_s=budget_s, min_reps=10, max_reps=100, target_rse=0.002)
    return {name: (x.median_ms, x.q1_ms, x.q3_ms, x.reps) for name, x in t.items()}


def one(dtype, m, n, k, dev, torch, C, validate, flush, graphs=True):
    from tilegemm import dispatch
    from tilegemm.tuning import tuner

    a, b, sa, sb = operands(dtype, m, n, k, dev, torch)
    precision = dtype  # the bench's dtype names are the package's precision names
    c = torch.full((m, n), float("nan"), dtype=out_dtype(dtype, torch), device=dev)  # poisoned
    p = C.Problem(a, b, c, precision, scale_a=sa, scale_b=sb)
    tuner.last_tuning.clear()
    tuner.tuning_log.clear()
    key = ("bench", dtype, m, n, k)  # the launch plan of this product, as a repeated call keeps it
    t0 = time.perf_counter()
    used = dispatch.run_problem(p, key=key)  # the shipped database's configuration (or a tuning, --tune)
    torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    tune_s = tuner.last_tuning.get("seconds", 0.0)
    # validate a sample of rows × columns against float64, on the first call and on a later one
    g = torch.Generator(device="cpu").manual_seed(m * 7 + n * 3 + k)
    rows = torch.randperm(m, generator=g)[:min(m, 48)].to(dev)
    cols = torch.randperm(n, generator=g)[:min(n, 256)].to(dev)
    a_s = C.take(a, 0, rows).double() * (sa.double() if sa is not None else 1)
    b_s = C.take(b, 1, cols).double() * (sb.double() if sb is not None else 1)
    tol_name = {"bf16": "bfloat16", "fp16": "float16", "tf32": "tf32", "fp8": "float8_e4m3fn"}[dtype]

    def check():
        c_s = c[rows][:, cols].double()
        return validate.check(c_s.cpu().numpy(), a_s.cpu().numpy(), b_s.cpu().numpy(), dtype=tol_name,
                              kernel=used.get("kernel", "?"), out_dtype="bfloat16" if dtype == "fp8" else None)

    chk = check()
    plan = dispatch._PLANS.get(key)

    def ours():  # the launch plan (direct launch), as a repeated call runs it; the slow path where none
        if plan is None or plan.run(a.data_ptr(), b.data_ptr(), c, sa.data_ptr() if sa is not None else 0,
                                    sb.data_ptr() if sb is not None else 0) is None:
            dispatch.run_problem(p)

    c.fill_(float("nan"))
    ours()  # the fast path must compute the same thing
    torch.cuda.synchronize()
    chk2 = check()
    rec = dict(ok=bool(chk.ok and chk2.ok), rel_err=max(chk.rel_err, chk2.rel_err), config=dict(used),
               tune_s=round(tune_s, 2), first_call_s=round(first_s, 2), ran=used.get("kernel"),
               tuning=list(tuner.tuning_log), planned=plan is not None)
    if not (chk.ok and chk2.ok):
        rec["check"] = (str(chk) if not chk.ok else "second call: " + str(chk2))[:800]
    flops = 2.0 * m * n * k
    ref = library_call(dtype, a, b, sa, sb, torch)
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        t = timed(dict(ours=ours, ref=ref), flush, budget_s=0.6)
        ms, ref_ms = t["ours"][0], t["ref"][0]
        rec.update(ms=ms, ref_ms=ref_ms, ratio_eager=ref_ms / ms, timing="interleaved ABBA, L2 flushed",
                   quartiles=dict(ours=t["ours"][1:], ref=t["ref"][1:]))
        g_ms = g_ref = None
        if graphs and min(ms, ref_ms) < 0.5:  # beyond that, launch overhead is < 1% of a call
            try:
                (g_ours, n_ours), (g_lib, n_lib) = captured(ours, torch, ms), captured(ref, torch, ref_ms)
                t = timed(dict(ours=g_ours, ref=g_lib), None, budget_s=0.4)
                g_ms, g_ref, rec["graph_n"] = t["ours"][0] / n_ours, t["ref"][0] / n_lib, n_ours
            except Exception as e:  # noqa: BLE001
                rec["graph_error"] = f"{type(e).__name__}: {e}"[:300]
                g_ms = g_ref = None
                torch.cuda.synchronize()
        if g_ms and g_ref:
            rec.update(graph_ms=g_ms, graph_ref_ms=g_ref, ratio_graph=g_ref / g_ms)
            use_graph = ms > 1.3 * g_ms or ref_ms > 1.3 * g_ref
        else:
            use_graph = False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    if use_graph:
        t_ours, t_ref, mode = rec["graph_ms"], rec["graph_ref_ms"], "graph, L2 warm"
    else:
        t_ours, t_ref, mode = ms, ref_ms, "eager, L2 flushed"
    rec.update(tflops=flops / t_ours / 1e9, ref_tflops=flops / t_ref / 1e9, ratio=t_ref / t_ours, ratio_mode=mode,
               eager_tflops=flops / ms / 1e9, eager_ref_tflops=flops / ref_ms / 1e9)
    return rec


def merge(docs: list[dict]) -> dict:
    """One result from several runs: the first run's header, and per shape (dtype, M, N, K) the
    record whose ratio is the median of the runs' (the lower middle of an even count), with every
    run's ratio under "runs_ratio"; a shape missing or failed in some run takes the runs it ran in."""
    if len({d.get("fp8_reference") for d in docs}) > 1:
        raise ValueError("the runs timed FP8 against torch._scaled_mm in different modes (fp8_reference): "
                         "their ratios are not one measurement")
    out = dict(docs[0], records=[], runs=len(docs), dates=[d.get("date") for d in docs])
    for rec in docs[0]["records"]:
        key = (rec["dtype"], rec["m"], rec["n"], rec["k"])
        same = [r for d in docs for r in d["records"] if (r["dtype"], r["m"], r["n"], r["k"]) == key
                and r.get("ok") and r.get("ratio") is not None]
        if not same:
            out["records"].append(rec)
            continue
        ranked = sorted(same, key=lambda r: r["ratio"])
        out["records"].append(dict(ranked[(len(ranked) - 1) // 2], runs_ratio=[r["ratio"] for r in same]))
    return out


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return statistics.geometric_mean(xs) if xs else float("nan")


def table(result):
    print()
    print(f"{'dtype':5s} {'M×N×K':>18s} {'ok':>2s} {'ours':>7s} {'ref':>7s} {'ratio':>6s} {'mode':5s} "
          f"{'eagerµs':>8s} {'refµs':>7s} {'graphµs':>8s} {'refµs':>7s}  config")
    by = {}
    for r in result["records"]:
        shape = f"{r['m']}×{r['n']}×{r['k']}"
        if "ratio" not in r:
            print(f"{r['dtype']:5s} {shape:>18s} {'--':>2s}  {r.get('error', '')[:110]}")
            continue
        cfg = r.get("config", {})
        cs = f"{cfg.get('BM')}x{cfg.get('BN')}x{cfg.get('BK')} w{cfg.get('num_warps')} s{cfg.get('num_stages')}" \
             f"{' WS' if cfg.get('WS') else ''}{' KM' if cfg.get('KMAJOR') else ''}" \
             f"{' S' + str(cfg['SPLIT']) if cfg.get('SPLIT') else ''} {cfg.get('kernel', '')}"
        gm = f"{1e3 * r['graph_ms']:8.1f}" if r.get("graph_ms") else f"{'-':>8s}"
        gr = f"{1e3 * r['graph_ref_ms']:7.1f}" if r.get("graph_ref_ms") else f"{'-':>7s}"
        print(f"{r['dtype']:5s} {shape:>18s} {'y' if r['ok'] else 'N':>2s} {r['tflops']:7.1f} {r['ref_tflops']:7.1f} "
              f"{r['ratio']:6.3f} {r['ratio_mode'][:5]:5s} {1e3 * r['ms']:8.1f} {1e3 * r['ref_ms']:7.1f} {gm} {gr}  {cs}")
        by.setdefault(r["dtype"], []).append(r)
    print()
    for dt, rs in by.items():
        big = [r["ratio"] for r in rs if r["m"] * r["n"] * r["k"] >= 8192**3]
        print(f"{dt:5s} geo-mean ratio {geomean([r['ratio'] for r in rs]):.3f} (eager only "
              f"{geomean([r['ratio_eager'] for r in rs]):.3f})  ≥8192³: {geomean(big):.3f}"
              f"  min {min(r['ratio'] for r in rs):.3f}  all ok: {all(r['ok'] for r in rs)}  shapes {len(rs)}")
    if result.get("direct_launch"):
        print("launch plans:", result["direct_launch"])
    if result.get("fallbacks"):
        print("fallbacks:", json.dumps(result["fallbacks"])[:1500])
    print(f"elapsed {result.get('elapsed_s')} s; JSON and tuning cache under {os.path.dirname(result['cache'])}")


if __name__ == "__main__":
    sys.exit(main())
