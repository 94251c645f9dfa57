"""The generated report: real PNG plots and Markdown tables from a synthetic results document,
the README section between markers, and the CLI entry points of the measurement modules."""

import argparse
import json
import struct
from unittest import mock

import numpy as np
import pytest

from tilegemm.bench import compare, report, results
from tilegemm.bench.timing import Timing

SIZES = (128, 256, 512, 1024)
# (kernel, label, backend, TFLOP/s at the largest size, design traffic multiplier over 2MNK·s)
KERNELS = [("cpu_naive", "CPU naive", "cpu", 0.002), ("cpu_blas", "CPU BLAS", "cpu", 0.5),
           ("naive", "GPU naive", "simt", 2.0), ("smem_tiled_32", "GPU tiled-32", "simt", 8.0),
           ("cublas", "cuBLAS (torch)", "torch", 40.0)]


def _record(kernel, label, backend, n, tflops, rng):
    flops = 2.0 * n**3
    med = flops / (tflops * (n / SIZES[-1]) ** 0.5 * 1e12) * 1e3  # slower at small sizes
    t = Timing(list(rng.normal(med, med * 0.01, 25)), "cuda-events", "l2-flush", 10.0).to_dict()
    traffic = {"naive": (2.0 * n**3 + n * n) * 4, "smem_tiled_32": (2.0 * n**3 / 32 + n * n) * 4}.get(
        kernel, 3.0 * n * n * 4)
    return dict(kernel=kernel, label=label, backend=backend, m=n, n=n, k=n, dtype="float32", ok=True,
                rel_err=1e-7, check="OK", time=t, median_ms=t["median_ms"], tflops=flops / (t["median_ms"] * 1e9),
                gbps=traffic / (t["median_ms"] * 1e6), flops=flops, traffic_bytes=traffic,
                compulsory_bytes=3.0 * n * n * 4, intensity=flops / traffic, compile_ms=None, e2e_ms=None,
                simulated=False, note="")


def synthetic_doc(seed=0):
    rng = np.random.default_rng(seed)
    recs = [_record(k, lbl, be, n, tf, rng) for n in SIZES for k, lbl, be, tf in KERNELS]
    recs.append(dict(kernel="broken_nosync", label="GPU broken (no sync)", backend="simt", m=128, n=128, k=128,
                     dtype="float32", ok=False, check="WRONG: 55% of elements", note="", time=None,
                     median_ms=None, tflops=None))
    env = dict(date="2026-11-21T10:00:00+00:00", simulator=False,
               gpu=dict(name="NVIDIA H200", compute_capability="9.0", sm_count=132, l2_bytes=60 * 2**20),
               libraries={"numpy": "2.4.6"}, host={"cpu": "synthetic"})
    clocks = dict(source="nvml", before=dict(sm_mhz=1980.0, mem_mhz=3201.0, reasons=[]),
                  after=dict(sm_mhz=1755.0, mem_mhz=3201.0, reasons=["sw_power_cap"]),
                  warning="SM clock moved 1980 → 1755 MHz (-11.4%); throttle reason active: sw_power_cap",
                  moved_threshold=0.05)
    ceil = dict(schema="tilegemm.ceilings/1", gpu="NVIDIA H200", date="2026-11-21T09:00:00+00:00",
                ceilings={"dram": dict(what="copy", unit="TB/s", measured=4.1, datasheet=4.8),
                          "fp32_fma": dict(what="FMA", unit="TFLOP/s", measured=60.0, datasheet=67.0)},
                overhead=dict(shape="64×64×64 float32", results={"torch.mm (torch CUDA tensors)": dict(
                    median_us=12.0, q1_us=11.5, q3_us=12.5, calls=2000)}))
    return results.document(recs, harness=dict(warmup_s=0.1, budget_s=1.0, l2_flush=True), clocks=clocks,
                            env=env, ceilings=ceil)


def _png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_report_writes_plots_and_tables(tmp_path):
    doc = synthetic_doc()
    md = report.render(doc, tmp_path, ceilings=doc["ceilings"])
    for name in report.PLOTS:
        p = tmp_path / name
        assert p.exists() and p.stat().st_size > 15_000, name
        w, h = _png_size(p)
        assert w >= 600 and h >= 400
        assert f"({name})" in md.read_text()
    text = md.read_text()
    for heading in ("## Times", "## Cost model", "## Ceilings", "## Clocks", "## Harness", "## Environment",
                    "## Host overhead per call"):
        assert heading in text
    assert "NVIDIA H200" in text and "sw_power_cap" in text and "**Warning:**" in text
    assert "WRONG" in text  # the failed kernel is listed, without a time


