"""The comparison table, drawn from sweep records (never typed by hand)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

CPU_NAIVE = "cpu_naive"


def size_label(m: int, n: int, k: int) -> str:
    return str(m) if m == n == k else f"{m}×{n}×{k}"


def _cell(rec: dict | None) -> str:
    if rec is None:
        return "—"
    if rec.get("ok") is False:
        return "[red]WRONG[/]" if not rec.get("note", "").startswith("error") else "[red]error[/]"
    if rec.get("median_ms") is None:
        note = rec.get("note", "")
        return "skipped" if note.startswith("skipped") else "—"
    t = rec["time"]
    spread = 100 * _spread(t) / t["median_ms"] if t["median_ms"] else 0
    pct = f"{spread:.1f}" if spread < 1 else f"{spread:.0f}"
    return f"{rec['median_ms']:.3g} [dim]±{pct}%[/]" if t["reps"] > 3 else f"{rec['median_ms']:.3g}"


def _spread(t: dict) -> float:
    """The stated ± of a timing (older result files lack spread_ms: half the IQR)."""
    return t["spread_ms"] if "spread_ms" in t else (t["q3_ms"] - t["q1_ms"]) / 2


def columns(records: list[dict]) -> list[tuple[str, str]]:
    """(kernel, header) in first-seen order, cuBLAS last."""
    seen: dict[str, str] = {}
    for r in records:
        if r["kernel"] != "cublas":
            seen.setdefault(r.get("column", r["kernel"]), r["label"])
    cols = list(seen.items())
    if any(r["kernel"] == "cublas" for r in records):
        cols.append(("cublas", "cuBLAS (torch)"))
    return cols


def best_ours(rs: list[dict]) -> dict | None:
    """Fastest validated GPU kernel of ours at one shape (teaching kernels included: measured is measured)."""
    mine = [r for r in rs if r["backend"] in ("simt", "tensorcore") and r.get("ok") and r.get("median_ms")]
    return min(mine, key=lambda r: r["median_ms"]) if mine else None


WIDE = 12  # more kernels than this: a row per kernel (a column each cut every header, at any width)
SUMMARY = ("best GFLOP/s (ours)", "best vs CPU naive", "matmul() e2e, copies incl.")


def _summary(rs: list[dict], simulated: bool) -> tuple[str, str, str]:
    """One shape's SUMMARY cells: our best rate (and kernel), its speed-up over CPU naive, matmul()'s time."""
    by = {r.get("column", r["kernel"]): r for r in rs}
    best, cpu = best_ours(rs), by.get(CPU_NAIVE)
    gflops = f"{best['tflops'] * 1e3:,.4g} [dim]({best['kernel']})[/]" if best else "—"
    speed = f"×{cpu['median_ms'] / best['median_ms']:,.3g}" if best and cpu and cpu.get("median_ms") else "—"
    if simulated:
        gflops = speed = "[dim]simulated[/]"
    e2e = next((r for r in rs if r.get("e2e_ms")), None)
    return gflops, speed, f"{e2e['e2e_ms']:.3g} [dim]({e2e['kernel']})[/]" if e2e else "—"


def build_table(records: list[dict], title: str = "", simulated: bool = False) -> Table:
    """A row per size and a column per kernel; past WIDE kernels (--kernels simt, all) a row per
    kernel and a column per size."""
    cols = columns(records)
    shapes: dict = {}
    for r in records:
        shapes.setdefault((r["m"], r["n"], r["k"]), []).append(r)
    table = Table(title=title + " — median ms per product", header_style="bold", show_lines=False)
    if len(cols) > WIDE:
        table.add_column("kernel", justify="left", no_wrap=True)
        for m, n, k in shapes:
            table.add_column(size_label(m, n, k), justify="right")
        by = [{r.get("column", r["kernel"]): r for r in rs} for rs in shapes.values()]
        for name, header in cols:
            table.add_row(header, *[_cell(b.get(name)) for b in by])
        table.add_section()
        for what, cells in zip(SUMMARY, zip(*[_summary(rs, simulated) for rs in shapes.values()])):
            table.add_row(what, *cells)
        return table
    table.add_column("size", justify="right")
    for _, header in cols:
        table.add_column(header, justify="right")
    for what in SUMMARY:
        table.add_column(what, justify="right")
    for (m, n, k), rs in shapes.items():
        by = {r.get("column", r["kernel"]): r for r in rs}
        table.add_row(size_label(m, n, k), *[_cell(by.get(name)) for name, _ in cols], *_summary(rs, simulated))
    return table


def footnotes(records: list[dict], simulated: bool) -> list[str]:
    notes = []
    if simulated:
        notes.append("[bold yellow]GPU columns ran under Numba's CUDA SIMULATOR (no GPU here): one OS thread per "
                     "CUDA thread. Simulated times are not GPU times; they show that the kernels are correct, "
                     "not how fast they are.[/]")
    comp = {}
    for r in records:
        if r.get("compile_ms") is not None:
            comp.setdefault(r["kernel"], r["compile_ms"])
    if comp and not simulated:
        notes.append("JIT compile, first call (never inside kernel times): "
                     + ", ".join(f"{k} {v:.0f} ms" for k, v in comp.items()))
    skipped = sorted({(r["m"], r["n"], r["k"], r["note"]) for r in records if r.get("note", "").startswith("skipped")})
    for m, n, k, note in skipped:
        notes.append(f"CPU naive at {size_label(m, n, k)}: {note}")
    wrong = [r for r in records if r.get("ok") is False]
    for r in wrong:
        first = r.get("check", "").splitlines()[0] if r.get("check") else r.get("note", "")
        notes.append(f"[red]{first}[/]")
    notsim = sorted({r["note"] for r in records if r.get("note", "").startswith("not run")})
    notes += notsim
    for line in repeatability(records):
        notes.append(line)
    if simulated:
        notes.append("Times: CPU kernels, the median of timed runs after warm-up; simulated GPU kernels, one run on "
                     "the host clock (the simulator takes seconds a launch), no spread: a check of the result, not a "
                     "time. e2e: tilegemm.matmul() on NumPy arrays, host clock, copies included (simulated too).")
    elif any(r.get("time") and r.get("backend") != "cpu" for r in records):
        cpu = any(r.get("time") and r.get("backend") == "cpu" for r in records)
        notes.append("Times: median kernel time (device events, after warm-up, L2 flushed before each sample on a "
                     "GPU" + ("; CPU kernels on the host clock" if cpu else "") + "), ± the larger of half the "
                     "interquartile range and the 0.5% run-to-run reproducibility floor. e2e: tilegemm.matmul() on "
                     "NumPy arrays, host clock, copies included.")
    else:  # CPU kernels alone (--kernels cpu, or no GPU): no device events, no L2 flush, no e2e column's kernel
        notes.append("Times: CPU kernels, the median of timed runs on the host clock after warm-up, ± the larger "
                     "of half the interquartile range and the 0.5% run-to-run reproducibility floor.")
    return notes


def print_table(records: list[dict], console: Console, title: str, simulated: bool) -> None:
    console.print(build_table(records, title, simulated))
    for n in footnotes(records, simulated):
        console.print(n)


def repeat_pairs(records: list[dict]) -> list[tuple[dict, dict]]:
    """(first timing, later timing) of every kernel that was timed more than once at one shape."""
    firsts = {(r["kernel"], r["m"], r["n"], r["k"]): r for r in records if r.get("repeat", 1) == 1}
    return [(firsts[(r["kernel"], r["m"], r["n"], r["k"])], r) for r in records
            if r.get("repeat", 1) > 1 and (r["kernel"], r["m"], r["n"], r["k"]) in firsts]


def agreement(a: dict, b: dict) -> tuple[bool, float, float]:
    """Do two timings of one kernel agree within their stated spreads (± spread_ms each)?
    (agrees, |difference| ms, allowed ms)."""
    ta, tb = a["time"], b["time"]
    diff = abs(ta["median_ms"] - tb["median_ms"])
    allowed = _spread(ta) + _spread(tb)
    return diff <= allowed, diff, allowed


def repeatability(records: list[dict]) -> list[str]:
    out = []
    for a, b in repeat_pairs(records):
        if not (a.get("time") and b.get("time")):
            continue
        ok, diff, allowed = agreement(a, b)
        out.append(f"Timed twice, {a['kernel']} at {size_label(a['m'], a['n'], a['k'])}: "
                   f"{a['median_ms']:.4g} vs {b['median_ms']:.4g} ms, difference {diff:.2g} ms "
                   f"{'within' if ok else 'OUTSIDE'} the stated spread (±{allowed:.2g} ms)")
    return out
