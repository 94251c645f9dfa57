"""The library as users call it: eager and device time against cuBLAS, host µs per call, first calls.

    tilegemm library --json results/h200/library.json            # on a GPU (minutes)
    tilegemm library --shapes 256,4096x14336x4096 --dtypes bf16 --runs 1

Two clocks, always named:
- eager: back-to-back calls through the public API (`tilegemm.matmul`, `tilegemm.gemm`), as a
  model's forward pass makes them. A sample flushes L2, waits for the GPU, then times `calls`
  back-to-back calls with CUDA events on torch's stream; the time per call is what a user gets,
  whichever of the host (Python, dispatch, launch) and the GPU is slower. Only the first call of
  a sample starts from a cold L2.
- device: one call between CUDA events after the L2 flush and a hold kernel (`tilegemm.hold`)
  that keeps the GPU busy while the host enqueues the call, so the events bracket the kernels
  only: how good the kernels are.
Both clocks flush L2 by reading twice its size (`timing.L2Flush`, kind "read"): L2 then holds
clean lines, as a model's layer finds it. A memset, do_bench's flush, leaves an L2 of dirty lines
whose write-back the timed call would pay (8 µs of a decode product's 39: docs/perf-notes.md, 67).
The reference (cuBLAS through torch.matmul; torch._scaled_mm for FP8) runs the same way, on the
same inputs, interleaved with ours in ABBA batches (`tilegemm.sampling.alternate`), and the whole
set is run `runs` times: each record keeps every run and the median of them. Every result is
checked against a float64 product (sampled rows and columns) before it is timed.

Also: host µs per repeated call at 64³ (400 calls back to back with no synchronisation, median of
15 repetitions, torch's call beside each path), and the first call on a shape never seen, in a
fresh process, with an empty Triton cache (compile included) and with a warm one.

Decode, as a model calls it: the Llama-3 8B and 70B projections at M = 1, 8, 16, 32, 64 and 128
with B = Wᵀ (K-major: `x @ W.t()`, what `nn.Linear` passes), in BF16 (tensor cores) and FP32 (the
SIMT path, against cuBLAS with TF32 off), both clocks, each with the bytes it must move (the
weight, x and y) over its device time beside the GPU's read bandwidth measured in the same run
(`torch.sum` over 2 GiB, the device clock): a decode product is memory-bound.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from ..argtypes import positive_float, positive_int
from .shapes import held_out, held_out_seed, resolve

DTYPES = ("bf16", "fp16", "tf32", "fp8", "fp8-promoted", "fp32")  # fp8-promoted: gemm(..., fast_accum=False)
FP8 = ("fp8", "fp8-promoted")
MEASURING = ("shapes", "dtypes", "modes", "runs", "budget", "no_host", "no_first", "no_decode", "decode_dtypes")  # the
# options of a timed run, which --merge (no timing) refuses rather than ignores
ONCE = ("decode", "host_us", "first_call")  # measured by one part of a document (merge), not per dtype
ERRORS = {"decode": "read_error", "host_us": "host_us_error", "first_call": "first_call_error"}  # where each says why not
FP32_MAX_FLOPS = 2**40  # the SIMT path's products above this many FLOPs take too long to time (~30 ms each)
# decode's weights, N × K (q/o, k/v, gate/up, down), and its batch sizes M
DECODE_WEIGHTS = {"llama3-8b": ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336)),
                  "llama3-70b": ((8192, 8192), (1024, 8192), (28672, 8192), (8192, 28672))}
DECODE_M = (1, 8, 16, 32, 64, 128)
DECODE_DTYPES = ("bf16", "fp32")  # a model in BF16 on the tensor cores, and one kept in FP32 on the SIMT path
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}
READ_BYTES = 2 << 30  # what the read-bandwidth measurement sums
HOLD_US = 200
EAGER_SAMPLE_US = 400.0  # a sample of eager calls lasts about this long
# FP8's reference accumulates as gemm does by default (fast_accum): the tensor cores' own sum, to the same error;
# its default mode (FP32 promotion) took 0.95-1.08x its time on the H100, where Triton's took up to 2.7x
# (docs/perf-notes.md, 145). Records before 2026-12-06 were against that default mode: "torch._scaled_mm"
FP8_REFERENCE = "torch._scaled_mm, fast accumulation"
FP8_PROMOTED_REFERENCE = "torch._scaled_mm, default mode (FP32 promotion)"  # fp8-promoted's: both promote


def _library_call(dtype, a, b, sa, sb):
    """Ours, through the public API."""
    import tilegemm

    if dtype in FP8:
        return lambda: tilegemm.gemm(a, b, scale_a=sa, scale_b=sb, fast_accum=dtype == "fp8")
    if dtype == "tf32":
        return lambda: tilegemm.gemm(a, b, precision="tf32")
    return lambda: tilegemm.matmul(a, b)


def _reference_call(dtype, a, b, sa, sb):
    """cuBLAS through torch (TF32 on for tf32, off for fp32: the caller sets it), or _scaled_mm."""
    import torch

    if dtype in FP8:
        return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                        use_fast_accum=dtype == "fp8")
    return lambda: torch.matmul(a, b)


def operands(dtype, m, n, k):
    """Fresh inputs in [-1, 1) (never zeros); FP8 with per-tensor scales and B column-major."""
    import torch

    dev = torch.device("cuda")
    a32 = torch.rand(m, k, device=dev) * 2 - 1
    b32 = torch.rand(k, n, device=dev) * 2 - 1
    if dtype in ("bf16", "fp16"):
        dt = torch.bfloat16 if dtype == "bf16" else torch.float16
        return a32.to(dt), b32.to(dt), None, None
    if dtype in ("tf32", "fp32"):
        return a32, b32, None, None
    fmax = torch.finfo(torch.float8_e4m3fn).max
    sa = (a32.abs().amax() / fmax).reshape(1).float()
    sb = (b32.abs().amax() / fmax).reshape(1).float()
    a8 = (a32 / sa).to(torch.float8_e4m3fn)
    b8 = (b32 / sb).to(torch.float8_e4m3fn).t().contiguous().t()
    return a8, b8, sa, sb


def _check(dtype, a, b, sa, sb, got) -> str:
    """'' when got matches a float64 product on sampled rows and columns, else the mismatch."""
    import torch

    from .. import validate
    from ..kernels.tensorcore._problem import take

    g = torch.Generator(device="cpu").manual_seed(1)
    rows = torch.randperm(a.shape[0], generator=g)[:32].to(a.device)
    cols = torch.randperm(b.shape[1], generator=g)[:256].to(a.device)
    scale = float(sa) * float(sb) if sa is not None else 1.0
    a64 = (take(a, 0, rows).double() * scale).cpu().numpy()
    b64 = take(b, 1, cols).double().cpu().numpy()
    c = got[rows][:, cols].double().cpu().numpy()
    tol = "float8_e4m3fn" if dtype in FP8 else \
        {"bf16": "bfloat16", "fp16": "float16", "tf32": "tf32", "fp32": "float32"}[dtype]
    out = "bfloat16" if dtype in FP8 else {"bf16": "bfloat16", "fp16": "float16"}.get(dtype, "float32")
    chk = validate.check(c, a64, b64, dtype=tol, out_dtype=out)
    return "" if chk.ok else str(chk).splitlines()[0][:300]


class _Clock:
    """The two ways a sample is taken (module docstring), on torch's current stream."""

    def __init__(self):
        import torch

        from .. import hold
        from .timing import L2Flush

        self.torch, self.hold = torch, hold
        self.flush = L2Flush(framework="torch", kind="read")

    def device(self, fn, n: int) -> list[float]:
        torch = self.torch
        stream = torch.cuda.current_stream().cuda_stream
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in pairs:
            self.flush()
            self.hold.hold(HOLD_US, stream)
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in pairs]

    def eager(self, fn, n: int, calls: int) -> list[float]:
        torch = self.torch
        out = []
        for _ in range(n):
            self.flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / calls)
        return out


