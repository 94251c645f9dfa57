"""What this GPU can do at best, measured: DRAM bandwidth, FP32 FMA rate, tensor-core rates.

    tilegemm ceilings [--json PATH] [--quick]

- DRAM: a large device-to-device copy (torch `copy_`, 2 GiB each way; Numba if torch is absent),
  counting bytes read plus bytes written.
- FP32 FMA: `fma_chains`, a Numba kernel in which every thread runs CHAINS independent chains of
  a ← a·b + c (cuda.fma), enough blocks to fill every SM several times over. FLOPs = 2 per FMA.
- Tensor cores and cuBLAS: torch.mm at 8192³ in FP32 (TF32 off, the SGEMM yardstick), TF32,
  FP16, BF16, FP64, and FP8 (e4m3) through torch._scaled_mm where this torch and GPU have it.
Each figure is a median of device-event timed samples (bench.timing.measure). Beside each: the
datasheet value for this GPU from DATASHEET (dense, no sparsity), or "n/a" for GPUs not listed.

The result is cached per GPU in tilegemm's cache directory (`tilegemm.env.cache_dir`:
$TILEGEMM_CACHE_DIR or ~/.cache/tilegemm; ceilings-<gpu>.json), and written to --json when
given, for `tilegemm report`'s roofline.
Under Numba's CUDA simulator there is nothing to measure: the command says so and exits 2.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np

from .. import _cuda

cuda = _cuda.cuda  # GPU or simulator decided first, then numba.cuda bound to it
from numba import float32  # noqa: E402

SCHEMA = "tilegemm.ceilings/1"
CHAINS = 16  # independent FMA chains per thread: enough to hide the FMA latency at full occupancy
SQUARE = 8192

# Datasheet peaks, dense (TFLOP/s; dram in TB/s). NVIDIA H100/H200 SXM datasheets: the two share
# the GH100 compute figures and differ in memory (HBM3 3.35 TB/s vs HBM3e 4.8 TB/s).
_HOPPER_SXM = dict(fp32_fma=67.0, fp32_cublas=67.0, tf32=495.0, fp16=989.0, bf16=989.0, fp8=1979.0, fp64=67.0)
DATASHEET = {
    "H200": dict(_HOPPER_SXM, dram=4.8),
    "H100 SXM": dict(_HOPPER_SXM, dram=3.35),
}
WHAT = {
    "dram": ("TB/s", "device-to-device copy, bytes read + written"),
    "fp32_fma": ("TFLOP/s", "FP32 FMA throughput (Numba kernel, CUDA cores)"),
    "fp32_cublas": ("TFLOP/s", f"cuBLAS FP32 SGEMM (TF32 off), {SQUARE}³"),
    "tf32": ("TFLOP/s", f"cuBLAS TF32, {SQUARE}³"),
    "fp16": ("TFLOP/s", f"cuBLAS FP16, {SQUARE}³"),
    "bf16": ("TFLOP/s", f"cuBLAS BF16, {SQUARE}³"),
    "fp8": ("TFLOP/s", f"FP8 e4m3 torch._scaled_mm → BF16, {SQUARE}³"),
    "fp64": ("TFLOP/s", f"cuBLAS FP64, {SQUARE}³"),
}


class NeedsGPU(RuntimeError):
    pass


def datasheet_key(gpu_name: str | None) -> str | None:
    """'NVIDIA H200' -> 'H200'; 'NVIDIA H100 80GB HBM3' -> 'H100 SXM'; others (PCIe, NVL...) -> None."""
    name = (gpu_name or "").upper()
    if "H200" in name:
        return "H200"
    if "H100" in name and "PCIE" not in name and "NVL" not in name:
        return "H100 SXM"
    return None


def datasheet(gpu_name: str | None) -> dict:
    return DATASHEET.get(datasheet_key(gpu_name) or "", {})


# ---- the FP32 FMA kernel -----------------------------------------------------------------------

@cuda.jit
def fma_chains(out, iters, b, c, seed):
    """out[i] = sum over CHAINS chains of `iters` steps a ← fma(a, b, c), a₀ = seed + i mod 64 + j."""
    i = cuda.grid(1)
    base = float32(seed + (i % 64))
    a0 = base
    a1 = base + float32(1)
    a2 = base + float32(2)
    a3 = base + float32(3)
    a4 = base + float32(4)
    a5 = base + float32(5)
    a6 = base + float32(6)
    a7 = base + float32(7)
    a8 = base + float32(8)
    a9 = base + float32(9)
    a10 = base + float32(10)
    a11 = base + float32(11)
    a12 = base + float32(12)
    a13 = base + float32(13)
    a14 = base + float32(14)
    a15 = base + float32(15)
    for _ in range(iters):
        a0 = cuda.fma(a0, b, c)
        a1 = cuda.fma(a1, b, c)
        a2 = cuda.fma(a2, b, c)
        a3 = cuda.fma(a3, b, c)
        a4 = cuda.fma(a4, b, c)
        a5 = cuda.fma(a5, b, c)
        a6 = cuda.fma(a6, b, c)
        a7 = cuda.fma(a7, b, c)
        a8 = cuda.fma(a8, b, c)
        a9 = cuda.fma(a9, b, c)
        a10 = cuda.fma(a10, b, c)
        a11 = cuda.fma(a11, b, c)
        a12 = cuda.fma(a12, b, c)
        a13 = cuda.fma(a13, b, c)
        a14 = cuda.fma(a14, b, c)
        a15 = cuda.fma(a15, b, c)
    if i < out.shape[0]:
        out[i] = (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))) + \
                 (((a8 + a9) + (a10 + a11)) + ((a12 + a13) + (a14 + a15)))


def fma_reference(n_threads: int, iters: int, b: float, c: float, seed: int) -> np.ndarray:
    """What fma_chains writes, computed on the host in float64 (exact for dyadic b, c and few iters)."""
    out = np.empty(n_threads)
    for i in range(n_threads):
        tot = 0.0
        for j in range(CHAINS):
            a = float(seed + (i % 64) + j)
            for _ in range(iters):
                a = a * b + c
            tot += a
        out[i] = tot
    return out


def run_fma(blocks: int, threads: int, iters: int, b: float = 0.5, c: float = 1.0, seed: int = 0):
    cuda = _cuda.cuda
    out = cuda.device_array(blocks * threads, dtype=np.float32)
    fma_chains[blocks, threads](out, np.int32(iters), np.float32(b), np.float32(c), np.int32(seed))
    return out


def fma_flops(blocks: int, threads: int, iters: int) -> float:
    return 2.0 * CHAINS * iters * blocks * threads


# ---- measurements ------------------------------------------------------------------------------

def _measure(run, framework: str, budget_s: float):
    from .timing import DeviceClock, measure

    return measure(run, clock=DeviceClock(framework), flush=None, warmup_s=0.2, budget_s=budget_s,
                   target_rse=0.005, max_reps=100)


def measure_dram(nbytes: int = 2 << 30, budget_s: float = 1.0) -> dict:
    try:
        import torch

        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(1)
        dst = torch.empty_like(src)
        t = _measure(lambda: dst.copy_(src), "torch", budget_s)
        del src, dst
        how = f"torch copy_ of {nbytes / 2**30:.0f} GiB"
    except ImportError:
        cuda = _cuda.cuda
        src = cuda.to_device(np.ones(nbytes, dtype=np.uint8))
        dst = cuda.device_array(nbytes, dtype=np.uint8)
        t = _measure(lambda: dst.copy_to_device(src), "numba", budget_s)
        how = f"Numba device-to-device copy of {nbytes / 2**30:.0f} GiB"
    return dict(measured=2 * nbytes / (t.median_ms * 1e-3) / 1e12, note=how, timing=t.to_dict(samples=False))


def measure_fma(budget_s: float = 1.0, target_ms: float = 10.0) -> dict:
    dev = _cuda.cuda.get_current_device()
    sms = int(dev.MULTIPROCESSOR_COUNT)
    threads, blocks = 256, sms * 8 * 4  # 8 blocks of 256 = 2048 threads/SM resident, four waves
    probe = 1000
    run_fma(blocks, threads, probe)
    _cuda.cuda.synchronize()
    t0 = time.perf_counter()
    run_fma(blocks, threads, probe)
    _cuda.cuda.synchronize()
    per_iter_ms = (time.perf_counter() - t0) * 1e3 / probe
    iters = int(max(1000, min(200_000, target_ms / max(per_iter_ms, 1e-9))))
    out = _cuda.cuda.device_array(blocks * threads, dtype=np.float32)
    kern = fma_chains[blocks, threads]
    args = (out, np.int32(iters), np.float32(0.5), np.float32(1.0), np.int32(0))
    t = _measure(lambda: kern(*args), "numba", budget_s)
    return dict(measured=fma_flops(blocks, threads, iters) / (t.median_ms * 1e-3) / 1e12,
                note=f"{blocks} blocks × {threads} threads × {CHAINS} chains × {iters} FMA",
                timing=t.to_dict(samples=False))


def measure_mm(kind: str, n: int = SQUARE, budget_s: float = 1.0) -> dict:
    import torch

    flops = 2.0 * n**3
    prev = torch.backends.cuda.matmul.allow_tf32
    try:
        if kind == "fp8":
            if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
                return dict(measured=None, note="this torch has no torch._scaled_mm / float8_e4m3fn")
            if torch.cuda.get_device_capability() < (8, 9):
                return dict(measured=None, note="FP8 needs sm_89 or newer")
            a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as required
            one = torch.tensor(1.0, device="cuda")

            def run():
                torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        else:
            dt = {"fp32_cublas": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                  "bf16": torch.bfloat16, "fp64": torch.float64}[kind]
            torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)
            c = torch.empty(n, n, device="cuda", dtype=dt)

            def run():
                torch.mm(a, b, out=c)
        t = _measure(run, "torch", budget_s)
        return dict(measured=flops / (t.median_ms * 1e-3) / 1e12, note=f"{n}³", timing=t.to_dict(samples=False))
    except Exception as e:  # noqa: BLE001  (one unsupported dtype must not lose the others)
        return dict(measured=None, note=f"failed: {type(e).__name__}: {e}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
        torch.cuda.empty_cache()


def measure_all(*, quick: bool = False, overhead: bool = True, progress=print) -> dict:
    """Every ceiling on the current GPU. ~30-60 s on an H200 (quick: smaller budgets, 4096³)."""
    if not _cuda.has_gpu():
        raise NeedsGPU("ceilings need a CUDA GPU: this process runs Numba's CUDA simulator"
                       if _cuda.SIMULATOR else "ceilings need a CUDA GPU and none was found")
    from .results import environment

    env = environment()
    name = env["gpu"]["name"]
    sheet = datasheet(name)
    budget = 0.3 if quick else 1.0
    n = 4096 if quick else SQUARE
    out: dict = {}

    def put(key, res):
        unit, what = WHAT[key]
        if key != "dram" and key != "fp32_fma" and n != SQUARE:
            what = what.replace(f"{SQUARE}³", f"{n}³")
        out[key] = dict(what=what, unit=unit, datasheet=sheet.get(key), **res)
        m = res.get("measured")
        progress(f"  {key:12s} {('%.4g' % m) if m else 'n/a':>8s} {unit:8s} datasheet "
                 f"{sheet.get(key, 'n/a')}  {res.get('note', '')}")

    progress(f"ceilings of {name} (datasheet row: {datasheet_key(name) or 'n/a'})")
    put("dram", measure_dram(budget_s=budget))
    put("fp32_fma", measure_fma(budget_s=budget))
    try:
        import torch  # noqa: F401

        for key in ("fp32_cublas", "tf32", "fp16", "bf16", "fp8", "fp64"):
            put(key, measure_mm(key, n=n, budget_s=budget))
    except ImportError:
        progress("  torch not importable: cuBLAS and tensor-core rates not measured")
    doc = dict(schema=SCHEMA, gpu=name, date=env["date"], datasheet_row=datasheet_key(name), environment=env,
               ceilings=out)
    if overhead:
        from .overhead import measure_overhead

        try:
            doc["overhead"] = measure_overhead(progress=progress)
        except Exception as e:  # noqa: BLE001  (the ceilings above are worth keeping)
            progress(f"  overhead not measured: {type(e).__name__}: {e}")
    return doc


# ---- cache -------------------------------------------------------------------------------------

def cache_dir() -> Path:
    from .. import env

    return Path(env.cache_dir())


def cache_path(gpu_name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", gpu_name).strip("-").lower() or "gpu"
    return cache_dir() / f"ceilings-{slug}.json"


def save(doc: dict, path=None) -> list[Path]:
    """Write to the per-GPU cache, and to `path` too when given."""
    from .results import _clean, write_json

    text = json.dumps(_clean(doc), indent=1, allow_nan=False, ensure_ascii=False) + "\n"
    paths = [cache_path(doc["gpu"])] + ([Path(path)] if path else [])
    for p in paths:
        write_json(p, text)  # (its folder made; whole or not at all; /dev/stdout written through)
    return paths


def load_ceilings_file(path) -> dict:
    from .results import read_json, shape_problem

    doc = read_json(path, "ceilings file")
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {doc.get('schema') if isinstance(doc, dict) else None!r}; expected "
                         f"{SCHEMA!r} (a file `tilegemm ceilings --json` wrote)")
    problem = shape_problem(doc)  # (its ceilings and overhead objects: a list there was an AttributeError in report)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return doc


def load_cached(gpu_name: str) -> dict | None:
    """This GPU's cached ceilings, or None: none cached, or a cache file that cannot be read, which
    is ignored with a warning (the next `tilegemm ceilings` rewrites it), as tilegemm's other caches
    are; it stopped `report`, and `bench --json` after its sweep."""
    import warnings

    p = cache_path(gpu_name)
    if not p.exists():
        return None
    try:
        return load_ceilings_file(p)
    except (OSError, ValueError) as e:
        warnings.warn(f"tilegemm: ignoring the ceilings cache {p} ({e}); `tilegemm ceilings` rewrites it",
                      RuntimeWarning, stacklevel=2)
        return None


# ---- CLI ----------------------------------------------------------------------------------------

def add_cli(subparsers) -> None:
    p = subparsers.add_parser("ceilings", help="measure DRAM bandwidth, FP32 FMA and tensor-core peaks of this GPU")
    p.add_argument("--json", metavar="PATH", help="also write the ceilings here (always cached per GPU)")
    p.add_argument("--quick", action="store_true", help="shorter budgets and 4096³ products")
    p.add_argument("--no-overhead", action="store_true", help="skip the host overhead per call measurement")
    p.set_defaults(func=cli_ceilings)


def cli_ceilings(args) -> int:
    import sys

    try:
        doc = measure_all(quick=args.quick, overhead=not args.no_overhead)
    except NeedsGPU as e:
        print(f"tilegemm ceilings: {e}. Run it on a machine with an NVIDIA GPU.", file=sys.stderr)
        return 2
    for p in save(doc, args.json):
        print(f"wrote {p}")
    return 0
