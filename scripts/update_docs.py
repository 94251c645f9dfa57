"""Regenerate every generated part of the docs from committed results. Never edit those by hand.

    python scripts/update_docs.py

- README.md: the two sample tables (from results/h200/table.txt and results/simulator/table.txt,
  which `tilegemm bench --table` wrote) and the results section (from results/h200/lab.json and
  its report, via tilegemm.bench.report.update_readme);
- results/h200/report/: the Markdown report and plots of the lab run;
- docs/ladder.md: the SIMT ladder, from results/h200/ladder.json, results/h200/ladder_llm.json
  and results/h200/resources.json;
- the measured outcomes in docs/perf-notes.md and README.md (ladder and tensor-core summaries);
- the library as users call it: results/<gpu>/library.md (every shape) and the README's headline
  (both clocks, host µs per call, first calls), from results/<gpu>/library.json;
- results/<gpu>/sanitizer.md: compute-sanitizer over every GPU kernel, from sanitizer.json;
- docs/scaleout.md: the distributed cost model's predictions for 1–32 hosts and their plot, from
  the local GEMM rate measured in results/h200/tensorcore.json and the memory bandwidth in
  results/h200/ceilings.json.
Missing inputs are reported and skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tilegemm import sanitize  # noqa: E402
from tilegemm.bench import ladder, library, report, results  # noqa: E402

README = ROOT / "README.md"
H200 = ROOT / "results" / "h200"


def replace_between(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- table:{name}:begin -->", f"<!-- table:{name}:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"README.md lacks the markers {begin} … {end}")
    return text[: i + len(begin)] + "\n" + body + "\n" + text[j:]


def replace_marked(text: str, tag: str, body: str, where: str) -> str:
    begin, end = f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit(f"{where} lacks the markers {begin} … {end}")
    return text[: i + len(begin)] + "\n" + body + "\n" + text[j:]


def ladder_outcomes(doc: dict, shape=(4096, 4096, 4096)) -> str:
    """Per SIMT rung at one shape: time, rate, % of cuBLAS, change against the rung before."""
    from tilegemm import registry

    by = {r["kernel"]: r for r in doc["records"] if (r["m"], r["n"], r["k"]) == tuple(shape) and r.get("median_ms")}
    cub = by.get("cublas")
    rows = [f"Measured at {shape[0]}×{shape[1]}×{shape[2]} FP32 on {doc['environment']['gpu']['name']} "
            f"({doc['created']}); cuBLAS (TF32 off) in the same run: "
            + (f"{cub['median_ms']:.3f} ms, {cub['tflops']:.1f} TFLOP/s." if cub else "not measured."), "",
            "| rung | kernel | median ms | TFLOP/s | % of cuBLAS | × the rung before |", "|---:|---|---:|---:|---:|---:|"]
    prev = None
    for k in registry.all_kernels():
        r = by.get(k.name)
        if k.backend != "simt" or r is None or "broken" in k.tags:
            continue
        step = f"{prev['median_ms'] / r['median_ms']:.2f}" if prev else "—"
        rows.append(f"| {k.rung} | {k.name} | {r['median_ms']:.3f} | {r['tflops']:.1f} | "
                    f"{r.get('pct_cublas') or 0:.1f}% | {step} |")
        if not k.teaching:
            prev = r
    return "\n".join(rows)


def _tc_means(doc: dict, dt: str):
    """(geometric-mean ratio, the same at ≥ 8192³ or None, records) of one dtype's valid records."""
    import math

    rs = [r for r in doc["records"] if r.get("ratio") and r.get("ok") and r["dtype"] == dt]
    if not rs:
        return None, None, rs
    big = [r["ratio"] for r in rs if r["m"] * r["n"] * r["k"] >= 8192**3]
    return (math.exp(sum(math.log(r["ratio"]) for r in rs) / len(rs)),
            math.exp(sum(map(math.log, big)) / len(big)) if big else None, rs)


def _timing_method(doc: dict) -> str:
    t = doc.get("timing")
    if t:
        return f"Timing: {t['order']}; {t['clock']}; {t['flush']}."
    return "Timing: ours, then the reference (not interleaved: see perf-notes 22)."


def tensorcore_summary(doc: dict) -> str:
    """Per dtype: geometric-mean ratio to cuBLAS / torch._scaled_mm, the ratio at ≥ 8192³, the worst
    shape; the GPU's clocks under load; every shape with the rung that ran it."""
    recs = [r for r in doc["records"] if r.get("ratio") and r.get("ok")]
    ref = {"fp8": "torch._scaled_mm", "tf32": "cuBLAS TF32"}
    rows = [f"Tensor-core kernels on {doc.get('gpu', '?')} ({doc.get('date', '?')}); ratio = reference time / ours "
            "(> 1: ours is faster), same inputs, same run; graph-mode device time (L2 warm) where a side's eager time "
            "(L2 flushed) exceeds its graph time by 30% "
            "(the JSON has both). " + _timing_method(doc), "",
            "| dtype | shapes | geometric mean | at ≥ 8192³ | worst shape (ratio) | reference |",
            "|---|---:|---:|---:|---|---|"]
    for dt in ("bf16", "fp16", "fp8", "tf32"):
        geo, big, rs = _tc_means(doc, dt)
        if not rs:
            continue
        big_s = f"{big:.3f}" if big else "—"
        w = min(rs, key=lambda r: r["ratio"])
        rows.append(f"| {dt} | {len(rs)} | {geo:.3f} | {big_s} | {w['m']}×{w['n']}×{w['k']} ({w['ratio']:.2f}) | "
                    f"{ref.get(dt, 'cuBLAS')} |")
    clk = doc.get("clocks") or {}
    if clk.get("first"):
        f, last = clk["first"], clk["last"]

        def mhz(r, key):
            return f"{r[key]:.0f}" if isinstance(r.get(key), (int, float)) else "?"
        rows += ["", f"GPU clocks under load: SM {mhz(f, 'sm_mhz')} → {mhz(last, 'sm_mhz')} MHz, memory "
                 f"{mhz(f, 'mem_mhz')} → {mhz(last, 'mem_mhz')} MHz (first and last shape); "
                 f"{clk.get('warning') or 'no throttle reason and no clock move'}."]
    rows += ["", "| dtype | M×N×K | ours TFLOP/s | reference TFLOP/s | ratio | timing | rung |",
             "|---|---|---:|---:|---:|---|---|"]
    for r in recs:
        rows.append(f"| {r['dtype']} | {r['m']}×{r['n']}×{r['k']} | {r['tflops']:.1f} | {r['ref_tflops']:.1f} | "
                    f"{r['ratio']:.3f} | {r.get('ratio_mode', '')} | {r.get('ran', '?')} |")
    return "\n".join(rows)


