"""Hardware counters of one GEMM kernel beside cuBLAS's, read by Nsight Compute (`ncu`).

    tilegemm counters --kernels unrolled,cublas --size 4096 --json results/h200/counters.json

Each target runs in a child process under `ncu --set full`: the child builds its operands, runs
the kernel once outside the profiled range (JIT compile, k11's search-cache lookup), then once
between `cudaProfilerStart` and `cudaProfilerStop`, so the one profiled launch is the product
itself. ncu replays that launch once per counter pass (memory saved and restored between passes)
and leaves the clocks alone (`--clock-control none`, as METHOD.md asks: the counters then see the
clocks the timings saw). A target is a registered SIMT kernel (`unrolled`, `autotuned`, ...), a
configuration of a rung that has one (`unrolled:BK=16:min_blocks=1`), or `cublas` (torch.mm in FP32
with TF32 off: cuBLAS's SGEMM).

The record keeps the metrics `KEEP` names of what ncu reported (the raw page); `ROWS` is what
the ladder page shows of them, side by side: time, issue-slot use and mix, the stall reasons per
issued instruction, occupancy, shared-memory bank conflicts and local-memory (spill) traffic.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

from .. import registry

CUBLAS = "cublas"
BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
NCU_ARGS = ("--clock-control", "none", "--profile-from-start", "off", "--set", "full",
            "--csv", "--page", "raw", "--print-units", "base")
# What a record keeps of ncu's ~2,200 metrics (the rest is a re-run away): launch facts, time and
# clocks, issue and pipe use, warps, instruction and shared/local/global access counts, bank
# conflicts, the memory hierarchy's totals, and every stall reason (smsp__average_warps_issue_stalled_…).
KEEP = re.compile(r"(launch__|gpu__time_duration|sm__cycles_elapsed\.avg\.per_second|smsp__issue_active|sm__inst_|"
                  r"sm__pipe_|smsp__inst_executed\.sum|sm__warps_active|sm__maximum_warps|smsp__average_warp|"
                  r"smsp__sass_inst_executed_op_|l1tex__data_bank_conflicts|dram__bytes|lts__t_sector_hit_rate)")
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio")

def _m(name):
    return lambda r: r.get(name)


def _scaled(name, scale):
    return lambda r: r[name] * scale if isinstance(r.get(name), (int, float)) else None


# (label, how to read it from a record's metrics, format). A reader returns None where ncu
# did not report what it needs, and the table leaves a row out that no target has.
ROWS = (
    ("duration (ms)", _scaled("gpu__time_duration.sum", 1e-6), "{:.3f}"),
    ("SM clock (GHz)", _scaled("sm__cycles_elapsed.avg.per_second", 1e-9), "{:.2f}"),
    ("registers / thread", _m("launch__registers_per_thread"), "{:.0f}"),
    ("threads / block", _m("launch__block_size"), "{:.0f}"),
    ("warps / SM: resident limit", _m("sm__maximum_warps_avg_per_active_cycle"), "{:.0f}"),
    ("warps / SM: achieved", _m("sm__warps_active.avg.per_cycle_active"), "{:.1f}"),
    ("issue slots busy", _m("smsp__issue_active.avg.pct_of_peak_sustained_active"), "{:.1f}%"),
    ("FMA pipe busy", _m("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"), "{:.1f}%"),
    ("instructions (warp)", _m("smsp__inst_executed.sum"), "{:.3g}"),
    ("FFMA share of instructions (M·N·K/32 FFMA)", lambda r: r.get("ffma_warp_inst") and
     r.get("smsp__inst_executed.sum") and 100 * r["ffma_warp_inst"] / r["smsp__inst_executed.sum"], "{:.1f}%"),
    ("cycles between a warp's issues", _m("smsp__average_warp_latency_per_inst_issued.ratio"), "{:.2f}"),
    ("shared loads (warp)", _m("smsp__sass_inst_executed_op_shared_ld.sum"), "{:.3g}"),
    ("shared-memory bank conflicts", _m("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"), "{:.3g}"),
    ("local loads: spills (warp)", _m("smsp__sass_inst_executed_op_local_ld.sum"), "{:.3g}"),
    ("DRAM read (GB)", _scaled("dram__bytes_read.sum", 1e-9), "{:.2f}"),
    ("L2 hit rate", _m("lts__t_sector_hit_rate.pct"), "{:.1f}%"),
)


def _number(text: str):
    t = text.replace(",", "").strip()
    try:
        return float(t)
    except ValueError:
        return text


def parse_raw_csv(text: str) -> list[dict]:
    """ncu's `--csv --page raw` output (one row per profiled launch; a units row under the header,
    which is dropped) → one dict of metric → value per launch, numbers as floats."""
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    if not rows:
        return []
    head, body = rows[0], rows[1:]
    ident = head.index("ID") if "ID" in head else 0
    out = []
    for row in body:
        if len(row) <= ident or not row[ident].strip():  # the units row has no launch ID
            continue
        out.append({h: _number(v) for h, v in zip(head, row)})
    return out


def stalls(metrics: dict) -> dict[str, float]:
    """The warps stalled per issued instruction, by reason (ncu's Warp State Statistics), without
    "selected" (the issuing warp itself: 1 by definition)."""
    out = {}
    for name, v in metrics.items():
        m = STALL.fullmatch(name)
        if m and isinstance(v, float) and m.group(1) != "selected" and not m.group(1).endswith("_pred_on"):
            out[m.group(1)] = v
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


# ---------------------------------------------------------------------------------------------
# the child: one product, profiled alone


def _parse_target(target: str):
    """'name' or 'name:FIELD=value:...' → (registered kernel or None for cuBLAS, overrides)."""
    name, *items = target.split(":")
    overrides = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"bad override {item!r} in {target!r}: FIELD=value")
        overrides[key.strip()] = value.strip()
    if name == CUBLAS:
        if overrides:
            raise ValueError("cublas takes no configuration")
        return None, {}
    kernel = registry.get(name)
    if kernel.backend != "simt" or not kernel.supports("float32"):
        raise ValueError(f"{name} is not an FP32 SIMT kernel: counters profile the SIMT ladder and cuBLAS's SGEMM")
    return kernel, overrides


def check_targets(targets: list[str]) -> None:
    """Refuse a bad name, field or configuration here, with one line, before ncu starts a child."""
    for target in targets:
        kernel, overrides = _parse_target(target)
        if kernel is not None:
            _launcher(kernel, overrides)


def _launcher(kernel, overrides: dict):
    """The kernel's launch, or (with overrides) its module's `launch_config` with the changed Config."""
    if not overrides:
        return kernel.launch
    import importlib

    mod = importlib.import_module(kernel.module)
    if not hasattr(mod, "launch_config"):
        raise ValueError(f"{kernel.name} has no configuration to change")
    base = mod.DEFAULT
    fields = [f.name for f in dataclasses.fields(base)]
    changes = {}
    for key, value in overrides.items():
        if key not in fields:
            raise ValueError(f"{kernel.name}'s Config has no field {key!r} (it has {', '.join(fields)})")
        current = getattr(base, key)
        if isinstance(current, bool):
            if value.lower() not in BOOLS:
                raise ValueError(f"{key}={value}: a yes or no ({', '.join(BOOLS)})")
            changes[key] = BOOLS[value.lower()]
        else:
            try:
                changes[key] = type(current)(value)
            except ValueError:
                what = {int: "a whole number", float: "a number"}.get(type(current), type(current).__name__)
                raise ValueError(f"{key}={value}: {kernel.name}'s {key} is {what} (its default: {current!r})") from None
    cfg = dataclasses.replace(base, **changes)
    cfg.check()
    return lambda a, b, c, stream=None: mod.launch_config(cfg, a, b, c, stream)


def _child(target: str, m: int, n: int, k: int) -> int:
    import numpy as np

    kernel, overrides = _parse_target(target)
    rng = np.random.default_rng(0)
    a_h = rng.standard_normal((m, k), dtype=np.float32)
    b_h = rng.standard_normal((k, n), dtype=np.float32)
    if kernel is None:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        a, b = torch.from_numpy(a_h).cuda(), torch.from_numpy(b_h).cuda()
        c = torch.empty((m, n), dtype=torch.float32, device="cuda")

        def run():
            torch.mm(a, b, out=c)
        sync, start, stop = torch.cuda.synchronize, torch.cuda.profiler.start, torch.cuda.profiler.stop
    else:
        from numba import cuda

        launch = _launcher(kernel, overrides)
        a, b = cuda.to_device(a_h), cuda.to_device(b_h)
        c = cuda.device_array((m, n), dtype=np.float32)

        def run():
            launch(a, b, c, None)
        sync, start, stop = cuda.synchronize, cuda.profile_start, cuda.profile_stop
    run()  # compile and load, outside the profiled range
    sync()
    start()
    run()
    sync()
    stop()
    return 0


# ---------------------------------------------------------------------------------------------
# the parent


def ncu_path() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for root in ("/usr/local/cuda/bin", "/opt/nvidia/nsight-compute"):
        if os.path.isdir(root):
            for dirpath, _, files in os.walk(root):
                if "ncu" in files:
                    return os.path.join(dirpath, "ncu")
    return None


def profile(target: str, shape: tuple[int, int, int], ncu: str, timeout_s: float = 300) -> dict:
    """Run `target` at `shape` under ncu; the record of its profiled launches (normally one)."""
    m, n, k = shape
    cmd = [ncu, *NCU_ARGS, sys.executable, "-m", "tilegemm.bench.counters", "--child", target, str(m), str(n), str(k)]
    rec = {"target": target, "m": m, "n": n, "k": k}
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        rec["error"] = f"ncu did not finish in {timeout_s:.0f} s"
        return rec
    launches = parse_raw_csv(run.stdout)
    rec["returncode"] = run.returncode
    if not launches or run.returncode:
        rec["error"] = (run.stderr.strip() or run.stdout.strip())[-2000:] or "ncu reported no launch"
        return rec
    if len(launches) > 1:  # cuBLAS may launch a helper; the product is the longest launch
        launches.sort(key=lambda r: -(r.get("gpu__time_duration.sum") or 0))
    main = launches[0]
    rec["kernel_name"] = main.get("Kernel Name")
    rec["launches"] = [r.get("Kernel Name") for r in launches]
    rec["metrics"] = {h: v for h, v in main.items() if isinstance(v, float) and KEEP.match(h)}
    rec["metrics"]["ffma_warp_inst"] = m * n * k / 32  # one FFMA per (i, j, p), 32 lanes a warp instruction
    return rec


def collect(targets: list[str], shape, ncu: str | None = None) -> dict:
    from .. import _cuda
    from .results import environment

    check_targets(targets)
    if not _cuda.has_gpu():
        raise RuntimeError("counters need a CUDA GPU and Nsight Compute (ncu); this machine has no GPU")
    ncu = ncu or ncu_path()
    if not ncu:
        raise RuntimeError("counters need Nsight Compute: no `ncu` on PATH")
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return {"schema": "tilegemm-counters/1", "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "environment": environment(), "ncu": version[-1] if version else "?", "ncu_args": list(NCU_ARGS),
            "records": [profile(t, shape, ncu) for t in targets]}


# ---------------------------------------------------------------------------------------------
# the table


def table_md(doc: dict, top_stalls: int = 6) -> list[str]:
    """ROWS and the largest stall reasons, one column per target (Markdown lines)."""
    recs = [r for r in doc.get("records", []) if "metrics" in r]
    if not recs:
        return []
    out = ["| counter | " + " | ".join(f"`{r['target']}`" for r in recs) + " |",
           "|---|" + "---:|" * len(recs)]
    for label, read, fmt in ROWS:
        cells = []
        for r in recs:
            v = read(r["metrics"])
            cells.append(fmt.format(v) if isinstance(v, (int, float)) else "—")
        if any(c != "—" for c in cells):
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    by = [stalls(r["metrics"]) for r in recs]
    reasons = list(dict.fromkeys(reason for s in by for reason in list(s)[:top_stalls]))
    for reason in reasons:
        cells = [f"{s[reason]:.2f}" if reason in s else "—" for s in by]
        out.append(f"| stalled: {reason.replace('_', ' ')} (warps per issue) | " + " | ".join(cells) + " |")
    return out


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("counters", help="Nsight Compute counters of SIMT rungs beside cuBLAS (GPU)")
    p.add_argument("--kernels", default="unrolled,cublas",
                   help="targets: registered SIMT kernels, configurations NAME:FIELD=value:..., cublas")
    p.add_argument("--size", default="4096", help="N (square) or MxNxK")
    p.add_argument("--json", help="write the records here")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from .shapes import parse_shape

    shape = parse_shape(args.size)
    doc = collect([t.strip() for t in args.kernels.split(",") if t.strip()], shape)
    if args.json:
        from .results import write_json

        write_json(args.json, json.dumps(doc, indent=1) + "\n")  # (its folder made; /dev/stdout written through)
    print("\n".join(table_md(doc)))
    bad = [r for r in doc["records"] if "error" in r]
    for r in bad:
        print(f"{r['target']}: {r['error'].splitlines()[-1] if r['error'] else 'failed'}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2], *map(int, sys.argv[3:6])))
    sys.exit("usage: python -m tilegemm.bench.counters --child TARGET M N K")