def _interleaved(takers, budget_s: float) -> list[list[float]]:
    from ..sampling import alternate

    series, _ = alternate(takers, budget_s=budget_s, min_reps=10, max_reps=60, target_rse=0.01, batch=5)
    return series


def measure_shape(clock, dtype: str, m: int, n: int, k: int, modes, budget_s: float, w_t: bool = False) -> dict:
    """One shape and dtype: checked, then timed in each mode, ours and the reference interleaved.
    w_t: B = Wᵀ (K-major), as a model's linear layer passes it."""
    import torch

    rec = dict(dtype=dtype, m=m, n=n, k=k)
    a, b, sa, sb = operands(dtype, m, n, k)
    if w_t and dtype in ("bf16", "fp16", "tf32", "fp32"):
        b = b.t().contiguous().t()
    ours, ref = _library_call(dtype, a, b, sa, sb), _reference_call(dtype, a, b, sa, sb)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        return _measure(clock, rec, dtype, a, b, sa, sb, ours, ref, modes, budget_s)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def _measure(clock, rec, dtype, a, b, sa, sb, ours, ref, modes, budget_s) -> dict:
    import torch

    t0 = time.perf_counter()
    got = ours()  # the first call: configuration, compile, launch plan
    torch.cuda.synchronize()
    rec["first_call_s"] = round(time.perf_counter() - t0, 4)
    rec["check"] = _check(dtype, a, b, sa, sb, got) or "ok"
    got = ours()  # the second: the launch plan's (fast) path must compute the same
    torch.cuda.synchronize()
    again = _check(dtype, a, b, sa, sb, got)
    if again:
        rec["check"] = "plan path: " + again
    fns = (ours, ref)
    try:
        ref()
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001  (_scaled_mm's shape rules: N and K multiples of 16)
        rec["ref_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        fns = (ours,)  # ours is still timed, alone: a shape the reference refuses, and no ratio
    if rec["check"] != "ok":
        return rec
    # warm both, and estimate the per-call time that sizes an eager sample
    est = min(t for f in fns for t in clock.eager(f, 3, 5))
    calls = max(1, min(50, int(EAGER_SAMPLE_US / 1e3 / max(est, 1e-4))))
    for mode in modes:
        if mode == "eager":
            takers = [lambda k_, f=f: clock.eager(f, k_, calls) for f in fns]
        else:
            takers = [lambda k_, f=f: clock.device(f, k_) for f in fns]
        series = _interleaved(takers, budget_s)
        rec[mode] = dict(ours_ms=statistics.median(series[0]), samples=len(series[0]),
                         calls_per_sample=calls if mode == "eager" else 1)
        if len(series) > 1:
            rec[mode]["ref_ms"] = statistics.median(series[1])
    return rec


HOST_ORDER = "ours and the reference alternating, repetition by repetition, after a warm-up of both"


def host_us(reps: int = 15, calls: int = 400) -> list[dict]:
    """Host µs per repeated call at 64³, per path, with torch's call beside it, in one run (and for
    BF16 and FP32 the other forms a model calls, at 64-wide operands: _forms): the time
    of `calls` calls back to back with no synchronisation inside, median of `reps` repetitions,
    ours and the reference alternating repetition by repetition (so that a drift of the host's
    pace, as right after the sweep, falls on both), after a warm-up of both."""
    import torch

    import tilegemm

    def block(fn) -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        us = (time.perf_counter() - t0) / calls * 1e6
        torch.cuda.synchronize()
        return us

    def per_call(*fns) -> list[float]:
        for _ in range(2):  # warm-up: every path once at the pace of a timed repetition
            for fn in fns:
                block(fn)
        times = [[] for _ in fns]
        for _ in range(reps):
            for t, fn in zip(times, fns):
                t.append(block(fn))
        return [statistics.median(t) for t in times]

    out = []
    for dtype in ("bf16", "fp16", "fp32", "fp8", "tf32"):
        a, b, sa, sb = operands(dtype, 64, 64, 64)
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        paths = {"bf16": [("matmul", _library_call(dtype, a, b, sa, sb)), ("gemm", lambda: tilegemm.gemm(a, b))],
                 "fp16": [("matmul", _library_call(dtype, a, b, sa, sb)), ("gemm", lambda: tilegemm.gemm(a, b))],
                 "fp32": [("matmul", _library_call(dtype, a, b, sa, sb))],
                 "fp8": [("gemm", _library_call(dtype, a, b, sa, sb))],
                 "tf32": [("gemm", _library_call(dtype, a, b, sa, sb))]}[dtype]
        ref = _reference_call(dtype, a, b, sa, sb)
        c = torch.empty(64, 64, device="cuda", dtype=a.dtype if dtype != "fp8" else torch.bfloat16)
        ref_name = FP8_REFERENCE if dtype == "fp8" else "torch.mm"
        for path, fn in paths:
            fns = [fn, ref] + ([lambda: torch.mm(a, b, out=c)] if dtype != "fp8" else [])
            ours_us, ref_us, *ref_out = per_call(*fns)
            rec = dict(dtype=dtype, path=f"tilegemm.{path}", m=64, n=64, k=64, mode="host_us", ours_us=ours_us,
                       ref=ref_name, ref_us=ref_us, ratio=ref_us / ours_us)
            if ref_out:
                rec["ref_out_us"] = ref_out[0]
            out.append(rec)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():  # as a model's forward pass in inference calls them
        for dtype in FORM_DTYPES:
            for path, form, shape, ref_name, ours, ref in _forms(dtype):
                ours_us, ref_us = per_call(ours, ref)
                out.append(dict(dtype=dtype, path=path, form=form, shape=shape, m=64, n=64, k=64, mode="host_us",
                                ours_us=ours_us,
                                ref=ref_name, ref_us=ref_us, ratio=ref_us / ours_us))
    return out


FORM_DTYPES = ("bf16", "fp32")  # the tensor cores' path and the SIMT path


def _forms(dtype: str, device: str = "cuda") -> list[tuple]:
    """The other forms a model calls at 64-wide operands, each (our path, form, shape in words,
    reference's name, ours, reference): batched (3-D @ 3-D), an N-D activation @ a weight, x @ Wᵀ (the weight
    as nn.Linear holds it), a patched nn.Linear against the same layer unpatched, and for BF16 x @ Wᵀ in FP8
    quantised by gemm each call against the same in torch's operations (_torch_fp8)."""
    import copy

    import torch

    import tilegemm

    dev, dt = torch.device(device), {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    r = lambda *shape: (torch.rand(*shape, device=dev) * 2 - 1).to(dt)  # noqa: E731
    a3, b3, x3, x, w = r(4, 64, 64), r(4, 64, 64), r(2, 32, 64), r(64, 64), r(64, 64)
    plain = torch.nn.Linear(64, 64, device=dev, dtype=dt)
    patched = copy.deepcopy(plain)
    tilegemm.patch(patched)
    mm = "tilegemm.matmul"
    return [(mm, "batched", "4×64×64 @ 4×64×64", "torch.matmul", lambda: tilegemm.matmul(a3, b3),
             lambda: torch.matmul(a3, b3)),
            (mm, "N-D @ W", "2×32×64 @ 64×64", "torch.matmul", lambda: tilegemm.matmul(x3, w), lambda: torch.matmul(x3, w)),
            (mm, "x @ Wᵀ", "64×64 @ (64×64)ᵀ", "torch.matmul", lambda: tilegemm.matmul(x, w.t()),
             lambda: torch.matmul(x, w.t())),
            ("tilegemm.patch", "nn.Linear, patched", "64×64 → 64, with bias", "nn.Linear", lambda: patched(x),
             lambda: plain(x))] + ([
            ("tilegemm.gemm", "FP8 quantised by gemm", "64×64 @ (64×64)ᵀ, precision='fp8'", TORCH_FP8,
             lambda: tilegemm.gemm(x, w.t(), precision="fp8"), lambda: _torch_fp8(x, w.t()))] if dtype == "bf16" else [])


TORCH_FP8 = "torch: amax / 448 scales, e4m3 casts, torch._scaled_mm"


def _torch_fp8(a, b):
    """A @ B in FP8 as a torch user writes it: per-tensor scales amax / 448, the operands divided
    and cast to e4m3, torch._scaled_mm with fast accumulation (B column-major, as it takes it)."""
    import torch

    sa, sb = a.abs().amax().float() / 448, b.abs().amax().float() / 448
    qa, qb = (a / sa).to(torch.float8_e4m3fn), (b / sb).to(torch.float8_e4m3fn)
    return torch._scaled_mm(qa, qb, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=True)


_FIRST_CALL = r"""
import json, os, sys, time
import torch
import tilegemm
dev = torch.device("cuda")
warm = torch.randn(96, 96, device=dev, dtype=torch.bfloat16)
tilegemm.matmul(warm, warm); torch.cuda.synchronize()          # imports, driver, one launch done
m, n, k = map(int, sys.argv[1:4])
dt = getattr(torch, sys.argv[4])
a = torch.randn(m, k, device=dev).to(dt); b = torch.randn(k, n, device=dev).to(dt)
torch.cuda.synchronize()
t0 = time.perf_counter(); tilegemm.matmul(a, b); torch.cuda.synchronize(); first = time.perf_counter() - t0
t0 = time.perf_counter(); tilegemm.matmul(a, b); torch.cuda.synchronize(); second = time.perf_counter() - t0
print("FIRST" + json.dumps(dict(first_s=first, second_s=second)))
"""


def first_calls(shapes=((3000, 5000, 7000), (777, 1234, 4321)), dtype: str = "bfloat16") -> list[dict]:
    """The first call on a shape never seen in this process, after one warm-up call on another
    shape, in a fresh process: with an empty Triton cache of its own (the JIT compile included),
    then again with the cache that run left (warm)."""
    import tempfile

    out = []
    for (m, n, k) in shapes:
        with tempfile.TemporaryDirectory() as cache_dir:  # one per shape: "cold" is cold for each
            env = dict(os.environ, TRITON_CACHE_DIR=cache_dir)
            for state in ("cold", "warm"):
                rec = dict(mode="first_call", triton_cache=state, dtype=dtype, m=m, n=n, k=k)
                try:
                    proc = subprocess.run([sys.executable, "-c", _FIRST_CALL, str(m), str(n), str(k), dtype], env=env,
                                          capture_output=True, text=True, timeout=300)
                    line = [x for x in proc.stdout.splitlines() if x.startswith("FIRST")]
                    if line:
                        rec.update(json.loads(line[0][5:]))
                    else:
                        rec["error"] = (proc.stderr or proc.stdout)[-500:]
                except subprocess.TimeoutExpired:
                    rec["error"] = "timed out after 300 s"
                out.append(rec)
    return out


def read_gbps(clock, reps: int = 10) -> float:
    """The GPU's read bandwidth in GB/s: torch.sum over READ_BYTES of BF16, on the device clock
    (median of reps)."""
    import torch

    x = torch.ones(READ_BYTES // 2, dtype=torch.bfloat16, device="cuda")
    x.sum()
    ms = statistics.median(clock.device(x.sum, reps))
    del x
    torch.cuda.empty_cache()
    return READ_BYTES / (ms * 1e-3) / 1e9


def decode_shapes() -> list[tuple[str, int, int, int]]:
    """(model, M, N, K) of every decode product measured."""
    return [(model, m, n, k) for model, weights in DECODE_WEIGHTS.items() for (n, k) in weights for m in DECODE_M]


def decode_records(per: dict, modes, read: list[float]) -> dict:
    """The decode part of the document: its records (records() over B = Wᵀ, with the model, the
    bytes moved and, on the device clock, GB/s of ours and of the reference) and the read
    bandwidth (the median over the runs)."""
    models = {(m, n, k): model for model, m, n, k in decode_shapes()}
    out = []
    for r in records(per, modes):
        r = dict(r, layout="nt", model=models.get((r["m"], r["n"], r["k"])))
        moved = (r["n"] * r["k"] + r["m"] * r["k"] + r["m"] * r["n"]) * ELEMENT_BYTES[r["dtype"]]  # weight, x and y
        r["bytes"] = moved
        if r["mode"] == "device" and "ratio" in r:
            r["gbps"], r["ref_gbps"] = moved / (r["ours_ms"] * 1e-3) / 1e9, moved / (r["ref_ms"] * 1e-3) / 1e9
        out.append(r)
    return dict(records=out, read_gbps=statistics.median(read) if read else None,
                read_how=f"torch.sum over {READ_BYTES >> 30} GiB of BF16, device clock, median of 10, each run")


def summarise(records: list[dict]) -> dict:
    """Geometric means and the worst shape per dtype and mode, over records with a ratio whose
    result passed its check in every run (a wrong result's time is no figure: `left_out` counts)."""
    out = {}
    for dtype in DTYPES:
        for mode in ("eager", "device"):
            rows = [r for r in records if r.get("dtype") == dtype and r.get("mode") == mode and r.get("ratio")
                    and not r.get("failed_checks")]
            if not rows:
                continue
            ratios = [r["ratio"] for r in rows]
            worst = min(rows, key=lambda r: r["ratio"])
            out[f"{dtype}/{mode}"] = dict(shapes=len(rows), geomean=statistics.geometric_mean(ratios),
                                          worst=dict(shape=[worst["m"], worst["n"], worst["k"]], ratio=worst["ratio"]),
                                          below_095=sum(x < 0.95 for x in ratios))
    return out


def _progress_words(rec: dict) -> str:
    """One shape's run for the progress line: each clock's ratio (our time alone where the
    reference refused the shape), then what went wrong, a failed check first."""
    said = [f"{mode} {t['ref_ms'] / t['ours_ms']:.3f}" if "ref_ms" in t else f"{mode} {t['ours_ms']:.4f} ms"
            for mode, t in ((mode, rec[mode]) for mode in ("eager", "device") if mode in rec)]
    check = rec.get("check")
    why = rec.get("error") or (f"check: {check}" if check not in (None, "ok") else "") or rec.get("ref_error", "")
    return " ".join(said + ([why[:120]] if why else []))


def _shapes(records: list[dict], dtype: str, keep) -> int:
    """How many shapes of dtype have a record that `keep` takes (a shape has a record per clock)."""
    return len({(r["m"], r["n"], r["k"]) for r in records if r.get("dtype") == dtype and keep(r)})


def refused(records: list[dict], dtype: str) -> int:
    """How many shapes of dtype the reference refused and ours ran alone (timed, no ratio)."""
    return _shapes(records, dtype, lambda r: "ours_ms" in r and "ratio" not in r)


def left_out(records: list[dict], dtype: str) -> tuple[int, int]:
    """Shapes of dtype kept out of its means: (those not timed for an error, ours or the reference's
    (an older run recorded the reference's refusal so), those with a ratio whose check failed in a run)."""
    return (_shapes(records, dtype, lambda r: "error" in r),
            _shapes(records, dtype, lambda r: "ratio" in r and r.get("failed_checks")))


def fewer_runs(records: list[dict], dtype: str, runs: int) -> int:
    """Shapes of dtype in the means whose ratio is the median of fewer than `runs` runs (a run failed)."""
    return _shapes(records, dtype, lambda r: "ratio" in r and not r.get("failed_checks")
                   and len(r.get("runs", [])) < runs)


def records(per: dict, modes) -> list[dict]:
    """Per shape, dtype and mode: the median over the runs so far, every run kept, and any check
    that failed in any run."""
    out = []
    for (dtype, m, n, k), recs in per.items():
        bad = sorted({r["check"] for r in recs if r.get("check") not in (None, "ok")})
        for mode in modes:
            timed = [r[mode] for r in recs if mode in r]
            base = dict(dtype=dtype, m=m, n=n, k=k, mode=mode, **({"failed_checks": bad} if bad else {}))
            first = recs[0]
            if not timed:  # a failed check before the reference's refusal: ours wrong is the news
                out.append(dict(base, error=first.get("error") or (f"check: {bad[0]}" if bad else None)
                                or first.get("ref_error") or f"check: {first.get('check')}"))
                continue
            if not any("ref_ms" in t for t in timed):  # the reference refused the shape: ours alone, no ratio
                out.append(dict(base, ours_ms=statistics.median(t["ours_ms"] for t in timed),
                                runs=[dict(ours_ms=t["ours_ms"]) for t in timed],
                                ref_error=next((r["ref_error"] for r in recs if r.get("ref_error")), "no time"),
                                first_call_s=first.get("first_call_s")))
                continue
            timed = [t for t in timed if "ref_ms" in t]  # a run where the reference raised has no ratio
            ratios = [t["ref_ms"] / t["ours_ms"] for t in timed]
            out.append(dict(base, ours_ms=statistics.median(t["ours_ms"] for t in timed),
                            ref_ms=statistics.median(t["ref_ms"] for t in timed), ratio=statistics.median(ratios),
                            runs=[dict(ours_ms=t["ours_ms"], ref_ms=t["ref_ms"], ratio=x) for t, x in zip(timed, ratios)],
                            reference=FP8_REFERENCE if dtype == "fp8" else FP8_PROMOTED_REFERENCE
                            if dtype == "fp8-promoted" else "cuBLAS (torch.matmul"
                            + (", TF32)" if dtype == "tf32" else (", TF32 off)" if dtype == "fp32" else ")")),
                            first_call_s=recs[0].get("first_call_s")))
    return out


def run(shapes, dtypes, modes=("eager", "device"), runs: int = 3, budget_s: float = 0.3, progress=print,
        with_host: bool = True, with_first: bool = True, save=None, with_decode: bool = True,
        decode_dtypes=DECODE_DTYPES, *, shape_set: str) -> dict:
    """The whole measurement: `runs` passes over shapes × dtypes (ours and the reference in the
    same passes) and, with_decode, over the decode products (B = Wᵀ) in each of decode_dtypes and
    the read bandwidth; then the records as medians over the runs. save(doc), if given, is called
    after every shape with the document so far (a run cut short keeps what it measured).
    shape_set: what `shapes` is, as the document names it (`shapes.resolve`: a held-out draw with
    its seed)."""
    import torch

    from . import clocks
    from .results import environment

    clock = _Clock()
    per = {}  # (dtype, m, n, k) -> list of per-run records
    doc = dict(schema="tilegemm.library/1", environment=environment(), clocks={"before": clocks.read()},
               harness=dict(shapes=shape_set, modes=list(modes), runs=runs, hold_us=HOLD_US,
                            eager_sample_us=EAGER_SAMPLE_US,
                            flush=clock.flush.mode, flush_kind=clock.flush.kind,
                            order="ours and the reference interleaved, ABBA batches of 5",
                            fp32_max_flops=FP32_MAX_FLOPS, host_order=HOST_ORDER))
    t_start = time.perf_counter()
    decode_per: dict = {}
    read: list = []
    for run_i in range(runs):
        if with_decode:
            try:
                read.append(read_gbps(clock))
            except Exception as e:  # noqa: BLE001  (the products are still measured; the document says why)
                doc["read_error"] = f"{type(e).__name__}: {e}"[:400]
            for dtype in decode_dtypes:
                for _, m, n, k in decode_shapes():
                    try:
                        rec = measure_shape(clock, dtype, m, n, k, modes, budget_s, w_t=True)
                    except Exception as e:  # noqa: BLE001
                        rec = dict(dtype=dtype, m=m, n=n, k=k, error=f"{type(e).__name__}: {e}"[:400])
                    finally:
                        torch.cuda.empty_cache()
                    decode_per.setdefault((dtype, m, n, k), []).append(rec)
                    doc["decode"] = decode_records(decode_per, modes, read)
                    if save:
                        save(doc)
            progress(f"run {run_i + 1}/{runs} decode: {len(decode_shapes())} products in {', '.join(decode_dtypes)}"
                     + (f", read {read[-1]:.0f} GB/s" if len(read) > run_i else "")
                     + f"  ({time.perf_counter() - t_start:.0f} s)")
        for dtype in dtypes:
            for (m, n, k) in shapes:
                if dtype == "fp32" and 2 * m * n * k > FP32_MAX_FLOPS:
                    continue
                try:
                    rec = measure_shape(clock, dtype, m, n, k, modes, budget_s)
                except Exception as e:  # noqa: BLE001  (one failure is recorded; the run goes on)
                    rec = dict(dtype=dtype, m=m, n=n, k=k, error=f"{type(e).__name__}: {e}"[:400])
                finally:
                    torch.cuda.empty_cache()
                per.setdefault((dtype, m, n, k), []).append(rec)
                progress(f"run {run_i + 1}/{runs} {dtype:4s} {m}×{n}×{k}: {_progress_words(rec)}"
                         f"  ({time.perf_counter() - t_start:.0f} s)")
                if save:
                    doc["records"] = records(per, modes)
                    doc["summary"] = summarise(doc["records"])
                    doc["elapsed_s"] = round(time.perf_counter() - t_start, 1)
                    save(doc)
    doc["records"] = records(per, modes)
    for name, what, fn in (("host_us", "host µs per call at 64³", host_us), ("first_call", "first calls", first_calls)):
        if (with_host if name == "host_us" else with_first):
            progress(f"{what} …")
            try:
                doc[name] = fn()
            except Exception as e:  # noqa: BLE001  (what was measured stays)
                doc[name + "_error"] = f"{type(e).__name__}: {e}"[:400]
            if save:
                save(doc)
    doc["clocks"]["after"] = clocks.read()  # after every part, host µs and first calls included
    doc["summary"] = summarise(doc["records"])
    doc["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    if save:
        save(doc)
    return doc


def _parts(doc: dict) -> list[dict]:
    """What each measured part of doc was: its dtypes, date, clocks and elapsed time, and which of
    ONCE it measured (a merged document: its parts, each flag kept where the document still has
    what it flags; a part left with neither dtypes nor a flag is dropped)."""
    if doc.get("parts"):
        kept = [{k: v for k, v in p.items() if k not in ONCE or doc.get(k)} for p in doc["parts"]]
        return [p for p in kept if p["dtypes"] or any(p.get(x) for x in ONCE)]
    env = doc.get("environment", {})
    part = dict(dtypes=sorted({r["dtype"] for r in doc.get("records", [])}), date=env.get("date"),
                clocks=doc.get("clocks"), elapsed_s=doc.get("elapsed_s"),
                **{k: env[k] for k in ("libraries", "code") if env.get(k)})  # (what ran it, part by part)
    return [dict(part, **{x: True for x in ONCE if doc.get(x)})]


def measured(doc: dict) -> list:
    """What a document holds figures of: its records' dtypes (sorted), then which of ONCE it has."""
    return [*sorted({r["dtype"] for r in doc.get("records", [])}), *(x for x in ONCE if doc.get(x))]


def _products(doc: dict, item: str) -> set:
    """The products a document measured for item: (dtype, M, N, K) of its records of that dtype,
    or of its decode records for "decode"; empty for host µs and first calls."""
    recs = (doc.get("decode") or {}).get("records", []) if item == "decode" else \
        [r for r in doc.get("records", []) if r["dtype"] == item]
    return {(r["dtype"], r["m"], r["n"], r["k"]) for r in recs}


def superseded(doc: dict, items: set) -> dict | None:
    """doc without the figures of `items` (dtypes and ONCE names measured again by a later part):
    their records, figures and errors gone, and each part's claim to them with them (a part keeps
    its date for what it still holds); None when nothing of doc is left (doc itself, unchanged,
    when items is empty)."""
    if not items:
        return doc
    if not set(measured(doc)) - items:
        return None
    out = dict(doc, records=[r for r in doc.get("records", []) if r["dtype"] not in items])
    for x in ONCE:
        if x in items:
            out.pop(x, None)
            out.pop(ERRORS[x], None)
    out["parts"] = [dict(p, dtypes=[d for d in p["dtypes"] if d not in items]) for p in _parts(doc)]
    return out


def _replaced(docs: list[dict]) -> list[dict]:
    """merge's replace: the parts, each without what a later part measured again (`superseded`),
    those left with nothing dropped. A later part must have measured every product of what it
    replaces (a run cut short would otherwise drop the earlier part's other shapes)."""
    standing: dict = {}  # item -> index of the last part that measured it
    kept = []
    for i in range(len(docs) - 1, -1, -1):
        d = docs[i]
        for item in (x for x in measured(d) if x in standing):
            j = standing[item]
            missing = _products(d, item) - _products(docs[j], item)
            if missing:
                shown = ", ".join(f"{dt} {m}×{n}×{k}" for dt, m, n, k in sorted(missing)[:3])
                raise ValueError(f"part {j + 1} measured {item} again without {len(missing)} of part {i + 1}'s "
                                 f"products ({shown}{', …' if len(missing) > 3 else ''}): measure them too, "
                                 "or merge without --replace")
        t = superseded(d, set(standing))
        for item in measured(d):
            standing.setdefault(item, i)
        if t is not None:
            kept.append(t)
    return kept[::-1]


def merge(docs: list[dict], replace: bool = False) -> dict:
    """One document from runs of the same harness over different dtypes (a GPU call has a time
    limit, so the set is measured in parts, one after another on one machine): records joined,
    each part's date, clocks, elapsed time, libraries and code kept (the document's date: the newest
    part's), host µs, first calls and decode from the part
    that measured them (a part may be measured for those alone: --dtypes ""); a part may be a
    merged document itself. A dtype, or one of ONCE, measured by two parts is refused (which one
    would stand?), unless replace: then the last part that measured it stands whole (all of that
    dtype's records, or the whole decode part, errors included), it must cover every product the
    earlier part had, and the earlier parts keep only what no later part measured again
    (`superseded`). Parts from another tool or GPU, and parts that timed products after flushing
    L2 in different ways, are refused."""
    if not docs:
        raise ValueError("nothing to merge")
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or d.get("schema") != "tilegemm.library/1":
            what = f"schema {d.get('schema')!r}" if isinstance(d, dict) else f"a JSON {type(d).__name__}"
            raise ValueError(f"part {i + 1} is not a `tilegemm library` result ({what})")
        gpu = (d.get("environment", {}).get("gpu") or {}).get("name")
        if gpu != (docs[0].get("environment", {}).get("gpu") or {}).get("name"):
            raise ValueError(f"part {i + 1} ran on {gpu}, part 1 on another GPU")
    if replace:
        docs = _replaced(docs)
    keys = ("modes", "runs", "hold_us", "eager_sample_us")
    h0 = {k: (docs[0].get("harness") or {}).get(k) for k in keys}
    timed = [d for d in docs if d.get("records") or d.get("decode")]  # parts that flushed L2 to time
    flushes = [(d.get("harness") or {}).get("flush") for d in timed]
    if len(set(flushes)) > 1:
        raise ValueError(f"parts flushed L2 in different ways ({', '.join(sorted(set(map(str, flushes))))})")
    sets = {shape_set(d) for d in docs if d.get("records")}
    if len(sets) > 1:
        raise ValueError(f"parts measured different shape sets ({', '.join(sorted(sets))})")
    seen: dict = {}
    for i, d in enumerate(docs):
        if {k: (d.get("harness") or {}).get(k) for k in keys} != h0:
            raise ValueError(f"part {i + 1} was measured with another harness ({d.get('harness')}) than part 1 ({h0})")
        for dt in measured(d):
            if dt in seen:
                raise ValueError(f"{dt} is measured in parts {seen[dt] + 1} and {i + 1}")
            seen[dt] = i
    parts = [part for d in docs for part in _parts(d)]
    dates = [p["date"] for p in parts if p.get("date")]  # the document is as new as its newest part
    out = dict(docs[0], records=[r for d in docs for r in d.get("records", [])], parts=parts,
               environment=dict(docs[0].get("environment") or {}, **({"date": max(dates)} if dates else {})),
               harness={**(docs[0].get("harness") or {}), **{k: (timed[0].get("harness") or {}).get(k)
                                                               for k in ("flush", "flush_kind") if timed}})
    if sets:  # the set the products were measured on, whichever part comes first
        out["harness"]["shapes"] = sets.pop()
    for name in (*ONCE, *ERRORS.values()):
        out.pop(name, None)
        got = [d[name] for d in docs if d.get(name)]
        if got:
            out[name] = got[0]
    out.pop("clocks", None)
    out.pop("elapsed_s", None)
    for what in ("code", "libraries"):  # one for the document only where its parts agree (each part has its own)
        if len({json.dumps(p.get(what), sort_keys=True) for p in parts if p.get(what)}) > 1:
            out["environment"].pop(what, None)
    out["summary"] = summarise(out["records"])
    return out


def shape_set(doc: dict) -> str:
    """The shape set a document's records measured (documents before it was recorded: `library`)."""
    return (doc.get("harness") or {}).get("shapes") or "library"


def _flush_words(harness: dict) -> str:
    """How a document's samples flushed L2, in words (its harness's `timing.L2Flush` mode and kind;
    a document from before the kind was recorded says it in the mode's words, session 30's parts)."""
    mode = harness.get("flush")
    if not mode:
        return "not recorded"
    kind = harness.get("flush_kind") or ("read" if "by reading" in mode else "write")
    if kind == "read":
        return f"{mode} (clean lines)"
    return f"{mode}, zeroed (dirty lines, whose write-back a memory-bound call pays)"


def _fp8_reference_words(doc: dict) -> str:
    """The FP8 reference, in words: torch._scaled_mm with fast accumulation (FP8_REFERENCE, as
    gemm's default), or in older records its default mode (FP32 promotion); fp8-promoted's, its
    default mode (FP8_PROMOTED_REFERENCE)."""
    refs = {r["reference"] for r in doc.get("records", []) if r.get("dtype") == "fp8" and r.get("reference")}  # (a
    # shape the reference refused has none)
    promoted = any(r.get("dtype") == "fp8-promoted" for r in doc.get("records", []))
    words = ("for fp8-promoted, `gemm(..., fast_accum=False)`, torch._scaled_mm in its default mode: both add the "
             "MMA's partial sums into FP32")
    also = "; " + words if promoted else ""
    if not refs:
        return words if promoted else "torch._scaled_mm for FP8"
    if refs == {FP8_REFERENCE}:
        return "torch._scaled_mm for FP8, with fast accumulation, as gemm's default" + also
    if refs == {"torch._scaled_mm"}:
        return ("torch._scaled_mm for FP8, in its default mode: FP32 promotion, where gemm's FP8 accumulates as its "
                "fast mode, docs/perf-notes.md, 145" + also)
    return "torch._scaled_mm for FP8, each record naming its mode" + also


def render(doc: dict, full: bool = True) -> str:
    """Markdown of a `library` results document: per dtype, the geometric mean and worst shape of
    both clocks side by side; host µs per call beside torch's; first calls; with full, the decode
    products (render_decode) and every shape."""
    env = doc.get("environment", {})
    gpu = (env.get("gpu") or {}).get("name", "?")
    h = doc.get("harness") or {}
    parts = doc.get("parts") or []
    labels = [", ".join(p["dtypes"] + [what for x, what in zip(ONCE, ("decode", "host µs", "first calls")) if p.get(x)])
              for p in parts]
    when = "; ".join(f"{label} {p.get('date')}".strip() for label, p in zip(labels, parts)) if len(parts) > 1 \
        else env.get("date", "?")
    which = shape_set(doc)
    held = held_out_seed(which)
    on = (f" on `{which}`: {len(held_out(held))} shapes drawn from seed {held} that no tuning was fitted to (Llama-3 "
          "projections at a random token count, random sides aligned to 8, random sides)") if held is not None \
        else (f" on the `{which}` set" if which != "library" else "")
    out = [f"`tilegemm library`{on} on {gpu} ({when}): ratio = reference time / ours (> 1: ours "
           f"faster), each figure the median of {h.get('runs', '?')} runs, the reference (cuBLAS through torch; "
           f"{_fp8_reference_words(doc)}) timed in the same runs, interleaved. *Eager*: back-to-back calls "
           "through "
           "`tilegemm.matmul`/`gemm`, what a user gets. *Device*: the kernels alone (a hold kernel hides the "
           f"host). L2 flushed before each sample: {_flush_words(h)}.", "",
           "| dtype | shapes | eager: geometric mean | eager: worst (shape) | device: geometric mean | device: worst (shape) |",
           "|---|---:|---:|---|---:|---|"]
    summ = summarise(doc["records"]) if doc.get("records") else doc.get("summary") or {}
    for dtype in DTYPES:
        e, d = summ.get(f"{dtype}/eager"), summ.get(f"{dtype}/device")
        alone = refused(doc.get("records", []), dtype)

        def cell(x):
            if not x:
                return "—", "—"
            shape = "×".join(map(str, x["worst"]["shape"]))
            return f"{x['geomean']:.3f}", f"{x['worst']['ratio']:.3f} ({shape}); {x['below_095']} under 0.95"

        (eg, ew), (dg, dw) = cell(e), cell(d)
        failed, wrong = left_out(doc.get("records", []), dtype)
        short = fewer_runs(doc.get("records", []), dtype, h.get("runs", 0))
        notes = ([f"and {alone} the reference refused: ours timed alone"] if alone else []) + \
            ([f"and {failed} not timed, for an error the shapes' table gives: not in the means"] if failed else []) + \
            ([f"and {wrong} whose result failed a check in a run: not in the means"] if wrong else []) + \
            ([f"{short} of them the median of fewer runs"] if short else [])
        shapes = f"{(e or d or {}).get('shapes', 0)}" + (f" ({'; '.join(notes)})" if notes else "")
        if not e and not d and not alone and not failed and not wrong:
            continue
        out.append(f"| {dtype} | {shapes} | {eg} | {ew} | {dg} | {dw} |")
    host = doc.get("host_us") or []
    if host:
        order = (doc.get("harness") or {}).get("host_order")
        forms = " The rows with a form are the other calls a model makes, at 64-wide operands, under no_grad." \
            if any(r.get("form") for r in host) else ""
        out += ["", f"Host µs per repeated call at 64³ (one run: 400 calls back to back, median of 15"
                f"{', ' + order if order else ''}):"
                + forms,
                "",
                "| dtype | path | ours µs | reference | reference µs |", "|---|---|---:|---|---:|"]
        out += [f"| {r['dtype']} | `{r['path']}`{_form_words(r)} | {r['ours_us']:.1f} | `{r['ref']}` | {r['ref_us']:.1f} |"
                for r in host]
    first = [r for r in doc.get("first_call") or [] if "first_s" in r]
    if first:
        out += ["", "First call on a shape never seen, in a fresh process after one warm-up call (one sample each, "
                "host clock, the GPU synchronised after the call):", "",
                "| Triton cache | shape | first call s | second call |", "|---|---|---:|---:|"]
        out += [f"| {r['triton_cache']} | {r['m']}×{r['n']}×{r['k']} {r['dtype']} | {r['first_s']:.3f} | "
                f"{r['second_s'] * 1e3:.2f} ms |" for r in first]
    if full:
        out += render_decode(doc.get("decode"))
        out += ["", "| dtype | M×N×K | mode | ours ms | reference ms | ratio | runs |", "|---|---|---|---:|---:|---:|---|"]
        for r in doc.get("records", []):
            shape = f"{r['m']}×{r['n']}×{r['k']}"
            if "ratio" not in r:
                ours = f"{r['ours_ms']:.4f}" if "ours_ms" in r else "—"
                ref = "torch._scaled_mm" if r["dtype"] in FP8 else "the reference"
                why = f"{ref} refused it: {r['ref_error']}"[:100] if "ours_ms" in r else str(r.get("error", ""))[:80]
                out.append(f"| {r['dtype']} | {shape} | {r['mode']} | {ours} | — | — | {why} |")
                continue
            runs = " / ".join(f"{x['ratio']:.3f}" for x in r.get("runs", []))
            out.append(f"| {r['dtype']} | {shape} | {r['mode']} | {r['ours_ms']:.4f} | {r['ref_ms']:.4f} | "
                       f"{r['ratio']:.3f} | {runs} |")
    return "\n".join(out)


def _form_words(r: dict) -> str:
    """A host µs record's form beside its path (none for the plain 64³ product)."""
    return f", {r['form']} ({r['shape']})" if r.get("form") else ""


def render_decode(dec: dict | None) -> list[str]:
    """The decode table's lines (none without a decode part): each dtype's geometric means on both
    clocks, then every product."""
    if not dec or not dec.get("records"):
        return []
    read = dec.get("read_gbps")
    recs = dec["records"]
    dtypes = list(dict.fromkeys(r["dtype"] for r in recs))
    out = ["", f"Decode as a model calls it ({', '.join(d.upper() for d in dtypes)}; B = Wᵀ): device µs and the bytes "
           "moved (weight, x, y) per second, "
           + (f"against a read bandwidth of {read:.0f} GB/s measured in the same run ({dec.get('read_how')})"
              if read else "no read bandwidth measured") + "; eager ratio beside it. The reference is cuBLAS through "
           "torch" + (" (TF32 off for FP32, whose products run on the SIMT path)." if "fp32" in dtypes else ".")]
    summ = summarise(recs)
    for dtype in dtypes:
        means = [(mode, summ[f"{dtype}/{mode}"]) for mode in ("eager", "device") if f"{dtype}/{mode}" in summ]
        got = [f"{mode} geometric mean {x['geomean']:.3f} over {x['shapes']} (below 0.95: {x['below_095']})"
               for mode, x in means]
        if got:
            out.append(f"- {dtype.upper()}: " + "; ".join(got))
    out += ["", "| model | dtype | M×N×K | device µs (cuBLAS) | device ratio | GB/s (cuBLAS) | % of read | eager ratio |",
            "|---|---|---|---:|---:|---:|---:|---:|"]
    by = {}
    for r in recs:
        by.setdefault((r.get("model"), r["dtype"], r["m"], r["n"], r["k"]), {})[r.get("mode")] = r
    for (model, dtype, m, n, k), modes in by.items():
        d, e = modes.get("device", {}), modes.get("eager", {})
        er = f"{e['ratio']:.3f}" if "ratio" in e else str(e.get("error") or e.get("ref_error", "—"))[:60]
        if "ratio" not in d:  # not timed on the device clock (--modes eager), or an error, or the reference's
            ours = f"{d['ours_ms'] * 1e3:.1f} (—)" if "ours_ms" in d else "—"
            why = str(d.get("error") or d.get("ref_error", "—"))[:60]
            out.append(f"| {model} | {dtype} | {m}×{n}×{k} | {ours} | {why} | — | — | {er} |")
            continue
        share = f"{100 * d['gbps'] / read:.0f}%" if read else "—"
        out.append(f"| {model} | {dtype} | {m}×{n}×{k} | {d['ours_ms'] * 1e3:.1f} ({d['ref_ms'] * 1e3:.1f}) | "
                   f"{d['ratio']:.3f} | {d['gbps']:.0f} ({d['ref_gbps']:.0f}) | {share} | {er} |")
    return out


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("library", help="the library as users call it: eager and device time vs cuBLAS (GPU)")
    p.add_argument("--shapes", default="library", help="a named shape set, held-out[:SEED] (30 shapes drawn afresh: "
                   "today's date is the seed unless one is given), a JSON file or a list (default: library)")
    p.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated, of {', '.join(DTYPES)}")
    p.add_argument("--modes", default="eager,device", help="comma-separated, of eager, device (default: both, eager,device)")
    p.add_argument("--runs", type=positive_int, default=3, help="passes over the set; each figure is their median")
    p.add_argument("--budget", type=positive_float, default=0.3, help="seconds of sampling per shape, dtype and mode")
    p.add_argument("--no-host", action="store_true", help="skip host µs per call")
    p.add_argument("--no-first", action="store_true", help="skip the first-call measurements")
    p.add_argument("--no-decode", action="store_true", help="skip the decode products (B = Wᵀ) and read bandwidth")
    p.add_argument("--decode-dtypes", default=",".join(DECODE_DTYPES),
                   help=f"the decode products' dtypes, comma-separated, of {', '.join(DECODE_DTYPES)} (\"\": no decode part)")
    p.add_argument("--merge", nargs="+", metavar="PART", help="no timing: join parts measured over different dtypes "
                   "into --json (CPU is fine)")
    p.add_argument("--replace", action="store_true", help="with --merge: what a later part measured (a dtype, decode, "
                   "host µs, first calls) replaces an earlier part's, which keeps the rest with its date")
    p.add_argument("--json", help="write the results here")
    p.set_defaults(func=cli_library, measuring={dest: p.get_default(dest) for dest in MEASURING})


def cli_library(args) -> int:
    from . import results

    if args.merge:
        if results.measuring_given("library", args):
            return 2
        return results.merge_files("library", args.merge, args.json, lambda docs: merge(docs, replace=args.replace))
    if args.replace:
        print("tilegemm library: --replace goes with --merge", file=sys.stderr)
        return 2
    dtypes = [d for d in args.dtypes.split(",") if d]  # none (--dtypes ""): decode, host µs, first calls alone
    modes = [x for x in args.modes.split(",") if x]
    decode_dtypes = [d for d in args.decode_dtypes.split(",") if d]
    bad = ([f"dtype {d} (of {', '.join(DTYPES)})" for d in dtypes if d not in DTYPES]
           + [f"mode {x} (of eager, device)" for x in modes if x not in ("eager", "device")]
           + [f"decode dtype {d} (of {', '.join(DECODE_DTYPES)})" for d in decode_dtypes if d not in DECODE_DTYPES])
    if bad:
        print(f"tilegemm library: unknown {'; '.join(bad)}", file=sys.stderr)
        return 2
    try:  # (the arguments, then the GPU: a wrong --shapes said only "none is visible here" on a CPU)
        which, shapes = resolve(args.shapes)
    except (ValueError, FileNotFoundError) as e:
        print(f"tilegemm library: {e}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("tilegemm library: needs torch and triton (pip install 'tilegemm[gpu]')", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("tilegemm library: times the library against cuBLAS on a CUDA GPU; none is visible here",
              file=sys.stderr)
        return 2
    if held_out_seed(which) is not None:
        print(f"shapes: {which}, {len(shapes)} drawn afresh (the same shapes again: --shapes {which})")

    def save(doc):
        results.write_json(args.json, results.dumps(doc))

    doc = run(shapes, dtypes, modes, runs=args.runs, budget_s=args.budget, progress=lambda s: print(s, flush=True),
              with_host=not args.no_host, with_first=not args.no_first, save=save if args.json else None,
              with_decode=not args.no_decode and bool(decode_dtypes), decode_dtypes=decode_dtypes, shape_set=which)
    for key, s in doc["summary"].items():
        print(f"{key:12s} shapes {s['shapes']:3d}  geomean {s['geomean']:.3f}  worst {s['worst']['ratio']:.3f} at "
              f"{'×'.join(map(str, s['worst']['shape']))}  below 0.95: {s['below_095']}")
    for dtype in dtypes:
        if refused(doc["records"], dtype):
            print(f"{dtype:12s} and {refused(doc['records'], dtype)} shapes the reference refused: ours timed alone")
    for line in render_decode(doc.get("decode"))[1:]:
        print(line)
    for r in doc.get("host_us", []):
        print(f"host µs per call, 64³ {r['dtype']:4s} {r['path']}{_form_words(r)}: {r['ours_us']:.1f}   "
              f"{r['ref']} {r['ref_us']:.1f}")
    if args.json:
        print(f"results written to {args.json}")
    return 0


