"""tilegemm.distributed on CPU: gloo with 2 and 4 local processes (torchrun), two torchrun "hosts"
on this machine, ranks that die or stall, and the pure parts (panels, the layout check, the cost
model) in this process. Every distributed result is compared exactly with the single-process
product of small integers (tests/_dist_cases.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

from tilegemm.distributed import DistributedError, Hardware, choose, predict  # noqa: E402
from tilegemm.distributed import costmodel  # noqa: E402
from tilegemm.distributed._core import _panels, blocks, check_grid  # noqa: E402
from tilegemm.distributed._steps import peer_cuts, summa_blocks, summa_steps  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "_dist_cases.py")
# src first, then what the caller's path holds (the GPU machines' numpy wheel, for numba-cuda)
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1",
           PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(os.path.dirname(HERE), "src"), os.environ.get("PYTHONPATH")])),
           NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")


def _ephemeral_low() -> int:
    """The first port of the range the kernel hands out for port 0 (ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free_port() -> int:
    """A port free now, below the range the kernel hands out for port 0 (the other test shard's
    gloo connections and stores take theirs there): a port from that range, picked, closed and
    handed to torchrun, was taken meanwhile once and the agents waited out their timeout. Runs
    of one host need none: torchrun --standalone binds its own. Where that range starts too low to
    leave room below it (ip_local_port_range "1024 65535"), a port-0 bind's, as before."""
    import random
    import socket

    low = _ephemeral_low()
    below = range(max(1024, low - 12000), low)
    for port in random.sample(below, min(200, len(below))):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _results(outdir, world: int, least: int = 10) -> dict:
    """{case: [what failed on which rank]} over every rank's file; every rank must have written one."""
    failed: dict = {}
    names = None
    for r in range(world):
        path = os.path.join(outdir, f"rank{r}.json")
        assert os.path.exists(path), f"rank {r} wrote no results"
        doc = json.load(open(path))
        assert doc["world"] == world
        names = names or set(doc["results"])
        assert set(doc["results"]) == names, "the ranks ran different cases"
        for case, verdict in doc["results"].items():
            if verdict != "ok":
                failed.setdefault(case, []).append(f"rank {r}: {verdict}")
    assert len(names) >= least
    return failed


def _torchrun(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", *args], env=ENV, capture_output=True,
                          text=True, timeout=timeout)


TEARDOWN_ABORT = "terminate called without an active exception"


def _ended_well(rc: int, stderr: str, outdir, world: int) -> None:
    """Raise unless the run ended well enough for its results to be judged: a zero exit; or, once
    every rank has written its results, torch's gloo teardown aborting a rank (the one failure CI
    saw, about when the cases end: pytorch/pytorch#190489, #179291): the abort's message, and in
    torchrun's report only ranks that aborted (SIGABRT, -6) or that it then stopped (SIGTERM,
    -15). The harness leaves by os._exit after destroy_process_group to stay out of it; if
    destroy_process_group itself aborts, the results are still judged in full, with a warning."""
    if rc == 0:
        return
    wrote = [r for r in range(world) if os.path.exists(os.path.join(outdir, f"rank{r}.json"))]
    codes = set(re.findall(r"exitcode\s*:\s*(-?\d+)", stderr))
    if len(wrote) == world and TEARDOWN_ABORT in stderr and "-6" in codes and codes <= {"-6", "-15"}:
        warnings.warn(f"torchrun exited {rc}: a rank aborted in torch's gloo teardown after every rank wrote its "
                      "results", RuntimeWarning)
        return
    raise AssertionError(f"exit status {rc}; ranks that wrote their results: {wrote} of {world}\n{stderr[-3000:]}")


@pytest.mark.parametrize("world", [2, 4, 8])
def test_one_host(world, tmp_path):
    """1-D (B sharded and replicated), SUMMA on every grid of `world` ranks (8: 8×1, 4×2, 2×4 and
    1×8, what the eight-GPU run measures), prime sizes, empty blocks, a grid dimension larger than
    a matrix dimension, refusals, block moves, DTensors."""
    run = _torchrun(["--standalone", "--nproc-per-node", str(world), CASES, "all", str(tmp_path)])
    _ended_well(run.returncode, run.stderr, tmp_path, world)
    assert _results(tmp_path, world) == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_peer_transport_on_gpus(tmp_path):
    """The peer transports (NCCL, one process a GPU, every GPU of this host): the 1-D engine's
    panels of every width, uneven and empty rows of B, a grown mapped buffer, two streams; SUMMA's
    on every flat grid, ragged and empty blocks, FP32, two streams, a 2-D DTensor mesh; every
    rank's C exact."""
    world = torch.cuda.device_count()
    run = _torchrun(["--standalone", "--nproc-per-node", str(world), CASES, "peer", str(tmp_path)])
    assert run.returncode == 0, run.stderr[-3000:]
    assert _results(tmp_path, world, least=8) == {}


def test_two_hosts(tmp_path):
    """Two torchrun agents on this machine as two hosts of two ranks (--nnodes 2, a static
    rendezvous on localhost): the multi-host path, the process groups spanning both."""
    port = _free_port()
    common = ["--nnodes", "2", "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port)]
    hosts = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *common, "--node-rank", str(h),
                               CASES, "all", str(tmp_path)], env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for h in (0, 1)]
    try:
        outs = [h.communicate(timeout=300) for h in hosts]
    finally:
        for h in hosts:
            h.kill()
    for h, (_, err) in zip(hosts, outs):
        _ended_well(h.returncode, err, tmp_path, 4)
    assert _results(tmp_path, 4) == {}


@pytest.mark.parametrize("how", ["dies-before", "dies-during", "stalls"])
def test_a_failed_rank_ends_the_product_on_every_rank(how, tmp_path):
    """Rank 1 of 3 dies before the product, dies after its first panel, or never calls: ranks 0
    and 2 raise DistributedError (a timeout of 10 s bounds the stall); none hangs, none returns C."""
    run = subprocess.run([sys.executable, CASES, "killed", str(tmp_path), how], env=ENV, capture_output=True,
                         text=True, timeout=150)
    assert run.returncode == 0 and "hung ranks: []" in run.stdout, run.stdout + run.stderr[-2000:]
    for r in (0, 2):
        verdict = (tmp_path / f"{how}{r}.txt").read_text()
        assert "DistributedError" in verdict and "returned a result" not in verdict, verdict
        assert f"on rank {r}" in verdict, verdict
        seconds = float(verdict.split(" s:")[0])
        assert seconds < 30, verdict


