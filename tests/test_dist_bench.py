"""`tilegemm dist-bench` end to end on the CPU: two gloo processes, every mode this torch has,
each result checked, the document and its table (the GPU run is the benchmark)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tilegemm import cli

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def _check_doc(doc: dict, sizes: list[int]) -> None:
    from tilegemm.bench.distributed import render

    recs = doc["records"]
    assert doc["harness"]["backend"] == "gloo" and doc["harness"]["world"] == 2
    for n in sizes:
        mine = {r["variant"]: r for r in recs if r["n"] == n}
        assert set(mine) == {"one-gpu", "one-gpu/tilegemm", "1d", "summa 1x2", "dtensor", "dtensor-rs"}, set(mine)
        for r in mine.values():
            assert "error" not in r, r
            assert r["ms"] > 0 and r["tflops"] > 0 and r["rel_err"] < 1e-5
            assert r["mode"] in ("one-gpu", "1d", "summa", "dtensor", "dtensor-rs")
            assert r["speedup"] > 0 and r["m"] == r["n"] == r["k"] == n and r["dtype"] == "float32"
        assert mine["one-gpu"]["speedup"] == 1.0 and mine["one-gpu"]["gpus"] == 1
        for v in ("1d", "summa 1x2", "dtensor", "dtensor-rs"):
            r = mine[v]
            assert r["gpus"] == 2 and 0 < r["efficiency"] <= 1 and r["comm_share"] == pytest.approx(1 - r["efficiency"])
    table = render(doc)
    assert "CPU processes (gloo; not a GPU's times" in table and "| 1d |" in table and "summa 1x2" in table


def test_dist_bench_on_cpu(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU run; on GPUs the command runs the full sizes")
    path = tmp_path / "scaleout.json"
    assert cli.main(["dist-bench", "--runs", "2", "--reps", "3", "--sizes", "64,100", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "No CUDA GPU: 2 CPU processes over gloo" in out and "results written to" in out
    doc = json.loads(path.read_text())
    assert doc["schema"] == "tilegemm.scaleout/1" and doc["harness"]["runs"] == 2
    assert all(len(r["ms_runs"]) == 2 for r in doc["records"])
    _check_doc(doc, [64, 100])


def test_dist_bench_under_torchrun(tmp_path):
    """As on several hosts: torchrun starts the processes, the module runs in each."""
    path = tmp_path / "scaleout.json"
    env = dict(os.environ, PYTHONPATH=SRC, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "tilegemm.bench.distributed", "--runs", "1", "--reps", "3", "--sizes", "72",
                          "--json", str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| 72 | 1d | 2 |" in run.stdout
    _check_doc(json.loads(path.read_text()), [72])


@pytest.mark.parametrize("argv, says", [
    (["--modes", "1d,bogus"], "unknown mode bogus"),
    (["--sizes", "12x"], "--sizes '12x': comma-separated integers"),
    (["--gpus", "1"], "at least 2"),
    (["--runs", "0"], "at least 1"),
])
def test_dist_bench_mistakes_get_one_line(argv, says, capsys):
    assert cli.main(["dist-bench", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err