def test_report_numbers_come_from_the_records(tmp_path):
    doc = synthetic_doc()
    md = report.render(doc, tmp_path, ceilings=doc["ceilings"]).read_text()
    by = {(r["kernel"], r["m"]): r for r in doc["records"]}
    r, c = by[("smem_tiled_32", 1024)], by[("cublas", 1024)]
    row = next(line for line in md.splitlines() if line.startswith("| 1024 | float32 | GPU tiled-32 |"))
    cells = [x.strip() for x in row.strip("|").split("|")]
    assert cells[3] == f"{r['median_ms']:.4g}"
    assert cells[6] == f"{r['tflops']:.3g}"
    assert cells[7] == f"{100 * c['median_ms'] / r['median_ms']:.1f}%"
    assert cells[8] == f"{100 * r['tflops'] / 60.0:.1f}%"  # against the measured FP32 FMA ceiling
    cost = next(line for line in md.splitlines() if line.startswith("| GPU tiled-32 | float32 | 1024 |"))
    assert f"{r['intensity']:.3g}" in cost


def test_report_helpers():
    doc = synthetic_doc()
    recs = doc["records"]
    cub = report.cublas_index(recs)
    r = next(x for x in recs if x["kernel"] == "naive" and x["m"] == 512)
    assert report.pct_of_cublas(r, cub) == pytest.approx(100 * cub[(512, 512, 512, "float32")]["median_ms"] / r["median_ms"])
    assert report.roof(0.25, 60.0, 4.1) == pytest.approx(1.025) and report.roof(100, 60.0, 4.1) == 60.0
    pts = {p["kernel"]: p for p in report.roofline_points(recs)}
    assert set(pts) == {"naive", "smem_tiled_32", "cublas"} and pts["naive"]["shape"] == "1024"
    sp = report.speedups(recs)
    naive_over_cpu = dict(sp["cpu_naive"]["GPU naive"])
    b = next(x for x in recs if x["kernel"] == "cpu_naive" and x["m"] == 256)
    g = next(x for x in recs if x["kernel"] == "naive" and x["m"] == 256)
    assert naive_over_cpu[256.0] == pytest.approx(b["median_ms"] / g["median_ms"])
    assert report.pct_of_peak(b, doc["ceilings"]) is None  # CPU kernels are not held to GPU peaks


def test_report_without_cublas_or_ceilings(tmp_path):
    doc = synthetic_doc()
    doc["records"] = [r for r in doc["records"] if r["kernel"] not in ("cublas", "cpu_naive", "cpu_blas")]
    doc["ceilings"] = None
    md = report.render(doc, tmp_path, ceilings=None).read_text()
    assert "run `tilegemm ceilings`" in md
    assert all((tmp_path / p).stat().st_size > 5_000 for p in report.PLOTS)


def test_cost_model_from_registry():
    from tilegemm import registry

    rows = report.cost_model([registry.get("naive"), registry.get("smem_tiled_32")], [(64, 64, 64)])
    naive, tiled = rows
    assert naive["traffic_bytes"] == (2 * 64**3 + 64 * 64) * 4 and naive["compulsory_bytes"] == 3 * 64 * 64 * 4
    assert tiled["intensity"] == pytest.approx(2 * 64**3 / ((2 * 64 * 64 * 2 + 64 * 64) * 4))


def test_update_readme(tmp_path):
    doc = synthetic_doc()
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{report.RESULTS_BEGIN}\nold text\n{report.RESULTS_END}\nafter\n")
    assert report.update_readme(readme, doc, tmp_path / "results" / "h200" / "report")
    text = readme.read_text()
    assert "old text" not in text and text.startswith("# x\n\nbefore\n") and text.endswith("after\n")
    assert "(results/h200/report/report.md)" in text and "GPU tiled-32" in text
    assert not report.update_readme(readme, doc, tmp_path / "results" / "h200" / "report")  # idempotent
    assert "Simulator run" not in text
    sim = synthetic_doc()  # a simulator's run: its section says so, as its report.md does
    for r in sim["records"]:
        r["simulated"] = r["backend"] == "simt"
    sim["environment"].update(gpu=None, simulator=True)
    assert report.update_readme(readme, sim, tmp_path / "report")
    text = readme.read_text()
    assert "Measured on Numba CUDA simulator" in text and "Simulator run" in text and "say nothing about GPU" in text
    bad = tmp_path / "BAD.md"
    bad.write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        report.update_readme(bad, doc, tmp_path)


