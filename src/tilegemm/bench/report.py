"""The report, generated from a results document: Markdown tables and PNG plots, nothing typed.

    tilegemm report results/h200/course.json --out results/h200/report

writes report.md beside four plots:
    tflops_vs_size.png   achieved TFLOP/s against problem size, per kernel (log-log)
    pct_cublas.png       each kernel as a % of cuBLAS on the same shape and inputs
    roofline.png         measured ceilings (DRAM bandwidth, FP32 FMA and tensor rates) as roofs;
                         each kernel at its largest size, x = FLOPs / design traffic, y = achieved
    speedup_cpu.png      speed-up of each GPU kernel over the CPU baselines (naive loop, BLAS)
and the tables: per size and kernel median time, spread (IQR), TFLOP/s, % of cuBLAS, % of peak;
the cost model (design traffic, compulsory traffic, the intensity each implies); ceilings; host
overhead per call; clocks; harness settings; the environment.

Ceilings come from the results document's `ceilings` field, else from a ceilings file given
with --ceilings, else from the per-GPU cache that `tilegemm ceilings` writes.
`update_readme()` rewrites the README section between RESULTS_BEGIN and RESULTS_END.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from pathlib import Path

from .results import gpu_name, load

RESULTS_BEGIN = "<!-- results:begin -->"
RESULTS_END = "<!-- results:end -->"
PLOTS = ("tflops_vs_size.png", "pct_cublas.png", "roofline.png", "speedup_cpu.png")
CPU_BASELINES = (("cpu_naive", "CPU naive (1 core)"), ("cpu_blas", "CPU BLAS"))
# Which ceiling a record's dtype is held against (keys of a ceilings document).
PEAK_FOR_DTYPE = {"float32": "fp32_fma", "float64": "fp64", "tf32": "tf32", "float16": "fp16",
                  "bfloat16": "bf16", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}


# ---- small helpers -----------------------------------------------------------------------------

def size_label(m: int, n: int, k: int) -> str:
    return str(m) if m == n == k else f"{m}×{n}×{k}"


def _size_x(r: dict) -> float:
    """Problem size on a plot's x axis: N for cubes, the cube root of M·N·K otherwise."""
    return float(r["m"]) if r["m"] == r["n"] == r["k"] else (r["m"] * r["n"] * r["k"]) ** (1 / 3)


def _f(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e6):
        return f"{int(x)}"
    return f"{x:.{digits}g}"


def _pct(x) -> str:
    return "—" if x is None else f"{x:.1f}%"


def _timed(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("ok") and r.get("median_ms")]


def _series_key(r: dict) -> str:
    return r.get("label") or r["kernel"]


def _shape(r: dict) -> tuple[int, int, int, str]:
    return (r["m"], r["n"], r["k"], r.get("dtype", ""))


def cublas_index(records: list[dict]) -> dict:
    return {_shape(r): r for r in _timed(records) if r["kernel"] == "cublas"}


def pct_of_cublas(r: dict, cublas: dict) -> float | None:
    c = cublas.get(_shape(r))
    if not c or not r.get("median_ms") or r["kernel"] == "cublas":
        return None
    return 100.0 * c["median_ms"] / r["median_ms"]


def ceiling_value(ceilings: dict | None, key: str) -> tuple[float | None, str]:
    """(value, 'measured'|'datasheet'|'') of one ceiling; TFLOP/s, or TB/s for 'dram'."""
    if not ceilings:
        return None, ""
    table = ceilings.get("ceilings") or {}
    c = table.get(key) or {}
    if key == "fp32_fma":  # the FP32 roof is the best FP32 rate measured here, by our FMA kernel or cuBLAS
        best = max(((float(table[k]["measured"]), k) for k in ("fp32_fma", "fp32_cublas")
                    if (table.get(k) or {}).get("measured")), default=None)
        if best:
            return best[0], "measured" if best[1] == "fp32_fma" else "measured, cuBLAS SGEMM"
    if c.get("measured"):
        return float(c["measured"]), "measured"
    if c.get("datasheet"):
        return float(c["datasheet"]), "datasheet"
    return None, ""


def pct_of_peak(r: dict, ceilings: dict | None) -> float | None:
    if r.get("backend") == "cpu" or not r.get("tflops"):
        return None
    peak, _ = ceiling_value(ceilings, PEAK_FOR_DTYPE.get(r.get("dtype", ""), ""))
    return 100.0 * r["tflops"] / peak if peak else None


