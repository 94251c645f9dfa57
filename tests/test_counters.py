"""`tilegemm counters`: reading ncu's raw CSV, the stall reasons, the table, and the targets a
user names. The profiling itself needs a GPU and ncu (the GPU test at the end)."""

from __future__ import annotations

import numpy as np
import pytest

import tilegemm._cuda as _cuda
from tilegemm.bench import counters

RAW = """==PROF== Connected to process 1
"ID","Kernel Name","gpu__time_duration.sum","smsp__inst_executed.sum","launch__registers_per_thread",\
"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",\
"smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio","device__attribute_display_name"
"","","ns","inst","register/thread","ratio","ratio",""
"0","k(Array<float, 2>)","3,287,104","2628000000","163","0.04","0.20","NVIDIA H200"
==PROF== Disconnected from process 1
"""


def test_raw_csv_drops_the_units_row_and_reads_numbers():
    [rec] = counters.parse_raw_csv(RAW)
    assert rec["gpu__time_duration.sum"] == 3287104.0 and rec["launch__registers_per_thread"] == 163.0
    assert rec["Kernel Name"] == "k(Array<float, 2>)" and rec["device__attribute_display_name"] == "NVIDIA H200"
    assert counters.stalls(rec) == {"short_scoreboard": 0.20, "barrier": 0.04}  # largest first
    assert counters.parse_raw_csv(RAW.replace('"0","k(', '"","k(')) == []  # a row without a launch ID
    assert counters.parse_raw_csv("==PROF== nothing profiled\n") == []


def test_table_has_a_column_per_target_and_the_stalls():
    [rec] = counters.parse_raw_csv(RAW)
    metrics = {k: v for k, v in rec.items() if isinstance(v, float)}
    doc = {"records": [{"target": "budget", "metrics": dict(metrics, ffma_warp_inst=0.8 * 2628000000)},
                       {"target": "cublas", "error": "ncu failed"}]}
    lines = counters.table_md(doc)
    assert lines[0] == "| counter | `budget` |"  # a failed target has no column
    text = "\n".join(lines)
    assert "| duration (ms) | 3.287 |" in text and "| registers / thread | 163 |" in text
    assert "| FFMA share of instructions (M·N·K/32 FFMA) | 80.0% |" in text
    assert "| stalled: short scoreboard (warps per issue) | 0.20 |" in text
    assert "DRAM" not in text  # a counter nobody reported is left out, not shown as a dash row
    assert counters.table_md({"records": []}) == []


@pytest.mark.parametrize("target, says", [
    ("nosuch", "no kernel named 'nosuch'"),
    ("cublas:BK=16", "cublas takes no configuration"),
    ("unrolled:BK", "bad override 'BK'"),
    ("unrolled:XX=1", "has no field 'XX'"),
    ("naive:BK=16", "naive has no configuration to change"),
    ("unrolled:BM=96", "multiples of WM"),
    ("unrolled:WM=0", "must be positive"),  # was ZeroDivisionError, a traceback
    ("unrolled:WN=-32", "must be positive"),  # was accepted (every rule holds for a negative width)
    ("budget:BK=0", "must be positive"),
    ("unrolled:vector=ture", "vector=ture: a yes or no"),
    ("tc_tiled", "not an FP32 SIMT kernel"),
    ("cpu_blas", "not an FP32 SIMT kernel"),
])
def test_a_bad_target_is_refused_before_ncu_runs(target, says, monkeypatch):
    """`collect` checks every target before it asks for a GPU or starts ncu (none is started here:
    subprocess.run would fail the test)."""
    monkeypatch.setattr(counters.subprocess, "run", lambda *a, **kw: pytest.fail("ncu started"))
    with pytest.raises((ValueError, KeyError)) as e:
        counters.collect(["budget", target], (64, 64, 64))
    assert says in str(e.value)


def test_a_run_past_its_time_is_a_record_not_a_traceback(monkeypatch):
    def slow(*a, timeout=None, **kw):
        raise counters.subprocess.TimeoutExpired("ncu", timeout)

    monkeypatch.setattr(counters.subprocess, "run", slow)
    rec = counters.profile("budget", (64, 64, 64), "ncu", timeout_s=5)
    assert rec["error"] == "ncu did not finish in 5 s" and "metrics" not in rec


def test_a_configuration_target_runs_that_configuration(monkeypatch):
    """`unrolled:BK=16:min_blocks=1` launches k14's generator with those two fields changed."""
    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.validate import integer_operands

    kernel, overrides = counters._parse_target("unrolled:BK=16:min_blocks=1:vector=0")
    launch = counters._launcher(kernel, overrides)
    seen = []
    real = k14.launch_config
    monkeypatch.setattr(k14, "launch_config", lambda cfg, *a, **kw: (seen.append(cfg), real(cfg, *a, **kw))[1])
    a, b = integer_operands(9, 12, 20, seed=1)
    cuda = _cuda.cuda
    dc = cuda.device_array((9, 12), dtype=np.float32)
    launch(cuda.to_device(a), cuda.to_device(b), dc)
    assert (seen[0].BK, seen[0].min_blocks, seen[0].vector) == (16, 1, False)
    assert np.array_equal(dc.copy_to_host(), a.astype(np.float64) @ b.astype(np.float64))


def test_k15_and_k16_take_a_configuration_of_their_own(monkeypatch):
    """`big_tile:lane_rows=0` is k16's configuration (not k14's) with one field changed."""
    import dataclasses

    from tilegemm.kernels.simt import k14_unrolled as k14
    from tilegemm.kernels.simt import k15_register_budget as k15
    from tilegemm.kernels.simt import k16_big_tile as k16

    seen = []
    monkeypatch.setattr(k14, "run_config", lambda cfg, *a, **kw: seen.append(cfg))
    monkeypatch.setattr(k14.k10, "vector_ok", lambda *a: True)
    for target, want in (("big_tile:lane_rows=0", dataclasses.replace(k16.DEFAULT, lane_rows=False)),
                         ("budget:BK=16", dataclasses.replace(k15.DEFAULT, BK=16))):
        counters._launcher(*counters._parse_target(target))(None, None, None)
        assert seen[-1] == want, target


@pytest.mark.gpu
def test_counters_of_a_rung_and_cublas_on_the_gpu():
    doc = counters.collect(["budget", "cublas"], (2048, 2048, 2048))  # k15's own kernel (no split-K at this size)
    by = {r["target"]: r for r in doc["records"]}
    assert all("error" not in r for r in by.values()), [r.get("error") for r in by.values()]
    assert by["budget"]["metrics"]["launch__registers_per_thread"] > 128
    assert "sgemm" in by["cublas"]["kernel_name"].lower() or "gemm" in by["cublas"]["kernel_name"].lower()
    assert counters.stalls(by["budget"]["metrics"]) and len(counters.table_md(doc)) > 10