def _parser():
    from tilegemm.bench import ceilings, traffic

    p = argparse.ArgumentParser(prog="tilegemm")
    sub = p.add_subparsers(dest="command", required=True)
    for mod in (results, compare, report, ceilings, traffic):
        mod.add_cli(sub)
    return p


def test_cli_report_and_compare(tmp_path, capsys):
    old = synthetic_doc(seed=0)
    new = synthetic_doc(seed=1)
    for r in new["records"]:  # the tiled kernel got 20% faster
        if r["kernel"] == "smem_tiled_32":
            r["time"]["samples_ms"] = [x * 0.8 for x in r["time"]["samples_ms"]]
            r["time"]["median_ms"] *= 0.8
            r["median_ms"] *= 0.8
    results.save(old, tmp_path / "old.json")
    results.save(new, tmp_path / "new.json")
    p = _parser()
    args = p.parse_args(["report", str(tmp_path / "old.json"), "--out", str(tmp_path / "rep")])
    assert args.func(args) == 0 and (tmp_path / "rep" / "report.md").exists()
    args = p.parse_args(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "FASTER" in out
    verdicts = {(v.kernel, v.m): v.verdict for v in compare.compare(old, new)}
    assert all(verdicts[("smem_tiled_32", n)] == compare.FASTER for n in SIZES)
    args = p.parse_args(["results", str(tmp_path / "old.json"), "--csv", str(tmp_path / "old.csv")])
    assert args.func(args) == 0 and (tmp_path / "old.csv").read_text().count("\n") == len(old["records"]) + 1
    json.loads((tmp_path / "old.json").read_text())


def test_tensorcore_bench_merges_runs_into_per_shape_medians(tmp_path):
    """scripts/device/tensorcore_bench.py --merge: each shape's record is the run's whose ratio is
    the median, every run's ratio kept beside it; a shape that failed in a run takes the others."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parent.parent / "scripts" / "device" / "tensorcore_bench.py"
    spec = importlib.util.spec_from_file_location("tensorcore_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def rec(dtype, ratio):
        if ratio is None:
            return dict(dtype=dtype, m=8, n=8, k=8, ok=False, error="failed")
        return dict(dtype=dtype, m=8, n=8, k=8, ok=True, ratio=ratio, ratio_eager=ratio, ratio_mode="eager", ms=1 / ratio,
                    ref_ms=1.0, tflops=ratio, ref_tflops=1.0, config={})

    def run(date, r1, r2):
        return dict(gpu="X", date=date, cache="/x/tuning.json", records=[rec("bf16", r1), rec("fp8", r2)])

    docs = [run("d1", 1.10, 0.9), run("d2", 0.90, None), run("d3", 1.00, 1.1)]
    files = []
    for i, d in enumerate(docs):
        files.append(str(tmp_path / f"r{i}.json"))
        json.dump(d, open(files[-1], "w"))
    out = tmp_path / "merged.json"
    assert bench.main(["--merge", *files, "--out", str(out)]) == 0
    got = json.load(open(out))
    assert got["runs"] == 3 and got["dates"] == ["d1", "d2", "d3"]
    bf, f8 = got["records"]
    assert bf["ratio"] == 1.00 and bf["ms"] == 1.0 and bf["runs_ratio"] == [1.10, 0.90, 1.00]
    assert f8["ratio"] == 0.9 and f8["runs_ratio"] == [0.9, 1.1]  # the run that failed is left out
    assert bench.main(["--merge", str(tmp_path / "missing.json"), "--out", str(out)]) == 2
    # FP8's yardstick: _scaled_mm with fast accumulation, as ours; runs of two modes are no one measurement,
    # and a document names its mode in the report (one from before the field, the default mode)
    seen = []

    class Torch:
        bfloat16 = "bf16"

        @staticmethod
        def _scaled_mm(*a, **kw):
            seen.append(kw.get("use_fast_accum"))

    bench.library_call("fp8", 1, 2, 3, 4, Torch)()
    assert seen == [True]
    json.dump(dict(docs[0], fp8_reference="torch._scaled_mm, fast accumulation"), open(files[0], "w"))
    assert bench.main(["--merge", *files, "--out", str(out)]) == 2
    import sys as _sys

    _sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "scripts"))
    try:
        import update_docs
    finally:
        _sys.path.pop(0)
    for doc, words in ((docs[1], "torch._scaled_mm, default mode (FP32 promotion"),
                       (dict(docs[1], fp8_reference="torch._scaled_mm, fast accumulation"),
                        "| torch._scaled_mm, fast accumulation |")):
        assert words in update_docs.tensorcore_summary(dict(doc, records=[rec("fp8", 1.1)]))


def _main(capsys, *argv):
    """`tilegemm ARGV` in this process: (exit status, stdout, stderr)."""
    from tilegemm import cli

    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _one_line(err):
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("args, says", [
    (["--equivalence", "-1"], "'-1': must be a finite number ≥ 0"),  # was a ZeroDivisionError traceback
    (["--equivalence", "-0.5"], "'-0.5': must be a finite number ≥ 0"),  # was an empty SAME band, silently
    (["--equivalence", "nan"], "'nan': must be a finite number ≥ 0"),
    (["--level", "0"], "'0': must be strictly between 0 and 1"),
    (["--level", "1"], "'1': must be strictly between 0 and 1"),
    (["--level", "95"], "'95': must be strictly between 0 and 1"),
])
def test_compare_refuses_an_equivalence_or_level_out_of_range(args, says, tmp_path, capsys):
    results.save(synthetic_doc(), tmp_path / "a.json")
    with pytest.raises(SystemExit) as e:
        _main(capsys, "compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"), *args)
    assert e.value.code == 2
    assert says in _one_line(capsys.readouterr().err)
    with pytest.raises(ValueError, match="must be"):  # and from the library, not a ZeroDivisionError
        compare.compare(synthetic_doc(), synthetic_doc(), **{args[0][2:]: float(args[1])})
    assert _main(capsys, "compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"),
                 "--equivalence", "0", "--level", "0.9")[0] == 0


def test_ladder_refuses_a_json_that_is_not_a_resource_table(tmp_path, capsys):
    results.save(synthetic_doc(), tmp_path / "run.json")
    out = tmp_path / "ladder.md"
    for name, text in (("list.json", '["a", "b"]'), ("doc.json", json.dumps(synthetic_doc()))):
        (tmp_path / name).write_text(text)
        rc, _, err = _main(capsys, "ladder", str(tmp_path / "run.json"), "--resources", str(tmp_path / name),
                           "--out", str(out))
        assert rc == 2 and f"{name}: not a resource table" in _one_line(err) and not out.exists()
    row = dict(kernel="naive", function="naive", threads=256, registers=28, shared_bytes=0, occupancy=1.0)
    (tmp_path / "res.json").write_text(json.dumps([row]))
    assert _main(capsys, "ladder", str(tmp_path / "run.json"), "--resources", str(tmp_path / "res.json"),
                 "--out", str(out))[0] == 0
    assert "| 1 | naive | naive | 256 | 28 |" in out.read_text()


def test_ladder_says_its_default_out_and_where_it_is_missing(tmp_path, capsys, monkeypatch):
    from tilegemm import cli

    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert "default ladder.md, where you run it" in " ".join(sub.choices["ladder"].format_help().split())
    results.save(synthetic_doc(), tmp_path / "run.json")
    monkeypatch.chdir(tmp_path)  # (docs/ladder.md, the default before, replaced the committed page run in the root)
    rc, _, err = _main(capsys, "ladder", "run.json", "--out", "nofolder/l.md")
    assert rc == 2 and "no folder nofolder/" in _one_line(err)
    assert _main(capsys, "ladder", "run.json")[0] == 0 and (tmp_path / "ladder.md").exists()
    header = (tmp_path / "ladder.md").read_text().splitlines()[2]  # (it printed the records' dict, 80 kB, where
    assert header.startswith("Generated by `tilegemm ladder` from ") and len(header) < 400  # the maker's name goes)


@pytest.mark.parametrize("env, says", [(dict(simulator=True, gpu=None), "measured under Numba's CUDA simulator"),
                                       (dict(simulator=False, gpu=None), "measured without a GPU")])
def test_ladder_refuses_results_not_measured_on_a_gpu(env, says, tmp_path, capsys):
    doc = synthetic_doc()
    doc["environment"].update(env)
    results.save(doc, tmp_path / "sim.json")
    rc, _, err = _main(capsys, "ladder", str(tmp_path / "sim.json"), "--out", str(tmp_path / "l.md"))
    assert rc == 2 and says in _one_line(err) and not (tmp_path / "l.md").exists()


def test_a_measurement_names_the_code_it_ran(tmp_path):
    """Every results document's environment names its code: a hash of the package's files, which a
    copy of the same files (a device machine's, without git) gives alike and an edit changes, and in
    a git checkout the commit and whether the package differs from it. (The version, 0.1.0 across
    weeks of changes, tied no figure to its code.)"""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    mine = results.code_revision()
    assert len(mine["source"]) == 16 and ("commit" not in mine or isinstance(mine["dirty"], bool))
    src = Path(results.__file__).resolve().parent.parent
    copy = tmp_path / "tilegemm"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
    probe = "from tilegemm.bench import results; print(results.code_revision())"
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"  # (the copy first)
    run = lambda: subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,  # noqa: E731
                                 env={**os.environ, "PYTHONPATH": path}, check=True).stdout
    there = eval(run())  # noqa: S307  (a dict's repr, from our own child)
    assert there == {"source": mine["source"]}  # the same files, no git: the same hash, no commit
    (copy / "api.py").write_text((copy / "api.py").read_text() + "\n# an edit\n")
    assert eval(run())["source"] != mine["source"]  # noqa: S307
    assert "code" in results.environment()


def test_the_clocks_line_reads_every_figures_reading():
    """The tensor-core block said 'SM 1980 → 1980 MHz, no throttle reason' from the first and last
    readings of one run while 26 of its 42 shapes were read under sw_power_cap: the line is made
    from every figure's own reading (model-bench's figures now take one each too)."""
    from tilegemm.bench import clocks

    def at(mhz, *reasons):
        return dict(source="nvml", sm_mhz=mhz, mem_mhz=3201.0, reasons=list(reasons))

    said = clocks.during([("a", at(1980)), ("b", at(1410, "sw_power_cap")), ("c", at(1755, "sw_power_cap")),
                          ("d", at(1980, "gpu_idle")), ("e", dict(source="unavailable"))])
    assert said.startswith("GPU clocks at each of 4 readings: SM 1410–1980 MHz, memory 3201 MHz; a throttle "
                           "reason (sw_power_cap) at 2 of them, the lowest SM clock 1410 MHz at b")
    assert clocks.during([("a", at(1980)), ("d", at(1980, "gpu_idle"))]).endswith("SM 1980 MHz, memory 3201 MHz; "
                                                                                 "no throttle reason at any.")
    assert clocks.during([("e", dict(source="unavailable")), ("f", None)]) == ""


def test_a_simulator_runs_report_shows_no_spread_cublas_or_roofline_it_does_not_have(tmp_path):
    """The simulator times a GPU kernel once: its row said 'IQR 0 (0.0%)', which reads as perfect
    precision; the report showed a '% of cuBLAS' plot with no cuBLAS in it and a roofline of Python
    threads' rates that told the reader to run `tilegemm ceilings`, which needs a GPU."""
    from pathlib import Path

    doc = results.load(Path(__file__).resolve().parent.parent / "results" / "simulator" / "bench.json")
    text = report.render(doc, tmp_path).read_text()
    assert "— (one sample) | 1 |" in text and "0 (0.0%) | 1 |" not in text
    assert "![% of cuBLAS]" not in text and "No cuBLAS time in this run" in text
    assert "![roofline]" not in text and "None for a simulator run" in text


def test_the_results_command_prints_the_environment_the_readme_promises(capsys):
    """`tilegemm results PATH` printed the GPU, simulator and date only; the README promised the
    versions and clocks too (and the code, since it is recorded)."""
    from pathlib import Path

    from tilegemm import cli

    lab = Path(__file__).resolve().parent.parent / "results" / "h200" / "lab.json"
    assert cli.main(["results", str(lab)]) == 0
    out = capsys.readouterr().out
    assert "versions: python 3.12.3, numpy 2.4.6" in out and "torch 2.11.0" in out
    assert "clocks: SM 345 MHz before, SM 1980 MHz after; SM clock moved 345 → 1980 MHz" in out


def _edited(tmp_path, name, edit):
    doc = synthetic_doc()
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("edit, says", [
    (lambda d: d.update(environment="x"), "'environment' must be an object"),  # were AttributeError tracebacks
    (lambda d: d["environment"].update(gpu="x"), "'environment.gpu' must be an object or null"),
    (lambda d: d.update(environment=None), "'environment' must be an object; got null"),
    (lambda d: d["environment"].update(libraries=["numpy"]), "'environment.libraries' must be an object or null"),
    (lambda d: d["environment"].update(code="abc"), "'environment.code' must be an object or null"),
    (lambda d: d.update(schema=[1]), "'schema' must be a string"),  # was "unhashable type: 'list'"
    (lambda d: d.update(clocks="x"), "'clocks' must be an object"),
    (lambda d: d.update(harness=[1]), "'harness' must be an object"),
    (lambda d: d.update(records=[1, 2]), "record 0 is not an object"),  # was "argument of type 'int' is not iterable"
    (lambda d: d["records"][0].update(median_ms="fast"), "median_ms must be a positive time"),
    (lambda d: d["records"][0].update(median_ms=-1.0), "median_ms must be a positive time"),  # was "11 FASTER"
    (lambda d: d["records"][0].update(m="4096"), "m must be a whole number"),
    # compare said "could not convert string to float: 'abc'", naming neither file nor record
    (lambda d: d["records"][0]["time"].update(samples_ms="abc"), "record 0 (cpu_naive): time.samples_ms must be"),
    (lambda d: d["records"][0]["time"].update(samples_ms=[1.0, None]), "time.samples_ms must be a list of positive"),
    (lambda d: d["records"][0].update(time="x"), "time must be an object or null"),
])
def test_a_results_file_of_wrong_types_is_one_line(edit, says, tmp_path, capsys):
    path = _edited(tmp_path, "bad.json", edit)
    good = _edited(tmp_path, "good.json", lambda d: None)
    for argv in (["results", path], ["report", path, "--out", str(tmp_path / "rep")], ["compare", good, path],
                 ["ladder", path, "--out", str(tmp_path / "l.md")]):
        rc, _, err = _main(capsys, *argv)
        assert rc == 2 and says in _one_line(err), (argv, err)


def test_a_results_file_with_no_records_draws_no_page(tmp_path, capsys):
    """report drew empty tables and plots and said "no GPU" of an H200's run; ladder a table whose
    header and rows disagreed. Both refuse in one line; results still summarises it (0 records)."""
    path = _edited(tmp_path, "empty.json", lambda d: d.update(records=[]))
    for argv in (["report", path, "--out", str(tmp_path / "rep")], ["ladder", path, "--out", str(tmp_path / "l.md")]):
        rc, _, err = _main(capsys, *argv)
        assert rc == 2 and "no records, nothing to draw from" in _one_line(err), (argv, err)
    assert not (tmp_path / "rep").exists() and not (tmp_path / "l.md").exists()
    rc, out, _ = _main(capsys, "results", path)
    assert rc == 0 and "0 records" in out


def test_merge_parts_of_the_wrong_shape_are_one_line(tmp_path, capsys):
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "env.json").write_text(json.dumps({"schema": "tilegemm.model/1", "environment": "x"}))
    (tmp_path / "null.json").write_text(json.dumps({"schema": "tilegemm.model/1", "environment": None}))
    (tmp_path / "parts.json").write_text(json.dumps({"schema": "tilegemm.library/1", "environment": {},
                                                     "parts": "x"}))
    for command, part, says in (("library", "list.json", "part 1 is not a `tilegemm library` result"),
                                ("model-bench", "env.json", "'environment' must be an object"),
                                ("model-bench", "null.json", "'environment' must be an object; got null"),
                                ("library", "parts.json", "'parts' must be a list of objects")):
        rc, _, err = _main(capsys, command, "--merge", str(tmp_path / part), "--json", str(tmp_path / "m.json"))
        assert rc == 2 and says in _one_line(err) and not (tmp_path / "m.json").exists()