def table_block(path: Path) -> str:
    rows = [ln.rstrip() for ln in path.read_text().splitlines()]
    return "```text\n" + "\n".join(rows).strip("\n") + "\n```"


def main() -> int:
    text = README.read_text()
    for name, path in (("h200", H200 / "table.txt"), ("simulator", ROOT / "results" / "simulator" / "table.txt")):
        if path.exists():
            text = replace_between(text, name, table_block(path))
        else:
            print(f"skipped the {name} table: {path} is missing")
    README.write_text(text)
    lab = H200 / "lab.json"
    if lab.exists():
        doc = results.load(lab)
        ceil = report.find_ceilings(doc, H200 / "ceilings.json" if (H200 / "ceilings.json").exists() else None)
        report.render(doc, H200 / "report", ceilings=ceil)
        report.update_readme(README, doc, H200 / "report")
        print("wrote results/h200/report and the README's results section")
    notes_path = ROOT / "docs" / "perf-notes.md"
    notes = notes_path.read_text()
    lad = H200 / "ladder.json"
    if lad.exists():
        out = ladder_outcomes(results.load(lad))
        notes = replace_marked(notes, "outcomes:simt", out, "docs/perf-notes.md")
        README.write_text(replace_marked(README.read_text(), "outcomes:simt", out, "README.md"))
    tc = H200 / "tensorcore.json"
    if tc.exists():
        out = tensorcore_summary(json.loads(tc.read_text()))
        notes = replace_marked(notes, "outcomes:tensorcore", out, "docs/perf-notes.md")
        short = out.split("\n\n| dtype | M×N×K")[0]
        README.write_text(replace_marked(README.read_text(), "outcomes:tensorcore", short, "README.md"))
    notes_path.write_text(notes)
    blocks = []
    for gpu_dir in sorted(p for p in (ROOT / "results").iterdir() if (p / "library.json").exists()):
        doc = json.loads((gpu_dir / "library.json").read_text())
        (gpu_dir / "library.md").write_text("# The library as users call it\n\n" + library.render(doc) + "\n")
        blocks.append(library.render(doc, full=False) + f"\n\nEvery shape: [{gpu_dir.name}/library.md]"
                      f"(results/{gpu_dir.name}/library.md).")
        print(f"wrote results/{gpu_dir.name}/library.md")
    for gpu_dir in sorted(p for p in (ROOT / "results").iterdir() if (p / "sanitizer.json").exists()):
        (gpu_dir / "sanitizer.md").write_text(sanitize.markdown(json.loads((gpu_dir / "sanitizer.json").read_text())))
        print(f"wrote results/{gpu_dir.name}/sanitizer.md")
    body = "\n\n".join(blocks) or ("No `tilegemm library` run is committed yet, so the library's eager and device "
                                    "ratios on the `library` shape set are not measured (docs/perf-notes.md, 32–33).")
    README.write_text(replace_marked(README.read_text(), "outcomes:library", body, "README.md"))
    if tc.exists():
        from tilegemm.distributed import costmodel

        ceil = ROOT / "results" / "h200" / "ceilings.json"
        hw = costmodel.hardware_from_results(json.loads(tc.read_text()),
                                             json.loads(ceil.read_text()) if ceil.exists() else None)
        scale = ROOT / "docs" / "scaleout.md"
        body = costmodel.render(hw, ROOT / "docs" / "img" / "scaleout.png")
        scale.write_text(replace_marked(scale.read_text(), "scaleout:model", body, "docs/scaleout.md"))
        print("wrote docs/scaleout.md and docs/img/scaleout.png")
    if lad.exists():
        doc = results.load(lad)
        doc["_path"] = "results/h200/ladder.json"
        res_path = H200 / "resources.json"
        res = json.loads(res_path.read_text()) if res_path.exists() else []
        llm = H200 / "ladder_llm.json"
        ldoc = results.load(llm) if llm.exists() else None
        text = ladder.render(doc, res, also={r["kernel"] for r in ldoc["records"]} if ldoc else ())
        if ldoc:  # a second run over the transformer shape set: its summary table only
            ldoc["_path"] = "results/h200/ladder_llm.json"
            summary = ladder.render(ldoc, []).split("## Summary", 1)[1].split("## Machine code", 1)[0]
            head, tail = text.split("## Machine code", 1)
            text = (head + "## The transformer shape set (`--shapes llm`, a second run, cuBLAS in it)\n"
                    + f"\nFrom `results/h200/ladder_llm.json` ({ldoc['created']}).\n" + summary + "## Machine code" + tail)
        (ROOT / "docs" / "ladder.md").write_text(text)
        print("wrote docs/ladder.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
