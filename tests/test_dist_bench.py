"""`tilegemm dist-bench` end to end on the CPU: two gloo processes, every mode this torch has,
each result checked, the document and its table (the GPU run is the benchmark)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

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
        assert mine["1d"]["panel"] >= 1 and mine["summa 1x2"]["panel"] >= 1  # the widths the engines ran with
        assert "panel" not in mine["dtensor"]
    table = render(doc)
    assert "CPU processes (gloo; not a GPU's times" in table and "summa 1x2" in table
    for n in sizes:  # the panel width each engine ran, in its row (a --panel past K runs all of K at once)
        mine = {r["variant"]: r for r in recs if r["n"] == n}
        assert f"| {n} | 1d, panel {mine['1d']['panel']} |" in table and f"| {n} | dtensor |" in table
    assert "products alone (timed in turn with the product)" in table and doc["harness"]["products_alone"]


def test_dist_bench_on_cpu(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU run; on GPUs the command runs the full sizes")
    path = tmp_path / "scaleout.json"
    assert cli.main(["dist-bench", "--runs", "2", "--reps", "3", "--sizes", "64,100", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "No CUDA GPU: 2 CPU processes over gloo" in out and "results written to" in out
    assert "host split: not run" in out and out.count("fused-ag-mm: not run (") == 1
    doc = json.loads(path.read_text())
    assert doc["schema"] == "tilegemm.scaleout/1" and doc["harness"]["runs"] == 2
    assert all(len(r["ms_runs"]) == 2 for r in doc["records"])
    _check_doc(doc, [64, 100])


def test_dist_bench_under_torchrun(tmp_path):
    """As on several hosts: torchrun starts the processes, the module runs in each."""
    path = tmp_path / "scaleout.json"
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1",
               CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "tilegemm.bench.distributed", "--runs", "1", "--reps", "3", "--sizes", "72",
                          "--json", str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"\| 72 \| 1d, panel \d+ \| 2 \|", run.stdout)
    _check_doc(json.loads(path.read_text()), [72])


@pytest.mark.parametrize("argv, says", [
    (["--modes", "1d,bogus"], "unknown mode bogus"),
    (["--sizes", "12x"], "--sizes '12x': comma-separated integers"),
    (["--gpus", "1"], "at least 2"),
    (["--gpus", "0"], "--gpus 0: "),  # (it ran on 2 processes)
    (["--gpus", "100000"], "--gpus 100000: "),  # (it started them all, each with torch loaded)
])
def test_dist_bench_mistakes_get_one_line(argv, says, capsys):
    assert cli.main(["dist-bench", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_cpu_sizes_past_the_hosts_memory_are_refused_before_any_rank_starts(capsys, monkeypatch):
    """--sizes 100000 on CPUs: each rank printed torch's "DefaultCPUAllocator: can't allocate
    memory" and was killed (exit -9), or took the host's memory from everything else."""
    from tilegemm import arrays

    if torch.cuda.is_available():
        pytest.skip("checks the CPU run")
    monkeypatch.setattr(arrays, "available_host_bytes", lambda: 10**9)
    for modes, says in (("1d", "take 1.2 GB over the ranks, and 1.0 GB are free here"),
                        ("one-gpu,1d", "and as much again for one process's whole product")):
        assert cli.main(["dist-bench", "--sizes", "160,10000", "--modes", modes]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("tilegemm dist-bench: --sizes 10000: float32 A, B and C of N = 10000") and says in err, err
        assert len(err.splitlines()) == 1


def test_every_mode_not_run_says_why_and_nothing_to_run_is_refused(capfd):
    """A mode this run cannot measure gets one line saying why (fused-ag-mm's table was empty,
    with no word); where no mode asked for can run, one line and exit 2, before any process starts."""
    if torch.cuda.is_available():
        pytest.skip("checks the CPU run")
    assert cli.main(["dist-bench", "--runs", "1", "--reps", "1", "--sizes", "16",
                     "--modes", "1d,fused-ag-mm,host-split"]) == 0
    out = capfd.readouterr().out
    assert re.search(r"\| 16 \| 1d, panel \d+ \| 2 \|", out)
    assert out.count("fused-ag-mm: not run (") == 1 and out.count("host split: not run (") == 1
    for modes, says in (("fused-ag-mm", "fused-ag-mm: not run (torch.ops.symm_mem.fused_all_gather_matmul runs on "
                                        "GPUs over NCCL"),
                        ("fused-ag-mm,host-split", "host split: not run ("), (",", "--modes names no mode")):
        assert cli.main(["dist-bench", "--modes", modes]) == 2
        got = capfd.readouterr()
        err = got.err.strip()
        assert err.startswith("tilegemm dist-bench: nothing to run: ") and len(err.splitlines()) == 1, err
        assert says in err and "No CUDA GPU" not in got.out


def test_cpu_ranks_start_with_one_blas_thread_each(monkeypatch):
    """The CPU ranks start with OMP_NUM_THREADS and OPENBLAS_NUM_THREADS in their environment (one
    thread each, or what the caller set): a rank loads OpenBLAS when it imports NumPy, before its
    own code runs, and two ranks' BLAS threads on two cores took a product at N = 160 from 0.2 ms
    to 12–47 ms (its products alone as slow: an efficiency of 1.000). This process's environment
    is left as it was."""
    import multiprocessing

    if torch.cuda.is_available():
        pytest.skip("checks the CPU run")
    started = []

    class Process:  # records the environment each rank would start with, and ends at once
        exitcode = 0

        def __init__(self, target, args):
            pass

        def start(self):
            started.append({k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")})

        def join(self):
            pass

    monkeypatch.setattr(multiprocessing, "get_context", lambda how: type("Spawn", (), dict(Process=Process)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert cli.main(["dist-bench", "--runs", "1", "--sizes", "16", "--modes", "1d"]) == 0
    assert started == [dict(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")] * 2
    assert "OMP_NUM_THREADS" not in os.environ and "OPENBLAS_NUM_THREADS" not in os.environ
    started.clear()
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the caller's choice stands, for OpenBLAS too
    assert cli.main(["dist-bench", "--runs", "1", "--sizes", "16", "--modes", "1d", "--gpus", "3"]) == 0
    assert started == [dict(OMP_NUM_THREADS="3", OPENBLAS_NUM_THREADS="3")] * 3
    assert os.environ["OMP_NUM_THREADS"] == "3" and "OPENBLAS_NUM_THREADS" not in os.environ


def test_numpy_figures_and_the_model_beside_a_run():
    """The host split's NumPy figures (speed-up against torch's round trip, copy share against the
    same split from CUDA operands) and costmodel.compare on a run's records, by hand-made numbers."""
    from tilegemm.bench.distributed import _numpy_figures
    from tilegemm.distributed import costmodel

    recs = [dict(variant="one-gpu/numpy", n=16384, ms=400.0, speedup=1.0),
            dict(variant="host-split/numpy", n=16384, ms=50.0),
            dict(variant="host-split/fp16", n=16384, ms=10.0, speedup=1.2)]
    # the runs: one-gpu 400, 800, 300 ms; the split 50, 200, 20 (its third run failed its check: left out);
    # run by run 8, 4: median 6 (the medians' ratio, 400 / 50, paired run 1's with run 1's only by chance)
    per = {(16384, "one-gpu/numpy", False): [dict(ms_reps=[400.0]), dict(ms_reps=[800.0]), dict(ms_reps=[300.0])],
           (16384, "host-split/numpy", False): [dict(ms_reps=[50.0]), dict(ms_reps=[200.0]), dict(error="x")]}
    _numpy_figures(recs, per)
    by = {r["variant"]: r for r in recs}
    assert by["host-split/numpy"]["speedup"] == 6.0 and by["host-split/numpy"]["comm_share"] == pytest.approx(0.8)
    assert by["host-split/numpy"]["efficiency"] == pytest.approx(0.2)
    assert "speedup" not in by["host-split/fp16"] and "speedup" not in by["one-gpu/numpy"]
    assert all(r["dtype"] == "float16" for r in recs)

    n = 32768
    one = dict(variant="one-gpu", mode="one-gpu", n=n, m=n, k=n, gpus=1, ms=100.0, tflops=2 * n ** 3 / 0.1 / 1e12)
    hw = costmodel.measured_hardware(dict(records=[one], harness=dict(world=2, local_world=2)))
    assert hw.gpus_per_host == 2 and hw.rate == {n: one["tflops"]}
    # a record without `ahead` ran its all-gathers beside the GEMMs (before it was recorded)
    want = costmodel.predict(n, n, n, (2, 1), hw, panel=4096, ahead=True)["seconds"] * 1e3
    d1 = dict(variant="1d", mode="1d", n=n, m=n, k=n, gpus=2, ms=want, panel=4096)
    d2 = dict(d1, ms=want * 1.5)
    text = costmodel.compare(dict(records=[one, d1], harness=dict(world=2, local_world=2)),
                             extra=(("worse", dict(records=[one, d2]), 4096),))
    assert "1 of 2 within 10%" in text and "| the committed run | 32768 | 1d 2×1 | 4096 |" in text
    assert "1.00 |" in text and "0.67 **miss**" in text
    after = costmodel.predict(n, n, n, (2, 1), hw, panel=4096, ahead=False)["seconds"] * 1e3
    assert after != pytest.approx(want)
    d3 = dict(d1, variant="1d/nccl", ms=after, transport="nccl", ahead=False)
    text = costmodel.compare(dict(records=[one, d3], harness=dict(world=2, local_world=2)))
    assert "1 of 1 within 10%" in text and "1d 2×1 (nccl, after) | 4096 |" in text and "1.00 |" in text


def test_the_1d_panel_fits_in_free_memory():
    """_widest_1d: two gathered panels, two packed pieces and a reordered copy, each K_max rows,
    beside C's rows in 90% of the least free memory; no cap on CPU processes."""
    from tilegemm.distributed import _core

    def meta(free_mib, rows=32768, kb=32768, world=2):
        m = [0] * 13
        m[_core.AR], m[_core.BR], m[_core.FREE] = rows, kb, free_mib
        return [list(m) for _ in range(world)]

    assert _core._widest_1d(meta(0), 65536, 2, 2) is None
    w = _core._widest_1d(meta(60 * 1024), 65536, 2, 2)
    room = 0.9 * 60 * 2**30 - 32768 * 65536 * 2
    assert w % 1024 == 0 and w * 8 * 32768 * 2 <= room < (w + 1024) * 8 * 32768 * 2
    two = meta(60 * 1024)
    two[1][_core.FREE] = 30 * 1024  # the least free memory over the ranks decides, the same on each
    assert _core._widest_1d(two, 65536, 2, 2) < w
    assert _core._widest_1d(meta(1), 65536, 2, 2) == 1024  # never under one 1024-wide panel


def test_grids_and_the_product_beyond_the_gpus():
    """Every SUMMA grid but P × 1 is measured (1×4 and 2×2 on 4 GPUs; 1×8, 2×4 and 4×2 on 8); the
    product beyond the GPUs' memory exceeds one GPU's on 2 and half of the GPUs' from 4."""
    from tilegemm.bench.distributed import beyond_gpus, summa_grids

    assert summa_grids(2) == [(1, 2)] and summa_grids(4) == [(1, 4), (2, 2)]
    assert summa_grids(8) == [(1, 8), (2, 4), (4, 2)] and summa_grids(6) == [(1, 6), (2, 3), (3, 2)]
    assert summa_grids(3) == [(1, 3)]
    assert [beyond_gpus(w) for w in (2, 3, 4, 8)] == [1, 1, 2, 4]


def test_the_peer_transport_fits_or_is_not_taken():
    """_peer_fits: two mapped buffers of all of B (its panels are gathered in them) and C's rows,
    in 90% of the least free memory over the ranks; one rank short of room: no rank takes it."""
    from tilegemm.distributed import _core

    def meta(free_mib, rows=8192, kb=8192, world=4, held_mib=0):
        m = [0] * (_core.HELD + 1)
        m[_core.AR], m[_core.BR], m[_core.FREE], m[_core.HELD] = rows, kb, free_mib, held_mib
        return [list(m) for _ in range(world)]

    need = (2 * 32768 * 32768 + 8192 * 32768) * 2  # bytes at N = 32768 on 4 ranks
    fits = int(need / 0.9 / 2**20) + 1
    assert _core._peer_fits(meta(fits), 32768, 2)
    assert not _core._peer_fits(meta(fits - 2), 32768, 2)
    tight = meta(fits)
    tight[2][_core.FREE] = int(need / 2**20) // 2
    assert not _core._peer_fits(tight, 32768, 2)
    pair = 2 * 32768 * 32768 * 2 >> 20  # the same product again: the pair it mapped is free to it
    assert _core._peer_fits(meta(fits - pair, held_mib=pair), 32768, 2)


def test_pack_moves_words_where_it_can():
    """_pack (the peer transport's own rows into its panels): in 8-byte words where rows and
    starts allow, element by element where not; the same values either way."""
    import torch

    from tilegemm.distributed._core import _pack

    src = torch.arange(6 * 40, dtype=torch.float32).view(6, 40).to(torch.bfloat16)
    for n0, n1 in [(0, 16), (8, 40), (3, 10), (4, 9)]:  # word-aligned, and not
        dst = torch.zeros(10, n1 - n0, dtype=torch.bfloat16)
        _pack(dst[2:8], src[:, n0:n1])
        assert torch.equal(dst[2:8], src[:, n0:n1]) and not dst[:2].any() and not dst[8:].any()


def test_the_model_beside_a_run_takes_each_products_own_rate():
    """costmodel.compare: a record that measured its products alone is predicted at their rate, so
    only the communication and its overlap are tested; the peer transport loses nothing beside
    its copies; SUMMA on a 2-D grid runs two broadcasts beside each GEMM (overlap squared)."""
    import dataclasses

    from tilegemm.distributed import costmodel

    n = 32768
    hw = costmodel.Hardware("x", rate={n: 700.0}, link_gbps=300.0, gpus_per_host=4)
    peer = costmodel.predict(n, n, n, (4, 1), hw.beside_copies(), panel=4096)
    nccl = costmodel.predict(n, n, n, (4, 1), hw, panel=4096)
    assert peer["seconds"] < nccl["seconds"] and peer["efficiency"] > 0.95
    flat, square = (costmodel.predict(n, n, n, g, hw, panel=8192) for g in ((1, 4), (2, 2)))
    assert square["efficiency"] < flat["efficiency"]  # two collectives beside each GEMM
    local = 2 * n ** 3 / 4 / 650e12 * 1e3  # the products alone at 650 TFLOP/s
    one = dict(variant="one-gpu", mode="one-gpu", n=n, m=n, k=n, gpus=1, ms=100.0, tflops=2 * n ** 3 / 0.1 / 1e12)
    rec = dict(variant="1d", mode="1d", n=n, m=n, k=n, gpus=4, panel=4096, transport="peer", local_ms=local)
    own = costmodel._own_rate(costmodel.Hardware("x").beside_copies(), rec, (4, 1), 4096)
    assert own.fixed_tflops == pytest.approx(650.0)
    want = costmodel.predict(n, n, n, (4, 1), dataclasses.replace(own, link_gbps=312.0, link_latency_us=20.0),
                             panel=4096)["seconds"] * 1e3
    doc = dict(records=[one, dict(rec, ms=want)], harness=dict(world=4, local_world=4),
               links=dict(allgather_gbps=312.0, step_latency_us=20.0))
    text = costmodel.compare(doc)
    assert "links 312 GB/s and 20 µs" in text and "1 of 1 within 10%" in text and "| 1d 4×1 (peer) | 4096 |" in text


def test_the_product_beyond_first(tmp_path, capfd):
    """--beyond first: the product beyond the GPUs' memory (on CPU processes a small stand-in)
    runs before the sizes in each run, nothing held from them; its record says so."""
    if torch.cuda.is_available():
        pytest.skip("checks the CPU run")
    path = tmp_path / "scaleout.json"
    assert cli.main(["dist-bench", "--runs", "1", "--reps", "2", "--sizes", "48", "--modes", "1d",
                     "--beyond", "first", "--json", str(path)]) == 0
    lines = [x for x in capfd.readouterr().out.splitlines() if x.startswith("run 1/1")]
    assert "(beyond one GPU)" in lines[0] and "N=48 " in lines[-1], lines
    doc = json.loads(path.read_text())
    assert doc["harness"]["beyond"] == "first" and doc["links"]["allgather_gbps"] > 0
    big = [r for r in doc["records"] if r["beyond_one_gpu"]]
    assert len(big) == 1 and big[0]["beyond_gpus"] == 1 and big[0]["reps"] == 2 and "error" not in big[0]


def test_the_host_id_is_one_number_per_machine():
    """The metadata's host id (the peer transport is taken only where every rank's is the same)."""
    from tilegemm.distributed import _core

    h = _core._host_id()
    assert h == _core._host_id() and 0 <= h < 2**62


def test_products_alone_are_timed_in_turn_with_the_product(tmp_path):
    """_Clock.pairs: warm calls of each (four, where they fit: a peer engine's graphs are
    captured by then), then the product and its products alone alternately,
    as many repeats of each, the product's last (its C is what the result check reads); a run
    without the harness's word says its products alone were timed after the product."""
    import torch.distributed as dist

    from tilegemm.bench.distributed import _Clock, render

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        calls = []
        mine, alone = _Clock(torch.device("cpu")).pairs(lambda: calls.append("f"), lambda: calls.append("l"), 4, 1.0)
        slow = []  # a call that does not fit four times in a quarter of the budget: two warm calls
        _Clock(torch.device("cpu")).repeats(lambda: slow.append(time.sleep(0.01)), 3, 0.1)
    finally:
        dist.destroy_process_group()
    assert calls == ["f"] * 4 + ["l"] * 4 + ["f", "l", "l", "f", "f", "l", "l", "f"]
    assert len(mine) == len(alone) == 4 and all(x >= 0 for x in mine + alone)
    assert len(slow) == 2 + 3
    assert "products alone (timed after the product's repeats)" in render(dict(records=[], harness=dict(world=2)))



def test_the_host_splits_rows_alone_say_how_they_were_timed():
    """The table says how the host split's rows alone were timed, from the harness's host_split
    words: in turn with the split (session 41 on) or after its repeats (the runs before)."""
    from tilegemm.bench.distributed import render

    rec = dict(variant="host-split", mode="host-split", n=16384, gpus=2, ms=7.0, tflops=1.2e3, ms_runs=[7.0])
    now = dict(records=[rec], harness=dict(world=2, host_split="… each GPU's rows alone timed in turn with the split"))
    before = dict(records=[rec], harness=dict(world=2, host_split="one process drives every GPU …"))
    assert "rows alone, at once, with nothing copied, timed in turn with the split." in render(now)
    assert "timed after the split's repeats." in render(before)
    assert "host split's efficiency" not in render(dict(records=[], harness=dict(world=2)))


def test_the_host_split_is_timed_back_to_back_and_its_efficiency_in_turn():
    """The host split's time (and speed-up) is its back-to-back repeats', as the one-GPU
    reference's; its efficiency is its rows alone over its time in turn with them, which the
    record and the table keep beside."""
    import torch

    from tilegemm.bench.distributed import records, render

    per = {(32768, "one-gpu", False): [dict(run=0, ms_reps=[100.0, 104.0, 102.0])],
           (32768, "host-split", False): [dict(run=0, ms_reps=[28.0, 29.0, 28.5], in_turn_reps=[30.0, 29.5, 30.5],
                                               local_reps=[27.0, 27.2, 26.8])]}
    split = next(r for r in records(per, 4, torch.bfloat16) if r["variant"] == "host-split")
    assert split["ms"] == 28.5 and split["in_turn_ms"] == 30.0 and split["local_ms"] == 27.0
    assert split["speedup"] == 102.0 / 28.5 and split["efficiency"] == 27.0 / 30.0
    text = render(dict(records=[split], harness=dict(world=4, host_split="… timed in turn with the split …")))
    assert "back-to-back calls" in text and "30.000 ms at 32768" in text
    assert "back-to-back" not in render(dict(records=[dict(split, in_turn_ms=None)], harness=dict(world=4)))