def find_ceilings(doc: dict, path=None) -> dict | None:
    """The results document's own ceilings, a file, or the cache for the document's GPU."""
    if path:
        from .ceilings import load_ceilings_file

        ceil = load_ceilings_file(path)
        theirs, ours = ceil.get("gpu"), gpu_name(doc)
        if theirs and ours and theirs != ours:  # % of peak and the roofline would hold one GPU to another's roofs
            raise ValueError(f"{path}: ceilings measured on {theirs}, the results on {ours}; give the ceilings of "
                             f"{ours} (`tilegemm ceilings --json` on it)")
        return ceil
    if doc.get("ceilings"):
        return doc["ceilings"]
    name = gpu_name(doc)
    if name:
        from .ceilings import load_cached

        return load_cached(name)
    return None


def _by_series(records):
    out = defaultdict(list)
    for r in records:
        out[_series_key(r)].append(r)
    for rs in out.values():
        rs.sort(key=_size_x)
    return out


# ---- plots -------------------------------------------------------------------------------------

def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _x_label(records) -> str:
    if all(r["m"] == r["n"] == r["k"] for r in records):
        return "N (M = N = K)"
    return "size: (M·N·K)^(1/3)"


def _empty(ax, text):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_tflops(records, path, title="") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    timed = _timed(records)
    for label, rs in _by_series(timed).items():
        style = dict(color="black", linewidth=2.5) if rs[0]["kernel"] == "cublas" else {}
        ax.plot([_size_x(r) for r in rs], [r["tflops"] for r in rs], marker="o", label=label, **style)
    if timed:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(_x_label(timed))
        ax.set_ylabel("TFLOP/s (2·M·N·K / median time)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    else:
        _empty(ax, "no validated, timed records")
    ax.set_title(title or "Achieved rate vs size")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_pct_cublas(records, path, title="") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    cub = cublas_index(records)
    drawn = 0
    for label, rs in _by_series([r for r in _timed(records) if r["kernel"] != "cublas"]).items():
        pts = [(_size_x(r), pct_of_cublas(r, cub)) for r in rs]
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
            drawn += 1
    if drawn:
        ax.axhline(100, color="black", linewidth=1, linestyle="--")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_x_label(_timed(records)))
        ax.set_ylabel("% of cuBLAS (cuBLAS time / kernel time)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    else:
        _empty(ax, "no cuBLAS measurement on the same shapes (cuBLAS needs a GPU and torch)")
    ax.set_title(title or "Each kernel as a percentage of cuBLAS")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def roofline_points(records) -> list[dict]:
    """Each GPU series at its largest validated size: design intensity, achieved TFLOP/s."""
    out = []
    for label, rs in _by_series([r for r in _timed(records) if r.get("backend") != "cpu"]).items():
        r = max(rs, key=lambda r: r["m"] * r["n"] * r["k"])
        if r.get("intensity") and r.get("tflops"):
            out.append(dict(label=label, kernel=r["kernel"], intensity=r["intensity"], tflops=r["tflops"],
                            dtype=r.get("dtype", ""), shape=size_label(r["m"], r["n"], r["k"])))
    return out


def roof(intensity: float, peak_tflops: float, bw_tbs: float) -> float:
    """Attainable TFLOP/s at `intensity` FLOP/byte: min(peak, bandwidth × intensity)."""
    return min(peak_tflops, bw_tbs * intensity)


def plot_roofline(records, ceilings, path, title="") -> Path:
    import numpy as np

    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    pts = roofline_points(records)
    bw, bw_src = ceiling_value(ceilings, "dram")
    keys = ["fp32_fma"] + sorted({PEAK_FOR_DTYPE.get(p["dtype"], "") for p in pts} - {"", "fp32_fma"})
    roofs = [(k, *ceiling_value(ceilings, k)) for k in keys]
    roofs = [(k, v, src) for k, v, src in roofs if v]
    xs = [p["intensity"] for p in pts] + ([v / bw for _, v, _ in roofs] if bw else [])
    if not pts and not (bw and roofs):
        _empty(ax, "nothing to place: no timed GPU records and no ceilings")
    else:
        lo, hi = min(xs + [0.1]) / 2, max(xs + [100.0]) * 2
        x = np.logspace(math.log10(lo), math.log10(hi), 200)
        if bw:
            for key, peak, src in roofs:
                ax.plot(x, [roof(i, peak, bw) for i in x], linewidth=2,
                        label=f"{key}: {peak:.3g} TFLOP/s ({src}), DRAM {bw:.3g} TB/s ({bw_src})")
        else:
            ax.text(0.02, 0.97, "no measured ceilings: run `tilegemm ceilings` on this GPU",
                    transform=ax.transAxes, va="top", fontsize=9)
        for p in pts:
            ax.scatter([p["intensity"]], [p["tflops"]], zorder=3, s=40)
            ax.annotate(f"{p['label']} ({p['shape']})", (p["intensity"], p["tflops"]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity by design (FLOP / byte of design traffic)")
        ax.set_ylabel("TFLOP/s")
        ax.grid(True, which="both", alpha=0.3)
        if bw:
            ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title or "Roofline: each kernel at its largest size under the measured roofs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def speedups(records) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{baseline kernel: {series: [(size, speed-up), ...]}} where both were timed on the same shape."""
    timed = _timed(records)
    out: dict = {}
    for base, _ in CPU_BASELINES:
        bidx = {_shape(r): r for r in timed if r["kernel"] == base}
        series = defaultdict(list)
        for r in timed:
            b = bidx.get(_shape(r))
            if b and r.get("backend") != "cpu":
                series[_series_key(r)].append((_size_x(r), b["median_ms"] / r["median_ms"]))
        out[base] = {k: sorted(v) for k, v in series.items()}
    return out


def plot_speedup(records, path, title="") -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=False)
    sp = speedups(records)
    for ax, (base, base_label) in zip(axes, CPU_BASELINES):
        series = sp.get(base) or {}
        if not series:
            _empty(ax, f"{base_label} not timed on the GPU kernels' shapes")
            ax.set_title(f"over {base_label}")
            continue
        for label, pts in series.items():
            ax.plot(*zip(*pts), marker="o", label=label)
        ax.axhline(1, color="black", linewidth=1, linestyle="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(_x_label(_timed(records)))
        ax.set_ylabel(f"speed-up (time of {base} / time of kernel)")
        ax.set_title(f"over {base_label}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title or "Speed-up over the CPU baselines")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


# ---- tables ------------------------------------------------------------------------------------

def _md_table(headers, rows, left: int = 1) -> str:
    right = ["---:" if i >= left else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(right) + " |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def timing_table(records, ceilings) -> str:
    cub = cublas_index(records)
    rows = []
    shapes: dict = {}
    for r in records:
        shapes.setdefault(_shape(r), []).append(r)
    for (m, n, k, dt), rs in shapes.items():
        for r in rs:
            t = r.get("time") or {}
            if r.get("ok") and r.get("median_ms"):
                iqr = t.get("iqr_ms")
                spread = 100 * iqr / r["median_ms"] if iqr is not None and r["median_ms"] else None
                status = "ok"
                one = t.get("reps") == 1  # one sample (the simulator's GPU columns): no spread to state
                rows.append([size_label(m, n, k), dt, r.get("label") or r["kernel"], _f(r["median_ms"], 4),
                             "— (one sample)" if one else f"{_f(iqr, 2)} ({_pct(spread)})", _f(t.get("reps")), _f(r.get("tflops"), 3),
                             _pct(pct_of_cublas(r, cub)), _pct(pct_of_peak(r, ceilings)), _f(r.get("e2e_ms"), 4),
                             status])
            else:
                status = "WRONG" if r.get("ok") is False else (r.get("note") or "not timed")
                rows.append([size_label(m, n, k), dt, r.get("label") or r["kernel"]] + ["—"] * 7
                            + [status.split("\n")[0][:80]])
    return _md_table(["size", "dtype", "kernel", "median ms", "IQR ms (of median)", "reps", "TFLOP/s",
                      "% of cuBLAS", "% of peak", "matmul() e2e ms", "status"], rows, left=3)


def cost_table(records) -> str:
    """Per kernel at its largest shape: FLOPs, design and compulsory traffic, the intensities."""
    rows = []
    best: dict = {}
    for r in records:
        if r.get("traffic_bytes") and r.get("flops"):
            key = (r["kernel"], r.get("dtype"))
            if key not in best or r["m"] * r["n"] * r["k"] > best[key]["m"] * best[key]["n"] * best[key]["k"]:
                best[key] = r
    for (kern, dt), r in best.items():
        comp = r.get("compulsory_bytes")
        rows.append([r.get("label") or kern, dt, size_label(r["m"], r["n"], r["k"]), _f(r["flops"] / 1e9, 4),
                     _f(r["traffic_bytes"] / 1e6, 4), _f(comp / 1e6 if comp else None, 4),
                     _f(r["traffic_bytes"] / comp if comp else None, 3),
                     _f(r["flops"] / r["traffic_bytes"], 3), _f(r["flops"] / comp if comp else None, 3)])
    return _md_table(["kernel", "dtype", "shape", "GFLOP", "design traffic MB", "compulsory MB",
                      "design / compulsory", "intensity by design (FLOP/B)", "compulsory intensity (FLOP/B)"],
                     rows, left=3)


def cost_model(kernels, shapes, dtype: str = "float32") -> list[dict]:
    """The registry's cost model at given shapes (no measurement): for docs and `tilegemm info`."""
    import numpy as np

    from ..registry import bytes_compulsory

    s = np.dtype(dtype).itemsize
    out = []
    for kern in kernels:
        for m, n, k in shapes:
            fl, tr, comp = kern.flops(m, n, k), kern.traffic(m, n, k, s), bytes_compulsory(m, n, k, s)
            out.append(dict(kernel=kern.name, label=kern.label, m=m, n=n, k=k, dtype=dtype, flops=fl,
                            traffic_bytes=tr, compulsory_bytes=comp, intensity=fl / tr,
                            compulsory_intensity=fl / comp))
    return out


def ceilings_table(ceilings) -> str:
    rows = []
    for key, c in (ceilings.get("ceilings") or {}).items():
        meas, ds = c.get("measured"), c.get("datasheet")
        rows.append([key, c.get("what", ""), c.get("unit", ""), _f(meas, 4), _f(ds, 4),
                     _pct(100 * meas / ds) if meas and ds else "—", c.get("note", "")])
    return _md_table(["ceiling", "what", "unit", "measured", "datasheet", "measured / datasheet", "note"], rows, left=3)


def overhead_table(overhead: dict) -> str:
    rows = [[name, v.get("kernel") or "", _f(v.get("median_us"), 3), f"{_f(v.get('q1_us'), 3)}–{_f(v.get('q3_us'), 3)}",
             _f(v.get("calls"))] for name, v in (overhead.get("results") or {}).items()]
    return _md_table(["call", "kernel", "median µs per call", "IQR µs", "calls"], rows, left=2)


def _kv_table(d: dict) -> str:
    return _md_table(["setting", "value"], [[k, v if not isinstance(v, float) else _f(v, 4)] for k, v in d.items()],
                     left=2)


def clocks_section(clocks: dict | None) -> str:
    if not clocks:
        return "Clocks were not recorded for this run."
    if clocks.get("source") == "unavailable":
        return "Clocks unavailable (no NVML and no nvidia-smi)."
    rows = []
    for when in ("before", "after"):
        c = clocks.get(when) or {}
        rows.append([when, _f(c.get("sm_mhz")), _f(c.get("mem_mhz")), ", ".join(c.get("reasons", [])) or "none",
                     c.get("time", "")])
    text = f"Source: {clocks.get('source')}.\n\n" + _md_table(
        ["when", "SM MHz", "memory MHz", "clock-event reasons", "time"], rows)
    w = clocks.get("warning")
    return text + ("\n\n**Warning:** " + w if w else "\n\nClocks held within "
                   f"{100 * clocks.get('moved_threshold', 0.05):.0f}% and no throttle reason was active.")


def environment_section(env: dict) -> str:
    gpu = env.get("gpu") or {}
    rows = [["date", env.get("date")], ["simulator", env.get("simulator")]]
    rows += [[f"gpu.{k}", v] for k, v in gpu.items()] or [["gpu", "none"]]
    rows += [[f"library.{k}", v] for k, v in (env.get("libraries") or {}).items()]
    rows += [[f"host.{k}", v] for k, v in (env.get("host") or {}).items()]
    return _md_table(["", ""], rows, left=2)


# ---- the report --------------------------------------------------------------------------------

def repeatability_section(records: list[dict]) -> str:
    """Kernels timed twice in one run: do the timings agree within their stated spread, and what
    does the bootstrap comparison of the two sample sets say?"""
    from .compare import decide
    from .table import agreement, repeat_pairs

    rows = []
    for a, b in repeat_pairs(records):
        if not (a.get("time") and b.get("time")):
            continue
        ok, diff, allowed = agreement(a, b)
        verdict, ratio, lo, hi, method = decide(a["time"], b["time"])
        ci = f"[{lo:.4f}, {hi:.4f}]" if lo is not None else "—"
        rows.append([a.get("label") or a["kernel"], size_label(a["m"], a["n"], a["k"]), _f(a["median_ms"], 4),
                     _f(b["median_ms"], 4),
                     _f(diff, 2), _f(allowed, 2), "yes" if ok else "NO", f"{verdict} ({method}, ratio CI {ci})"])
    if not rows:
        return ""
    head = ["kernel", "size", "1st median ms", "2nd median ms", "|difference| ms", "stated spreads ms (sum)",
            "within spread", "bootstrap verdict"]
    lines = ["The same kernel timed twice in one run, on the same inputs.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def render(doc: dict, out_dir, *, ceilings: dict | None = None, title: str | None = None) -> Path:
    """Write report.md and the plots into out_dir; return the report's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recs = doc["records"]
    env = doc.get("environment") or {}
    gpu = gpu_name(doc) or ("Numba CUDA simulator" if env.get("simulator") else "no GPU")
    title = title or f"tilegemm results: {gpu}"
    plot_tflops(recs, out / PLOTS[0], f"Achieved TFLOP/s vs size ({gpu})")
    plot_pct_cublas(recs, out / PLOTS[1], f"% of cuBLAS ({gpu})")
    plot_roofline(recs, ceilings, out / PLOTS[2], f"Roofline ({gpu})")
    plot_speedup(recs, out / PLOTS[3], f"Speed-up over the CPU baselines ({gpu})")
    sim = any(r.get("simulated") for r in recs)
    parts = [f"# {title}", "",
             f"Generated by `tilegemm report` from a `{doc.get('schema')}` document created {doc.get('created')}; "
             "every number below comes from that file.", ""]
    if sim:
        parts += ["> **Simulator run.** Numba CUDA kernels ran in Numba's CUDA simulator (Python threads): "
                  "their times say nothing about GPU speed.", ""]
    cublas = any(r["kernel"] == "cublas" and r.get("median_ms") for r in recs)
    parts += ["## Rate vs size", "", f"![TFLOP/s vs size]({PLOTS[0]})", ""]
    parts += ["## Against cuBLAS", "", f"![% of cuBLAS]({PLOTS[1]})", ""] if cublas else \
        ["## Against cuBLAS", "", "No cuBLAS time in this run (no GPU, or torch without CUDA): nothing to compare "
         "with.", ""]
    parts += ["## Roofline", "",
              "Each kernel at its largest size: x is FLOPs over the traffic its design moves (every load counted, "
              "caches ignored), y the achieved rate. A point above its roof means caches served part of the "
              "design traffic; far below, something other than DRAM bandwidth or FMA rate limits it.", "",
              f"![roofline]({PLOTS[2]})", ""] if not sim else \
        ["## Roofline", "", "None for a simulator run: its rates are Python threads', against no GPU's roofs.", ""]
    parts += ["## Speed-up over the CPU", "", f"![speed-up over CPU]({PLOTS[3]})", "",
              "## Times", "",
              "Median of the samples; IQR = interquartile range (its share of the median in brackets); "
              "% of cuBLAS = cuBLAS time / kernel time on the same shape and inputs; % of peak against the "
              "ceiling for the dtype (measured where available, else datasheet).", "",
              timing_table(recs, ceilings), "",
              "## Cost model", "",
              "Design traffic = every global load and store the kernel's code makes (the registry's `traffic`, "
              "checked against counted accesses by `tilegemm traffic`); compulsory = read A and B once, write C "
              "once. Each kernel at its largest shape.", "",
              cost_table(recs), ""]
    if ceilings:
        cg = ceilings.get("gpu") or "?"
        parts += ["## Ceilings", "", f"Measured on {cg} ({ceilings.get('date', '')}) by `tilegemm ceilings`.", "",
                  ceilings_table(ceilings), ""]
        if ceilings.get("overhead"):
            parts += ["## Host overhead per call", "",
                      f"Wall-clock time for a call to return, {ceilings['overhead'].get('shape', '')} product, "
                      "median over many calls (kernel launches are asynchronous).", "",
                      overhead_table(ceilings["overhead"]), ""]
    else:
        parts += ["## Ceilings", "", "No ceilings for this GPU: run `tilegemm ceilings` on it.", ""]
    rep = repeatability_section(doc["records"])
    if rep:
        parts += ["## Repeatability", "", rep, ""]
    parts += ["## Clocks", "", clocks_section(doc.get("clocks")), "",
              "## Harness", "", _kv_table(doc.get("harness") or {}), "",
              "## Environment", "", environment_section(env), ""]
    path = out / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def readme_section(doc: dict, report_dir, readme_dir) -> str:
    """The README block: the largest size per kernel, and links to the report and its main plot."""
    rel = os.path.relpath(Path(report_dir), Path(readme_dir)).replace(os.sep, "/")
    recs = doc["records"]
    cub = cublas_index(recs)
    best: dict = {}
    for r in _timed(recs):
        key = (_series_key(r), r.get("dtype"))
        if key not in best or r["m"] * r["n"] * r["k"] > best[key]["m"] * best[key]["n"] * best[key]["k"]:
            best[key] = r
    rows = [[lbl, dt, size_label(r["m"], r["n"], r["k"]), _f(r["median_ms"], 4), _f(r["tflops"], 3),
             _pct(pct_of_cublas(r, cub))] for (lbl, dt), r in best.items()]
    gpu = gpu_name(doc) or ("Numba CUDA simulator" if (doc.get("environment") or {}).get("simulator") else "no GPU")
    sim = ["> **Simulator run.** Numba CUDA kernels ran in Numba's CUDA simulator (Python threads): their "
           "times say nothing about GPU speed.", ""] if any(r.get("simulated") for r in recs) else []
    return "\n".join([
        f"Measured on {gpu}, {(doc.get('environment') or {}).get('date', '')} (generated from the results file; "
        f"full report: [{rel}/report.md]({rel}/report.md)).", "", *sim,
        _md_table(["kernel", "dtype", "largest size", "median ms", "TFLOP/s", "% of cuBLAS"], rows), "",
        f"![TFLOP/s vs size]({rel}/{PLOTS[0]})"])


def _readme_markers(p: Path) -> tuple[str, int, int]:
    """The README's text and where its results section's markers are, or a ValueError."""
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:  # (said as "[Errno 2] No such file or directory: 'README.md'", not naming --readme)
        raise FileNotFoundError(f"--readme {p}: no such file") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"--readme {p}: a folder, not a README") from None
    except UnicodeDecodeError:
        raise ValueError(f"--readme {p}: not a README (not UTF-8 text)") from None
    i, j = text.find(RESULTS_BEGIN), text.find(RESULTS_END)
    if i < 0 or j < 0 or j < i:
        raise ValueError(f"{p}: needs the markers {RESULTS_BEGIN} … {RESULTS_END} (in that order) around the "
                         "results section")
    return text, i, j


def update_readme(readme_path, doc: dict, report_dir) -> bool:
    """Replace the text between RESULTS_BEGIN and RESULTS_END; True if the file changed."""
    p = Path(readme_path)
    text, i, j = _readme_markers(p)
    new = text[: i + len(RESULTS_BEGIN)] + "\n" + readme_section(doc, report_dir, p.parent) + "\n" + text[j:]
    if new != text:
        p.write_text(new, encoding="utf-8")
    return new != text


# ---- CLI ----------------------------------------------------------------------------------------

def add_cli(subparsers) -> None:
    p = subparsers.add_parser("report", help="Markdown report with plots from a results JSON")
    p.add_argument("results", help="results JSON (schema tilegemm.results/1)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: report/ beside the results file)")
    p.add_argument("--ceilings", metavar="PATH", help="ceilings JSON (default: the results' own, else the cache)")
    p.add_argument("--readme", metavar="README.md", help="also rewrite the README's results section")
    p.set_defaults(func=cli_report)


def cli_report(args) -> int:
    doc = load(args.results, measured=True)
    out = Path(args.out) if args.out else Path(args.results).parent / "report"
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: a file, not a folder (the report is a folder of Markdown and plots)")
    from .results import check_writable

    try:  # (each file the report writes, before the first: report.md a folder left the plots written and no report)
        for name in ("report.md", *PLOTS):
            check_writable(out / name)
    except OSError as e:
        raise OSError(f"--out {out}: {e}") from None
    if args.readme:  # said before the report is written, not after
        _readme_markers(Path(args.readme))
    ceilings = find_ceilings(doc, args.ceilings)
    path = render(doc, out, ceilings=ceilings)
    print(f"wrote {path} and {', '.join(PLOTS)} in {out}")
    if args.readme:
        changed = update_readme(args.readme, doc, out)
        print(f"{args.readme}: results section {'updated' if changed else 'unchanged'}")
    return 0