def test_an_output_that_is_the_input_is_refused(tmp_path, capsys):
    """`results in.json --csv in.json` replaced the results with CSV; `ladder in.json --out in.json`
    with Markdown."""
    path = _edited(tmp_path, "in.json", lambda d: None)
    before = open(path).read()
    for argv in (["results", path, "--csv", path], ["ladder", path, "--out", path]):
        rc, _, err = _main(capsys, *argv)
        assert rc == 2 and "is also what this command reads" in _one_line(err)
    assert open(path).read() == before


def test_compare_of_files_with_nothing_in_common_is_a_users_mistake(tmp_path, capsys):
    """Exit 2 and one line on stderr: it printed on stdout and exited 1, --fail-on-slower's code."""
    a = _edited(tmp_path, "a.json", lambda d: None)
    b = _edited(tmp_path, "b.json", lambda d: [r.update(kernel=r["kernel"] + "_x") for r in d["records"]])
    rc, out, err = _main(capsys, "compare", a, b)
    assert rc == 2 and "no kernel × shape appears in both" in _one_line(err) and not out.strip()


def test_compare_matches_each_timing_of_a_kernel_timed_twice_to_its_own(tmp_path, capsys):
    """A run that times a kernel twice at one shape (`repeat` 2, as results/h200/repeat.json) has two
    records of one key: each is compared with OLD's timing of the same rank. (Both were compared
    with OLD's last: a file compared with itself said SLOWER and FASTER.)"""
    doc = synthetic_doc()
    first = next(r for r in doc["records"] if r["kernel"] == "smem_tiled_32" and r["m"] == 1024)
    t = Timing([x * 1.1 for x in first["time"]["samples_ms"]], "cuda-events", "l2-flush", 10.0).to_dict()
    doc["records"].append(dict(first, label=first["label"] + " (timing #2)", repeat=2, time=t,
                               median_ms=t["median_ms"]))
    verdicts = compare.compare(doc, doc)
    assert {v.verdict for v in verdicts if v.method != "check"} == {compare.SAME}  # (broken_nosync: UNCLEAR)
    assert [v.repeat for v in verdicts if v.kernel == "smem_tiled_32" and v.m == 1024] == [1, 2]
    results.save(doc, tmp_path / "a.json")
    rc, out, err = _main(capsys, "compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert rc == 0 and "smem_tiled_32 (timing #2)" in out and "0 FASTER, 0 SLOWER" in out and not err


def test_compare_iqr_interval_is_in_order():
    """Without samples, disjoint IQRs decide; the interval stated beside FASTER was (high, low)."""
    old = dict(median_ms=1.0, q1_ms=0.9, q3_ms=1.1, reps=5)
    new = dict(median_ms=0.5, q1_ms=0.4, q3_ms=0.6, reps=5)
    for a, b, want in ((old, new, compare.FASTER), (new, old, compare.SLOWER)):
        verdict, ratio, lo, hi, method = compare.decide(a, b)
        assert (verdict, method) == (want, "iqr") and lo <= ratio <= hi


def test_compare_says_when_old_and_new_ran_on_other_gpus(tmp_path, capsys):
    a = _edited(tmp_path, "a.json", lambda d: None)
    b = _edited(tmp_path, "b.json", lambda d: d["environment"]["gpu"].update(name="NVIDIA H100 80GB HBM3"))
    rc, out, err = _main(capsys, "compare", a, b)
    assert rc == 0 and "OLD ran on NVIDIA H200, NEW on NVIDIA H100 80GB HBM3" in _one_line(err)
    rc, out, err = _main(capsys, "compare", a, a)
    assert rc == 0 and not err


def test_compare_names_what_only_one_file_has(tmp_path, capsys):
    a = _edited(tmp_path, "a.json", lambda d: None)
    b = _edited(tmp_path, "b.json", lambda d: d["records"].pop(0))
    rc, out, err = _main(capsys, "compare", a, b)
    assert rc == 0 and "only in OLD (not compared): 1: cpu_naive 128×128×128 float32" in out


def test_report_refuses_ceilings_of_another_gpu(tmp_path, capsys):
    """% of peak and the roofline held the H200's times to another GPU's roofs (250% of peak)."""
    path = _edited(tmp_path, "in.json", lambda d: d.update(ceilings=None))
    ceil = synthetic_doc()["ceilings"]
    (tmp_path / "c.json").write_text(json.dumps(dict(ceil, gpu="NVIDIA A100-SXM4-40GB")))
    rc, out, err = _main(capsys, "report", path, "--ceilings", str(tmp_path / "c.json"), "--out", str(tmp_path / "r"))
    assert rc == 2 and "measured on NVIDIA A100-SXM4-40GB, the results on NVIDIA H200" in _one_line(err)
    (tmp_path / "c.json").write_text(json.dumps(ceil))
    rc, out, err = _main(capsys, "report", path, "--ceilings", str(tmp_path / "c.json"), "--out", str(tmp_path / "r"))
    assert rc == 0 and "% of peak" in (tmp_path / "r" / "report.md").read_text()


@pytest.mark.parametrize("command", ["library", "model-bench"])
def test_merge_into_one_of_its_parts_is_refused(tmp_path, capsys, command):
    """`--merge PART… --json PART`: the guard against writing over what a command reads missed
    inputs named in a list."""
    schema = {"library": "tilegemm.library/1", "model-bench": "tilegemm.model/1"}[command]
    part = tmp_path / "part.json"
    part.write_text(json.dumps(dict(schema=schema, environment={}, records=[])))
    before = part.read_text()
    rc, out, err = _main(capsys, command, "--merge", str(part), "--json", str(part))
    assert rc == 2 and "is also what this command reads" in _one_line(err) and part.read_text() == before


@pytest.mark.parametrize("command", ["library", "model-bench"])
def test_merged_files_are_strict_json_as_saved_ones_are(tmp_path, capsys, command):
    """A merge wrote json.dumps' NaN and Infinity (not JSON: jq and browsers refuse them) where
    results.save writes null; a merged file is written as a saved one now, newline and all."""
    schema = {"library": "tilegemm.library/1", "model-bench": "tilegemm.model/1"}[command]
    part = tmp_path / "part.json"
    part.write_text(json.dumps(dict(schema=schema, environment={}, records=[])))
    out = tmp_path / "merged.json"
    module = {"library": "tilegemm.bench.library", "model-bench": "tilegemm.bench.model"}[command]
    with mock.patch(f"{module}.merge", lambda docs, **kw: dict(docs[0], extra=[float("nan"), float("inf")])):
        rc, _, err = _main(capsys, command, "--merge", str(part), "--json", str(out))
    assert rc == 0, err
    text = out.read_text()
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in a merged file"))["extra"] == [None, None]
    assert text.endswith("}\n")


def test_ladder_page_says_no_cublas_rather_than_zero_percent():
    """A run without cuBLAS at 4096³ has pct_cublas None: the page said '0.0% of cuBLAS'."""
    from tilegemm.bench import ladder

    rng = np.random.default_rng(0)
    doc = results.document([_record("naive", "GPU naive", "simt", 4096, 1.4, rng)], harness={},
                           env=dict(gpu=dict(name="NVIDIA H200"), simulator=False))
    page = ladder.render(doc, [])
    assert "Measured at 4096³" in page and "0.0% of cuBLAS" not in page and "no cuBLAS time in this run" in page


def test_ladder_page_calls_a_rung_slower_only_outside_the_spread():
    """docs/ladder.md called k12 'slower' than k11 at 0.999× (the same kernel runs at 4096³, both
    ±0.5%) and pointed at 'the notes', which the page does not have."""
    from tilegemm.bench import ladder

    def rec(ms, spread):
        return {"median_ms": ms, "time": {"median_ms": ms, "spread_ms": spread}}

    assert ladder._change_note(1.02, rec(1.0, 0.005), rec(1.02, 0.005)) == ""
    assert "no change" in ladder._change_note(0.999, rec(3.751, 0.0188), rec(3.747, 0.0187))
    assert "slower" in ladder._change_note(0.98, rec(4.123, 0.0206), rec(4.055, 0.0203))
    assert "see the notes" not in ladder._change_note(0.2, rec(88.0, 0.44), rec(17.6, 0.088))


@pytest.mark.parametrize("edit, says", [
    (lambda d: d.update(ceilings=[1]), "'ceilings' must be an object"),  # were AttributeError tracebacks, and
    (lambda d: d.update(overhead="x"), "'overhead' must be an object"),  # a folder of plots with no report
])
def test_a_ceilings_file_of_wrong_types_is_one_line(edit, says, tmp_path, capsys):
    doc = synthetic_doc()
    ceil = dict(doc["ceilings"], overhead={})
    edit(ceil)
    (tmp_path / "c.json").write_text(json.dumps(ceil))
    path = _edited(tmp_path, "r.json", lambda d: d.update(ceilings=None))
    rc, _, err = _main(capsys, "report", path, "--ceilings", str(tmp_path / "c.json"), "--out", str(tmp_path / "rep"))
    assert rc == 2 and says in _one_line(err), err
    assert not (tmp_path / "rep").exists()


def test_a_corrupt_ceilings_cache_is_ignored_with_a_warning(tmp_path, capsys, monkeypatch):
    """The ceilings cache is a cache: one that cannot be read stopped `report` ("not a ceilings file"),
    where tilegemm's other caches are ignored with a warning and rewritten."""
    from tilegemm.bench import ceilings

    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path / "cache"))
    ceilings.cache_path("NVIDIA H200").parent.mkdir(parents=True, exist_ok=True)
    ceilings.cache_path("NVIDIA H200").write_text("{not json")
    path = _edited(tmp_path, "r.json", lambda d: d.update(ceilings=None))
    with pytest.warns(RuntimeWarning, match="ignoring the ceilings cache"):
        rc, _, err = _main(capsys, "report", path, "--out", str(tmp_path / "rep"))
    assert rc == 0 and (tmp_path / "rep" / "report.md").exists(), err


def test_a_report_folder_that_cannot_take_the_report_is_said_before_any_plot(tmp_path, capsys):
    """report.md a folder there: the plots were written, then "[Errno 21] Is a directory", and the
    folder held plots and no report."""
    path = _edited(tmp_path, "r.json", lambda d: None)
    (tmp_path / "rep" / "report.md").mkdir(parents=True)
    rc, _, err = _main(capsys, "report", path, "--out", str(tmp_path / "rep"))
    assert rc == 2 and "--out" in _one_line(err) and "report.md: it is a folder" in err
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == ["report.md"]