def test_a_world_made_again_gets_new_groups(tmp_path):
    """SUMMA after destroy_process_group and a second init_process_group (an elastic restart)
    makes its grid groups in the new world: the first world's groups were shut down with it."""
    run = subprocess.run([sys.executable, CASES, "reinit", str(tmp_path)], env=ENV, capture_output=True,
                         text=True, timeout=200)
    assert run.returncode == 0 and "hung ranks: []" in run.stdout, run.stdout + run.stderr[-2000:]
    for r in (0, 1):
        assert (tmp_path / f"reinit{r}.txt").read_text() == "ok\nok", (tmp_path / f"reinit{r}.txt").read_text()


def test_only_a_teardown_abort_after_every_rank_wrote_is_judged(tmp_path):
    """The harness's one tolerance: a non-zero exit is judged by the results only when every rank
    wrote them, the abort is torch's gloo teardown and torchrun reports no other end; a rank
    without results, or any other failure beside the abort, fails the test."""
    abort = f"[rank1] {TEARDOWN_ABORT}\n  exitcode  : -15 (pid: 1)\n  exitcode  : -6 (pid: 2)\n"
    _ended_well(0, "", tmp_path, 2)
    (tmp_path / "rank0.json").write_text("{}")
    with pytest.raises(AssertionError, match=r"wrote their results: \[0\] of 2"):
        _ended_well(1, abort, tmp_path, 2)
    (tmp_path / "rank1.json").write_text("{}")
    with pytest.raises(AssertionError, match="exit status 1"):
        _ended_well(1, "Segmentation fault\n  exitcode  : -11 (pid: 2)\n", tmp_path, 2)
    with pytest.raises(AssertionError, match="exit status 1"):  # the abort, and another rank's own failure
        _ended_well(1, abort + "  exitcode  : 1 (pid: 3)\n", tmp_path, 2)
    with pytest.raises(AssertionError, match="exit status 1"):  # no report of an abort
        _ended_well(1, TEARDOWN_ABORT, tmp_path, 2)
    with pytest.warns(RuntimeWarning, match="gloo teardown"):
        _ended_well(1, abort, tmp_path, 2)


def _spawned(case: str, tmp_path) -> None:
    """One case of tests/_dist_cases.py's SPAWNED on 2 gloo ranks (their group times out after
    10 s, so a rank left waiting fails the case rather than hanging): every rank's verdict "ok"."""
    run = subprocess.run([sys.executable, CASES, "spawned", str(tmp_path), case], env=ENV, capture_output=True,
                         text=True, timeout=90)
    assert run.returncode == 0 and "hung ranks: []" in run.stdout, run.stdout + run.stderr[-2000:]
    for r in (0, 1):
        path = tmp_path / f"{case}{r}.txt"
        assert path.exists(), f"rank {r} wrote no verdict\n{run.stderr[-2000:]}"
        assert path.read_text() == "ok", f"rank {r}: {path.read_text()}"


def test_strided_blocks_give_the_exact_product(tmp_path):
    """Column-major blocks, and slices of wider tensors, in SUMMA (both grids of 2 ranks, so that
    B's rows and A's columns are each sent) and the 1-D engine: every C exact. A strided B's rows
    went to gloo as they lay in memory: a wrong C (max error 4.28 in float64), no error."""
    _spawned("strided blocks", tmp_path)


def test_ranks_that_call_different_engines_are_refused_together(tmp_path):
    """matmul_1d with b_sharded differing between the ranks (and SUMMA beside matmul_1d): refused
    on both ranks, naming the rank; rank 0 waited in an all-gather for good while rank 1 raised."""
    _spawned("engines disagree", tmp_path)


def test_16bit_blocks_on_cpus_are_refused_on_every_rank(tmp_path):
    """float16 and bfloat16 on gloo's CPUs: one DistributedError on every rank before anything is
    sent; one rank raised DTypeError at its first GEMM while the other (no rows of A) waited in the
    next all-gather."""
    _spawned("16-bit on CPUs", tmp_path)


def test_grid_and_panel_out_of_range_are_refused_by_name(tmp_path):
    """Non-positive grid entries and panels (and a panel that is not an integer): a DistributedError
    naming them and the ranks, on every rank (a bare ValueError, a RuntimeError from torch, or for
    matmul_1d a panel taken silently, before)."""
    _spawned("grid and panel out of range", tmp_path)


def test_review_mistakes_are_refused_together_or_exact(tmp_path):
    """Zero-size DTensor products and SUMMA 1 × P with M = 0 (a ZeroDivisionError in the cost
    model), panels wider than K or N (an allocator error), operands that require grad (one rank's
    AutogradError while the other waited out the timeout), a transport or grid one rank could not
    parse (the other waited in the all-gather), and the DTensor API's panel and grid checks."""
    _spawned("review mistakes", tmp_path)


def test_cost_model_of_zero_size_products():
    """A product with a zero-size dimension costs nothing: a prediction, not a ZeroDivisionError."""
    hw = costmodel.shipped(8)
    for m, n, k, grid in [(0, 3, 4, (1, 2)), (0, 3, 4, (1, 1)), (3, 0, 4, (1, 1)), (3, 4, 0, (1, 1)), (0, 0, 0, (2, 2))]:
        got = predict(m, n, k, grid, hw, 4)
        assert got["seconds"] == 0.0 and got["efficiency"] == 1.0, (m, n, k, grid, got)
    for gpus in (1, 2, 3, 4):
        assert choose(0, 5, 5, gpus, hw, 4)["seconds"] == 0.0


def test_dist_bench_under_torchrun_says_a_bad_setting_in_one_line(monkeypatch, capsys, tmp_path):
    """Under torchrun (python -m tilegemm.bench.distributed) a bad TILEGEMM_DIST_* setting or an
    unwritable --json is said in one line before any process group: each rank raised a traceback
    (the setting), or rank 0 raised after measuring a size (the --json)."""
    import argparse

    from tilegemm.bench import distributed as bench

    parser = argparse.ArgumentParser()
    bench._arguments(parser)
    for k in ("MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("TILEGEMM_DIST_GRAPHS", "maybe")
    assert bench.cli_dist_bench(parser.parse_args(["--sizes", "4", "--modes", "1d"])) == 2
    assert "TILEGEMM_DIST_GRAPHS='maybe'" in capsys.readouterr().err
    monkeypatch.delenv("TILEGEMM_DIST_GRAPHS")
    (tmp_path / "folder").mkdir()
    assert bench.cli_dist_bench(parser.parse_args(["--sizes", "4", "--modes", "1d", "--json",
                                                   str(tmp_path / "folder")])) == 2
    assert "it is a folder" in capsys.readouterr().err


def test_panels_cut_at_both_boundaries():
    # A's K over 2 grid columns: 5 | 6; B's K over 3 grid rows: 4 | 4 | 3
    ps = _panels([5, 6], [4, 4, 3], None)
    assert [(k0, k1) for k0, k1, _, _ in ps] == [(0, 4), (4, 5), (5, 8), (8, 11)]
    assert [(ja, ib) for _, _, ja, ib in ps] == [(0, 0), (0, 1), (1, 1), (1, 2)]
    assert [(k0, k1) for k0, k1, _, _ in _panels([11], [11], 4)] == [(0, 4), (4, 8), (8, 11)]
    assert _panels([0, 0], [0, 0], None) == []  # K = 0: no panel, C is zeros
    assert blocks(10, 4) == [0, 3, 6, 8, 10] and blocks(2, 4) == [0, 1, 2, 2, 2]


def test_layout_check_names_the_rank():
    # by place: global rank, dtype A, dtype B, device, A rows, A cols, B rows, B cols, grid, panel, GPUs a host,
    # free MiB, peer-capable, transport, host, MiB held, engine (0: SUMMA), local GEMM runs, panel given, grad, DTensor,
    # layout bits
    def meta(g, a_rows, a_cols, b_rows, b_cols, db=2, grid=(2, 1), panel=0, da=2, runs=1, layout=0):
        return [g, da, db, 0, a_rows, a_cols, b_rows, b_cols, *grid, panel, 0, 0, 0, 0, 0, 0, 0, runs, int(panel != 0),
                0, 0, layout]

    with pytest.raises(DistributedError, match="A's blocks span K = 6"):
        check_grid([meta(0, 4, 6, 6, 3), meta(1, 4, 6, 6, 3)], 2, 1)  # K = 6 + 6 rows of B against 6 columns
    good = [meta(0, 4, 12, 6, 3), meta(1, 5, 12, 6, 3)]
    assert check_grid(good, 2, 1) == ([4, 5], [3], [12], [6, 6])
    with pytest.raises(DistributedError) as e:
        check_grid([good[0], meta(1, 5, 12, 6, 4, db=3)], 2, 1)
    assert "rank 1: B is float64" in str(e.value) and "rank 1 (grid 1,0): B has 4 columns" in str(e.value)
    with pytest.raises(DistributedError, match="rank 7 was called with grid 1×2 and panel 64, rank 0 with 2×1"):
        check_grid([good[0], meta(7, 5, 12, 6, 3, grid=(1, 2), panel=64)], 2, 1)
    with pytest.raises(DistributedError, match="rank 1: its blocks are not 2-D"):
        check_grid([good[0], meta(1, -1, -1, 6, 3)], 2, 1)
    with pytest.raises(DistributedError, match="grid 2×2 has 4 places for 2 ranks"):
        check_grid([meta(0, 4, 12, 6, 3, grid=(2, 2)), meta(1, 5, 12, 6, 3, grid=(2, 2))], 2, 2)
    with pytest.raises(DistributedError, match="ranks 0, 1 were called with grid -1×-2: a grid is a positive"):
        check_grid([meta(0, 4, 12, 6, 3, grid=(-1, -2)), meta(1, 5, 12, 6, 3, grid=(-1, -2))], -1, -2)
    with pytest.raises(DistributedError, match="rank 1 was called with panel -3: a panel is a positive"):
        check_grid([good[0], meta(1, 5, 12, 6, 3, panel=-3)], 2, 1)
    with pytest.raises(DistributedError, match="ranks 0, 1: tilegemm has no kernel for float16 on the CPU"):
        check_grid([meta(0, 4, 12, 6, 3, da=0, db=0, runs=0), meta(1, 5, 12, 6, 3, da=0, db=0, runs=0)], 2, 1)
    with pytest.raises(DistributedError) as e:  # (A on the meta device: no local product runs, and no dtype is blamed)
        check_grid([good[0], meta(1, 5, 12, 6, 3, runs=0, layout=4 | 8)], 2, 1)
    assert "rank 1: A is on the meta device" in str(e.value) and "no kernel" not in str(e.value)
    with pytest.raises(DistributedError, match="rank 0: A is not a dense .*rank 1: B is not a dense"):
        check_grid([meta(0, 4, 12, 6, 3, layout=1), meta(1, 5, 12, 6, 3, layout=2)], 2, 1)


@pytest.mark.parametrize("mi,nj,a_moves,b_moves,panel", [
    (16384, 16384, True, True, None), (8192, 8192, True, True, None), (150, 260, True, True, 64),
    (5, 3, True, True, 2), (0, 300, True, True, None), (32768, 8192, True, False, None),
    (4096, 16384, False, True, None), (777, 50, True, False, 200), (9, 7, False, False, None),
    (16400, 12352, True, True, None), (0, 0, True, True, 16), (1, 0, True, True, 16), (0, 64, True, False, None)])
def test_peer_steps_tile_c_once_reading_only_what_landed(mi, nj, a_moves, b_moves, panel):
    """The peer transport's SUMMA steps: every element of C_ij multiplied exactly once, each block
    at a step whose band of A and panel of B (and every earlier one) have landed; only what moves
    is cut; edges rise from 0 to the whole, and with both moving, cut where the tiles are."""
    bands, cols, width = summa_steps(mi, nj, a_moves, b_moves, panel)
    assert len(bands) == len(cols) and bands[0] == cols[0] == 0
    if len(bands) == 1:  # no step: only where C's block is empty (the engine copies and multiplies nothing)
        assert mi == 0 and a_moves or nj == 0 and b_moves
        return
    assert bands[-1] == mi and cols[-1] == nj
    assert list(bands) == sorted(bands) and list(cols) == sorted(cols) and (width > 0 or mi * nj == 0)
    covered = np.zeros((mi, nj), dtype=bool)  # (at most 2^28 bytes: 16384², 32768×8192)
    for s in range(len(bands) - 1):
        for r0, r1, c0, c1 in summa_blocks(bands, cols, s):
            assert r1 <= bands[s + 1] and c1 <= cols[s + 1], (s, r0, r1, c0, c1)
            assert 0 <= r0 <= r1 and 0 <= c0 <= c1, (s, r0, r1, c0, c1)
            assert not covered[r0:r1, c0:c1].any(), ("multiplied twice", s, r0, r1, c0, c1)
            covered[r0:r1, c0:c1] = True
    assert covered.all()
    if not a_moves:
        assert set(bands[1:]) <= {mi}  # A_i is read where it lies: one band
    if not b_moves:
        assert set(cols[1:]) <= {nj}
    if a_moves and b_moves and min(mi, nj) >= 4096:
        assert 2 <= len(bands) - 1 <= 8 and all(x % 128 == 0 for x in bands[:-1]) and all(x % 256 == 0 for x in cols[:-1])


def test_pack_in_words_only_where_the_views_allow():
    """The own rows' copy into the mapped buffer: 8-byte words where every stride and the storage
    offset are whole words, else element by element; the same values either way (3-D views too)."""
    import torch

    from tilegemm.distributed._core import _pack, _PackPlan

    src = torch.arange(4 * 24, dtype=torch.float16).view(4, 24)
    for off in (0, 1, 4):  # a storage offset of one element cannot be seen as 8-byte words
        flat = torch.zeros(off + 6 * 24, dtype=torch.float16)
        dst = flat[off:off + 6 * 24].view(6, 24)[1:5]
        _pack(dst, src)
        assert torch.equal(dst, src)
    k, n, even, odd = 10, 24, [(0, 8), (8, 16), (16, 24)], [(0, 3), (3, 10), (10, 17), (17, 24)]
    for dtype in (torch.float16, torch.float32, torch.int8):  # 2-, 4- and 1-byte elements: 4, 2 and 8 to a word
        unit = 8 // torch.empty((), dtype=dtype).element_size()
        b = torch.arange(4 * n, dtype=torch.float32).view(4, n).to(dtype)  # (exact in each)
        shifted = torch.zeros(1 + 4 * n, dtype=dtype)  # B's rows one element off their words
        shifted[1:] = b.flatten()
        wide = torch.zeros(4, n + 2, dtype=dtype)  # one row of B cut from a wider tensor: "contiguous", its stride
        wide[0, :n] = b[1]  # not whole words for 2- and 1-byte elements
        for panels, buf_off, rows, kr in ((even, 0, b, 4),  # in words
                                          (even, 0, shifted[1:].view(4, n), 4),
                                          (even, 0, wide[:1, :n], 1),
                                          (even, 1, b, 4),  # a buffer off its words
                                          (odd, 0, b, 4)):  # panels off their words
            buf = torch.zeros(buf_off + k * n, dtype=dtype)[buf_off:]
            plan = _PackPlan(buf, k, 3, kr, panels, n)  # rows 3.. of every panel, panel-major
            assert bool(plan.words) == (buf_off == 0 and panels is even and unit > 1)
            plan(rows)
            want = b if kr == 4 else b[1:2]
            for n0, n1 in panels:
                block = buf[k * n0:k * n1].view(k, n1 - n0)
                assert torch.equal(block[3:3 + kr], want[:, n0:n1]), (dtype, buf_off, kr, n0)
                assert not block[:3].any() and not block[3 + kr:].any()



def test_peer_plans_put_every_panel_of_b_together(monkeypatch):
    """The 1-D peer loop's plans (_PeerPlan), on CPU memory: each place's own rows packed where its
    plan says, then the peers' pieces copied by the plan's addresses, give every place each panel
    of all of B in place order; three places (one with no rows of B, group ranks not in place
    order), panels of two widths, both buffers of the pair."""
    import ctypes

    import torch

    from tilegemm.distributed import _core

    monkeypatch.setattr(torch.cuda, "Event", lambda: None)  # (the plans' events: no GPU here)
    kb, n, panels, slots = [3, 0, 5], 20, [(0, 4), (4, 12), (12, 20)], [2, 0, 1]
    offs, k = [0, 3, 3, 8], 8
    big = torch.arange(k * n, dtype=torch.float16).view(k, n)  # (exact in FP16)
    lay = _core.RowsLayout([1, 1, 1], kb, n, panels, 8, slots, True)
    bufs = [[torch.zeros(k * n + 16, dtype=torch.float16) for _ in range(2)] for _ in range(3)]
    for turn in (0, 1):
        plans = []
        for me in range(3):
            mapped = _core._Mapped(bufs[me], [None, None], 0, {(t, slots[q]): bufs[q][t] for t in (0, 1) for q in range(3)})
            plans.append(_core._PeerPlan(mapped, turn, lay, me, torch.float16))
            plans[me].pack(big[offs[me]:offs[me + 1]])
        for me in range(3):
            for pieces in plans[me].pieces:
                for dst, src, nbytes in pieces:
                    ctypes.memmove(dst, src, nbytes)
            for (n0, n1), view in zip(panels, plans[me].views):
                assert torch.equal(view, big[:, n0:n1]), (turn, me, n0)



def test_a_mapped_pair_keeps_its_last_used_plans():
    """The peer loops' plans: at most PLANS_KEPT a mapped pair, the least recently used dropped
    first (a plan taken again is kept over one made before it)."""
    from tilegemm.distributed._core import PLANS_KEPT, _keep, _used

    plans = {}
    for key in range(PLANS_KEPT):
        _keep(plans, key, f"plan {key}")
    assert _used(plans, 0) == "plan 0" and _used(plans, "none") is None
    _keep(plans, "new", "plan new")
    assert len(plans) == PLANS_KEPT and 1 not in plans and 0 in plans and "new" in plans

def test_peer_panels_open_narrow():
    """The 1-D engine's (and one-sided SUMMA's) peer panels: a first panel a quarter as wide
    (none narrower than 1024) where no width is named, 16-byte-aligned starts, the last the rest."""
    edges, width = peer_cuts(32768, None)
    assert width == 4096 and edges[:3] == (0, 1024, 5120) and edges[-1] == 32768
    assert peer_cuts(16384, None) == ((0, 1024, 3072, 5120, 7168, 9216, 11264, 13312, 15360, 16384), 2048)
    assert peer_cuts(777, 200) == ((0, 200, 400, 600, 777), 200)  # named: as named, all alike
    assert peer_cuts(2000, None) == ((0, 1024, 2000), 1024) and peer_cuts(0, None) == ((0,), 1024)
    assert all(e % 8 == 0 for e in peer_cuts(100000, 1001)[0][:-1])


HW = Hardware("test", rate={1024: 400.0, 8192: 800.0}, link_gbps=400.0, link_latency_us=10.0,
              net_gbps=50.0, net_latency_us=20.0, gpus_per_host=8)


def test_cost_model_follows_the_algorithm():
    one = predict(8192, 8192, 8192, (1, 1), HW)
    assert one["comm_s"] == 0 and one["efficiency"] == 1.0
    assert one["seconds"] == pytest.approx(2 * 8192 ** 3 / 800e12)
    two = predict(65536, 65536, 65536, (2, 1), HW)
    assert 0.95 < two["efficiency"] <= 1.0 and 1.9 < two["speedup"] <= 2.0  # big: the broadcasts hide
    small = predict(1024, 1024, 1024, (8, 1), HW)
    assert small["efficiency"] < 0.5  # small: latency and bandwidth dominate
    slow = Hardware("slow net", rate=HW.rate, net_gbps=5.0, gpus_per_host=8)
    assert predict(32768, 32768, 32768, (16, 1), slow)["seconds"] > predict(32768, 32768, 32768, (16, 1), HW)["seconds"]
    # across hosts, a square grid moves less than a 1-D split of 64 ranks
    assert choose(65536, 65536, 65536, 64, HW)["grid"] != [64, 1]
    assert costmodel.grids(6) == [(6, 1), (3, 2), (2, 3), (1, 6)]


def test_cost_model_gathers_after_the_gemms_where_that_is_faster():
    """A GEMM beside the 1-D loop's all-gather keeps at most `overlap` of its rate and also waits
    gather_wait times the all-gather's time (SUMMA's broadcasts: the rate share only); gathered
    after the GEMMs the all-gathers cost their own time.
    Where panels must be narrow (the product beyond the GPUs' memory), after wins, on the widest
    panels; where one panel fits, nothing is beside a GEMM; where the collectives are long beside
    the GEMMs, they are waited out."""
    hw = costmodel.shipped(8)
    big = predict(178176, 178176, 178176, (2, 1), hw, max_panel=22272)
    assert not big["ahead"] and big["panel"] == 22272 and big["efficiency"] > 0.97
    beside = predict(178176, 178176, 178176, (2, 1), hw, max_panel=22272, ahead=True)
    assert beside["ahead"] and beside["seconds"] > big["seconds"] and beside["efficiency"] < 0.9
    after = predict(178176, 178176, 178176, (2, 1), hw, panel=22272, ahead=False)
    assert after["seconds"] == pytest.approx(after["local_s"] + after["comm_s"])
    whole = predict(32768, 32768, 32768, (2, 1), hw)
    assert whole["panel"] == 32768 and whole["ahead"]  # one panel: as before
    assert costmodel.default_panel(178176, 178176, 178176, (2, 1), 2, 8, 22272) == (22272, False)
    narrow = predict(16384, 16384, 16384, (4, 1), hw, panel=4096, ahead=True)  # comm: a third of a GEMM
    g, comm = narrow["local_s"] / 4, narrow["comm_s"] / 4
    assert g + hw.gather_wait * comm > g / hw.overlap  # waited out, more than the rate lost
    assert narrow["seconds"] == pytest.approx(comm + 3 * (g + hw.gather_wait * comm) + g)
    assert predict(16384, 16384, 16384, (4, 1), hw, panel=4096, ahead=False)["seconds"] < narrow["seconds"]
    import dataclasses

    for grid in ((2, 2), (1, 4)):  # SUMMA's loop does not wait its broadcasts out
        same = [predict(16384, 16384, 16384, grid, dataclasses.replace(hw, gather_wait=x), panel=2048)["seconds"]
                for x in (0.0, hw.gather_wait, 5.0)]
        assert same[0] == same[1] == same[2]
    for panel in (None, 4096):  # SUMMA's loop always overlaps
        summa = predict(65536, 65536, 65536, (2, 2), hw, panel=panel, ahead=False)
        assert summa["ahead"] and summa["algorithm"] == "summa"


def test_one_rank_group_multiplies_its_own_rows(tmp_path):
    """A group of one: the 1-D loop multiplies its own B (every row of K) and nothing else (it
    multiplied an unwritten gathered buffer before)."""
    from tilegemm.distributed._core import layout_1d, run_1d

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        a = torch.randint(-3, 4, (37, 53)).float()
        b = torch.randint(-3, 4, (53, 29)).float()
        for panel in (None, 8):
            lay = layout_1d(a, b, panel=panel)
            assert torch.equal(run_1d(a, b, lay), a @ b)
            assert torch.equal(run_1d(a, b, lay, communicate=False), a @ b)
    finally:
        dist.destroy_process_group()


def test_dual_and_negated_blocks_on_two_ranks(tmp_path):
    """The 1-D loop gathers B's values into plain buffers, so a forward-mode AD dual B lost its
    tangent with no word on 2 ranks (a dual A's product refused, on its rank alone): a dual block,
    on every rank or on one, travels in the shared metadata, and every rank refuses, naming the
    ranks, before any block moves. A lazily negated block is multiplied by its values."""
    _spawned("dual and negated blocks", tmp_path)


def test_dtensor_gradients_match_dtensors_own(tmp_path):
    """A 1-D mesh's A Shard(0) (or Replicate()) @ B Replicate() with both requiring grad: C, A.grad
    and B.grad equal DTensor's own A @ B's on the same DTensors. B.grad was each rank's part of the
    sum, declared Replicate(): wrong, no error; a rank with no rows of A returned a C that did not
    require grad, and its backward raised while the other's waited out the group's timeout."""
    _spawned("dtensor gradients", tmp_path)


def test_dtensor_arguments_that_differ_between_ranks_are_refused_together(tmp_path):
    """tilegemm.distributed.matmul with a grid, panel or placement that differs between the ranks
    (or a grid only one rank cannot use, or A and B that do not multiply or lie on two meshes on one
    rank): one DistributedError on every rank, naming the rank; one
    rank refused alone and the other waited out the timeout, or the ranks' all-gathers differed
    in length (garbage shapes read as float16, a rank that died)."""
    _spawned("dtensor arguments disagree", tmp_path)


def test_dtensors_given_to_the_engines_are_refused_in_words(tmp_path):
    """matmul_1d and summa take local blocks: a DTensor given to them is refused on every rank,
    saying so (its global shape was read as a block's, or torch raised from inside the GEMM)."""
    _spawned("dtensors given to the engines", tmp_path)


def test_one_by_p_and_p_by_one_grids_on_a_group_split_nothing(tmp_path):
    """SUMMA 1 × P and P × 1 on a group other than the default one, and a 1-D sub-mesh's DTensor
    product on the grid the cost model chose (1 × P): exact. The grid row or column is the whole
    group, yet it was split, which gloo cannot do: a DistributedError with no grid named."""
    _spawned("grids on a group of all its ranks", tmp_path)


def test_dtensor_mistakes_on_one_rank_are_refused_together(tmp_path):
    """A plain tensor, or a DTensor of another dtype, on one rank alone: refused on every rank,
    naming it (the other rank waited out the timeout, or gloo aborted a process in DTensor's
    redistribution)."""
    _spawned("dtensor mistakes on one rank", tmp_path)


def test_a_block_that_is_no_tensor_on_one_rank_is_refused_on_every_rank(tmp_path):
    """A NumPy array or a list given to matmul_1d or summa on one rank alone: every rank refuses,
    naming it (that rank's AttributeError left the others in the metadata all-gather)."""
    _spawned("a block that is no tensor on one rank", tmp_path)


def test_a_block_of_another_layout_on_one_rank_is_refused_on_every_rank(tmp_path):
    """A sparse block, A on the meta device or B on another device than A, on one rank alone:
    every rank refuses, naming it (that rank's own error left the others waiting out the group's
    timeout)."""
    _spawned("a block of another layout on one rank", tmp_path)


def test_ranks_that_make_different_calls_are_refused_on_every_rank(tmp_path):
    """distributed.matmul on one rank, matmul_1d or summa on the others: every rank refuses, naming
    the calls (their metadata rows differed in length, and each rank misread the other's)."""
    _spawned("different calls on ranks", tmp_path)


def test_a_bad_local_world_size_on_one_rank_is_refused_on_every_rank(tmp_path):
    """LOCAL_WORLD_SIZE that is not a number on one rank alone: that rank's ConfigError left the other
    waiting in the metadata all-gather; every rank refuses now, naming it."""
    _spawned("LOCAL_WORLD_SIZE on one rank", tmp_path)


def test_grid_groups_split_a_group_by_its_own_ranks(monkeypatch):
    """SUMMA on a group other than the default one (summa(group=), a 1-D sub-mesh of a DTensor)
    splits it with torch's split_group, whose split_ranks are ranks in that group, not global
    ranks: global ranks 2 … 5 of a group {2, 3, 4, 5} are its 0 … 3. (The global ranks were passed:
    on NCCL each rank split by a group that was not its own, or by ranks the group does not have.
    gloo cannot split a group, so the call is watched here, in this process.)"""
    import types

    from tilegemm.distributed import _core

    parent = types.SimpleNamespace(group_name="a group of global ranks 2 … 5")
    asked = []
    monkeypatch.setattr(_core, "_GROUPS", {})
    monkeypatch.setattr(_core, "_same_world", lambda: None)
    monkeypatch.setattr(_core.dist, "get_rank", lambda group=None: 3)
    monkeypatch.setattr(_core.dist, "get_group_rank", lambda group, rank: {2: 0, 3: 1, 4: 2, 5: 3}[rank])
    monkeypatch.setattr(_core.dist, "get_world_size", lambda group=None: 4)  # (the group of global ranks 2 … 5)
    monkeypatch.setattr(_core.dist, "split_group", lambda parent_pg, split_ranks: asked.append(split_ranks) or "split")
    assert _core._split(parent, [[2, 3], [4, 5]]) == "split" and asked == [[[0, 1], [2, 3]]]
    assert _core._split(parent, [[2], [3], [4], [5]]) is None  # (a group of one: no group, nothing split)
    # every rank of the group in one grid row or column (1 × P, P × 1): the group itself, nothing split
    assert _core._split(parent, [[2, 3, 4, 5]]) is parent and len(asked) == 1


@pytest.mark.parametrize("grid", [(1, 2), (2, 1), (2, 2)])
def test_summa_products_alone_multiply_written_values(grid, monkeypatch):
    """SUMMA's products alone (run with communicate=False: what dist-bench times for the
    efficiency) multiply values that were written, never a receive buffer's old contents: here
    every new float tensor holds NaN, as memory never written may (NumPy's BLAS warned of overflow
    and invalid values on it in `tilegemm dist-bench`, and a CPU's GEMM on NaN or denormals is slower)."""
    from tilegemm.distributed import _core

    real = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *s, **kw: (lambda t: t.fill_(float("nan")) if t.is_floating_point()
                                                          else t)(real(*s, **kw)))
    monkeypatch.setattr(_core, "_NORMAL", {})  # made here, under the NaN-filling empty
    pr, pc = grid
    m, n, k = 12, 10, 8
    rows, ncols = np.diff(blocks(m, pr)).tolist(), np.diff(blocks(n, pc)).tolist()
    ka, kb = np.diff(blocks(k, pc)).tolist(), np.diff(blocks(k, pr)).tolist()
    lay = _core.Layout(pr, pc, 0, 0, rows, ncols, blocks(k, pc), blocks(k, pr), _panels(ka, kb, 2), 2,
                       list(range(pr * pc)))
    a, b = torch.ones(rows[0], ka[0]), torch.ones(kb[0], ncols[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (NumPy's RuntimeWarning on NaN or Inf operands)
        c = _core.run(a, b, lay, communicate=False)
    assert c.shape == (rows[0], ncols[0]) and torch.isfinite(c).all()


def test_cost_model_of_summa_on_the_copy_engines():
    """SUMMA gathered by the copy engines: no partial sums, so its products alone are the GEMMs'
    flops; the own blocks' pack and the first step's copies are exposed, the rest hide behind big
    products but not small."""
    big = predict(65536, 65536, 65536, (2, 2), HW, peer=True)
    assert big["local_s"] == pytest.approx(2 * 65536 ** 3 / 4 / 800e12, rel=1e-6)
    assert 0.97 < big["efficiency"] <= 1.0 and big["seconds"] > big["local_s"]
    assert big["efficiency"] > predict(65536, 65536, 65536, (2, 2), HW)["efficiency"]  # NCCL's broadcasts, overlap²
    slow = Hardware("slow links", rate=HW.rate, link_gbps=4.0, gpus_per_host=8)
    assert predict(8192, 8192, 8192, (1, 4), slow, peer=True)["efficiency"] < 0.5
    # the 1-D loop on the copy engines: its own formula, after this rank's rows of B are packed (read and written)
    on, off = (predict(8192, 8192, 8192, (4, 1), HW.beside_copies(), panel=1024, peer=peer) for peer in (True, False))
    assert on["seconds"] - off["seconds"] == pytest.approx(2 * 2048 * 8192 * 2 / (HW.mem_gbps * 1e9))
    assert on["local_s"] == off["local_s"]  # (the products alone pack nothing)


def test_grid_chosen_from_the_shipped_rates():
    hw = costmodel.shipped_hardware()
    assert hw.rate and all(r > 0 for r in hw.rate.values())
    c = choose(32768, 32768, 32768, 2, hw)
    assert c["grid"] in ([2, 1], [1, 2]) and c["efficiency"] > 0.9
    # on GPUs of one host the 1-D engine's copies take no SM: it is predicted whole, and chosen
    peer = choose(16384, 16384, 16384, 4, hw, peer=True)
    assert peer["grid"] == [4, 1] and peer["seconds"] <= choose(16384, 16384, 16384, 4, hw)["seconds"]
    assert choose(2048, 16384, 16384, 2, hw, peer=True)["grid"] == [2, 1]  # skinny M: A's rows as they are


def test_shipped_rates_come_from_row_major_blocks_only(monkeypatch):
    """The local rate the grids are chosen with reads the database's row-major BF16 entries (what a
    distributed product's blocks are), not another layout's: the H200's B = Wᵀ entries for a
    model's linear layers (note 85) moved the 2-GPU choice at 32768³ to a predicted efficiency of
    0.84 when they were read too."""
    from tilegemm import shipped

    e = lambda ms: dict(rung="tc_warp_specialized", config={}, ms=ms, shape=[4096, 4096, 4096])  # noqa: E731
    db = {"gpu": "G", "entries": {"bf16|bfloat16|bfloat16|nn|nobeta|4096x4096x4096": e(0.2),
                                  "bf16|bfloat16|bfloat16|nt|nobeta|4096x4096x4096": e(0.1),
                                  "fp16|float16|float16|nn|nobeta|4096x4096x4096": e(0.1)}}
    monkeypatch.setattr(shipped, "databases", lambda: {"g": db})
    hw = costmodel.shipped_hardware("G")
    assert hw.rate == {4096: pytest.approx(2 * 4096**3 / 0.2e-3 / 1e12)}


def test_scaleout_doc_is_generated():
    text = costmodel.render(HW)
    assert text.count("\n| 65536 |") == len(costmodel.HOSTS) + 1
    assert "summa" in text or "1d" in text


def test_peer_products_are_captured_once_their_operands_come_back(monkeypatch):
    """_Graphs' rule (CPU, the capture faked): a key runs call by call until it comes back within
    the last SEEN calls, is captured then (and replayed at once), and replayed from then on; keys
    that never come back are never captured; at most GRAPHS_KEPT graphs are kept; a failed capture
    warns and turns capturing off for the process (as TILEGEMM_DIST_GRAPHS=0 does)."""
    from tilegemm.distributed import _core

    class Graph:
        def __init__(self, key):
            self.key, self.replays = key, 0

        def replay(self):
            self.replays += 1

    captured, ran = [], []

    def record(body, device):
        if getattr(body, "broken", False):
            raise RuntimeError("not capturable")
        captured.append(body.key)
        return Graph(body.key)

    def body(key):
        def go():
            ran.append(key)
        go.key, go.broken = key, key == "broken"
        return go

    monkeypatch.setattr(_core, "_record", record)
    monkeypatch.setattr(_core, "GRAPHS", [True])
    g = _core._Graphs()
    for key in ["a", "b", "a", "a", "a", "b"]:
        g.run(key, body(key), None)
    assert ran == ["a", "b"] and captured == ["a", "b"] and g.graphs["a"].replays == 3 and g.graphs["b"].replays == 1
    ran.clear()
    for key in [f"new{i}" for i in range(10)]:  # operands at new addresses at every call
        g.run(key, body(key), None)
    assert len(ran) == 10 and captured == ["a", "b"]
    for i in range(_core.GRAPHS_KEPT + 1):
        for _ in range(2):
            g.run(f"k{i}", body(f"k{i}"), None)
    assert len(g.graphs) == _core.GRAPHS_KEPT and "a" not in g.graphs
    ran.clear()
    with pytest.warns(RuntimeWarning, match="could not be captured"):
        for _ in range(3):
            g.run("broken", body("broken"), None)
    assert ran == ["broken"] * 3 and "broken" in g.failed and _core.GRAPHS == [False]  # none captured from now on
    for _ in range(3):
        _core._Graphs().run("x", body("x"), None)
    assert ran.count("x") == 3 and "x" not in captured


def test_the_distributed_variables_follow_envs_rule(monkeypatch):
    """TILEGEMM_DIST_*: a value not understood is a ConfigError naming it (GRAPHS=off left the graphs
    on; BARRIER_S=abc raised float()'s ValueError when the module was imported; TRANSPORT a plain
    ValueError)."""
    from tilegemm.distributed import _core
    from tilegemm.errors import ConfigError

    monkeypatch.setenv("TILEGEMM_DIST_TRANSPORT", "bogus")
    with pytest.raises(ConfigError, match="TILEGEMM_DIST_TRANSPORT='bogus'"):
        _core._transport(None)
    code = "import tilegemm.distributed._core as c; print(c.GRAPHS[0])"
    for value, said in (("off", "False"), ("1", "True"), ("maybe", "TILEGEMM_DIST_GRAPHS='maybe'")):
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "TILEGEMM_DIST_GRAPHS": value,
                                  "TILEGEMM_DIST_BARRIER_S": "abc"})  # (read where it is used: not at import)
        assert said in run.stdout + run.stderr, (value, run.stderr[-1500:])


def test_torchruns_local_world_size_is_read_by_envs_rule(monkeypatch):
    """LOCAL_WORLD_SIZE (GPUs a host: the cost model's links, the grid a DTensor product chooses)
    not a whole number is a ConfigError naming it (it raised int()'s ValueError); unset or empty
    is the default. A DTensor product's grid is chosen as if it were unset: the products refuse
    it in their shared metadata, on every rank together (test_a_bad_local_world_size_on_one_rank…)."""
    from tilegemm import env
    from tilegemm.distributed import api, costmodel
    from tilegemm.errors import ConfigError

    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    unset = api._chosen_grid(4096, 4096, 4096, 4, torch.bfloat16)
    for value in ("abc", "2.5", "-1"):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
        with pytest.raises(ConfigError, match=f"LOCAL_WORLD_SIZE='{value}'"):
            costmodel.shipped_hardware()
        assert api._chosen_grid(4096, 4096, 4096, 4, torch.bfloat16) == unset and env.local_world_size(0, bad=-1) == -1
    for value, per_host in (("", 8), ("4", 4)):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
        assert costmodel.shipped_hardware().gpus_per_host == per_host


@pytest.mark.parametrize("call, error, says", [
    (lambda hw: costmodel.choose(4096, 4096, 4096, 0, hw), "DistributedError", "gpus = 0"),
    (lambda hw: costmodel.choose(4096, 4096, 4096, 4.5, hw), "DistributedError", "gpus = 4.5"),
    (lambda hw: costmodel.choose(-5, 4096, 4096, 4, hw), "ShapeError", "m = -5"),
    (lambda hw: costmodel.predict(4096, 4096, 4096, (0, 4), hw), "DistributedError", "grid (0, 4)"),
    (lambda hw: costmodel.predict(4096, 4096, 4096, "ab", hw), "DistributedError", "grid 'ab'"),
    (lambda hw: costmodel.predict(4096, 4096, 4.0, (2, 2), hw), "ShapeError", "k = 4.0"),
    (lambda hw: costmodel.predict(4096, 4096, 4096, (2, 2), hw, itemsize=0), "DTypeError", "itemsize = 0"),
    # a panel that is no width (it gave a prediction with "panel": -5)
    *[(lambda hw, v=v: costmodel.predict(4096, 4096, 4096, (4, 1), hw, panel=v), "DistributedError", f"panel = {v!r}")
      for v in (-5, 0, 2.5, True)],
    (lambda hw: costmodel.predict(4096, 4096, 4096, (2, 2), hw, max_panel=0), "DistributedError", "max_panel = 0"),
])
def test_the_cost_models_inputs_are_said_in_words(call, error, says):
    """predict and choose are public: a count of GPUs, a grid or a size that is no product's is a
    typed error naming it (they raised min()'s ValueError on no grids, a ZeroDivisionError on a
    grid of 0 rows, and took m = -5 for a product)."""
    with pytest.raises(Exception) as got:
        call(HW)
    assert type(got.value).__name__ == error and says in str(got.value), got.value


def test_the_local_rate_interpolates_on_the_cube_root_log_linearly():
    """rate(size) at the cube root of M·N·K: proportional to size below the smallest measured,
    flat past the largest, log-linear between; a fixed rate wins; no rate at all is free."""
    assert HW.tflops(512, 512, 512) == pytest.approx(200.0)  # half the smallest size: half its rate
    assert HW.tflops(16384, 16384, 16384) == 800.0
    assert HW.tflops(1024, 1024, 8192) == pytest.approx(400.0 + 400.0 / 3)  # 2048: a third of the way in log2
    assert Hardware("x", rate=HW.rate, fixed_tflops=123.0).tflops(1, 1, 1) == 123.0
    assert Hardware("x").tflops(4096, 4096, 4096) == float("inf")


def _bcast(nbytes, n, gbps, lat_us):
    return 0.0 if n <= 1 else nbytes / (gbps * 1e9) + (n - 1) * lat_us * 1e-6


def test_cost_model_of_summa_by_its_formula():
    """SUMMA (the module docstring): FP32 partial sums written by the first panel, read and written
    by the others, cast once; a broadcast over n ranks pays n − 1 latencies, one rank none; on one
    host the two broadcasts overlap, where both cross the network they add."""
    m = n = k = 16384
    got = predict(m, n, k, (2, 2), HW, panel=4096)
    mi = nj = 8192
    flops = 2 * mi * nj * 4096 / (HW.tflops(mi, nj, 4096) * 1e12)
    mem = HW.mem_gbps * 1e9
    local = (flops + mi * nj * 4 / mem) + 3 * (flops + 2 * mi * nj * 4 / mem) + mi * nj * (4 + 2) / mem
    assert got["local_s"] == pytest.approx(local, rel=1e-12)
    assert got["comm_s"] == pytest.approx(4 * _bcast(mi * 4096 * 2, 2, 400.0, 10.0), rel=1e-12)
    wide = predict(1024, 65536, 8192, (1, 4), HW, panel=4096)  # one grid row: B's panel goes nowhere
    assert wide["comm_s"] == pytest.approx(2 * _bcast(1024 * 4096 * 2, 4, 400.0, 10.0), rel=1e-12)
    two = Hardware("two a host", rate=HW.rate, net_gbps=50.0, net_latency_us=20.0, gpus_per_host=2)
    spread = predict(m, n, k, (4, 4), two, panel=4096)  # rows and columns both cross hosts: they share the network
    t = _bcast(4096 * 4096 * 2, 4, 50.0, 20.0)
    assert spread["comm_s"] == pytest.approx(4 * 2 * t, rel=1e-12)
    four = Hardware("four a host", rate=HW.rate, net_gbps=50.0, net_latency_us=20.0, gpus_per_host=4)
    cols = predict(m, n, k, (2, 4), four, panel=4096)  # a grid row is one host; only B's broadcast crosses
    t_a, t_b = _bcast(8192 * 4096 * 2, 4, 400.0, 10.0), _bcast(4096 * 4096 * 2, 2, 50.0, 20.0)
    assert cols["comm_s"] == pytest.approx(4 * max(t_a, t_b), rel=1e-12)


def test_panel_widths_worth_predicting():
    """Powers of two from 1024 (the span itself the widest) and the span in 1-32 panels a rank of
    the longer side; SUMMA's none over SUMMA_MAX_PANEL."""
    assert costmodel.widths(1024, 100000, 4096, (2, 1)) == sorted(
        {1024, 2048, 4096, 8192, 16384, 32768, 65536, 100000} | {50000, 25000, 12500, 6250, 3125, 1563})
    summa = costmodel.widths(65536, 65536, 65536, (2, 2))
    assert max(summa) == costmodel.SUMMA_MAX_PANEL and 1024 in summa
    assert costmodel.widths(1024, 0, 4096, (2, 1)) == [1]


def test_hardware_from_results_reads_right_bf16_squares_and_the_measured_copy():
    tc = dict(gpu="G", records=[dict(dtype="bf16", ok=True, m=4096, n=4096, k=4096, tflops=700.0),
                                dict(dtype="bf16", ok=False, m=8192, n=8192, k=8192, tflops=900.0),
                                dict(dtype="bf16", ok=True, m=1, n=4096, k=4096, tflops=5.0),
                                dict(dtype="fp16", ok=True, m=2048, n=2048, k=2048, tflops=600.0)])
    hw = costmodel.hardware_from_results(tc, {"ceilings": {"dram": {"measured": 4.0}}})
    assert hw.name == "G" and hw.rate == {4096: 700.0} and hw.mem_gbps == 4000.0
    assert costmodel.hardware_from_results(tc).mem_gbps == Hardware("x").mem_gbps


@pytest.mark.parametrize("low", [1024, 1100, 20000])
def test_a_free_port_where_the_ephemeral_range_starts_low(low, monkeypatch):
    """ip_local_port_range may start at 1024 (or near it): no port lies below it, and sampling 200
    of fewer raised ValueError; the harness takes a port-0 bind's there, as before."""
    import io

    real = open
    monkeypatch.setitem(globals(), "open", lambda path, *a, **k: io.StringIO(f"{low}\t65535\n")
                        if "ip_local_port_range" in str(path) else real(path, *a, **k))
    port = _free_port()
    assert isinstance(port, int) and 1024 <= port <= 65535
