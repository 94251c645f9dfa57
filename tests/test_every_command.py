"""Every CLI command, as a user runs it on a machine without a GPU: with its defaults, with an
option it does not have, and (the commands that read results) on the committed results. Each
runs in a fresh process in an empty directory. A command added to the CLI must be put in one of
the tables below, or this test fails."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tilegemm import _cuda, cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LADDER = os.path.join(ROOT, "results", "h200", "ladder.json")

RUNS_ON_CPU = {"bench", "race", "info", "kernels", "explain", "traffic", "resources", "model-bench", "dist-bench"}
# one line saying so, exit 2
NEEDS_A_GPU = {"ceilings": "GPU", "library": "GPU", "sanitize": "GPU", "counters": "GPU",
               "tune": "no shapes"}  # (its defaults name no shapes: that mistake, said first, on any machine)
NEEDS_A_FILE = {"report", "compare", "results", "ladder"}  # one line naming what is missing, exit 2


def _commands() -> set[str]:
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    return set(sub.choices)


def _run(args, cwd, timeout=900, **extra_env):
    path = os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", "")  # (src, then the caller's path: a
    # GPU machine's numpy wheel, which numba-cuda needs)
    env = dict(os.environ, PYTHONPATH=path, TILEGEMM_CACHE_DIR=str(cwd), **extra_env)
    return subprocess.run([sys.executable, "-m", "tilegemm.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _one_line(run):
    err = run.stderr.strip()
    assert "Traceback" not in run.stderr + run.stdout, run.stderr[-2000:]
    assert err and len(err.splitlines()) == 1, err
    return err


def test_every_command_is_in_a_table():
    assert _commands() == RUNS_ON_CPU | set(NEEDS_A_GPU) | NEEDS_A_FILE


@pytest.mark.skipif(_cuda.has_gpu(), reason="the CPU expectations; on a GPU these commands measure")
@pytest.mark.parametrize("command", sorted(_commands()))
def test_defaults(command, tmp_path):
    run = _run([command], tmp_path)
    if command in RUNS_ON_CPU:
        assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
        assert "Traceback" not in run.stderr
    else:
        assert run.returncode == 2, (run.stdout[-2000:], run.stderr[-3000:])
        err = _one_line(run)
        assert (NEEDS_A_GPU[command] in err) if command in NEEDS_A_GPU else ("required" in err), err


@pytest.mark.parametrize("command", sorted(_commands()))
def test_an_unknown_option_is_one_line(command, tmp_path):
    files = {"compare": [LADDER, LADDER]}.get(command, [LADDER] if command in NEEDS_A_FILE else [])
    run = _run([command, *files, "--no-such-option"], tmp_path, timeout=120)
    assert run.returncode == 2
    assert "--no-such-option" in _one_line(run)


@pytest.mark.parametrize("args", [
    ["results", LADDER], ["compare", LADDER, LADDER], ["report", LADDER, "--out", "rep"],
    ["ladder", LADDER, "--out", "ladder.md"],
])
def test_file_commands_on_the_committed_results(args, tmp_path):
    run = _run(args, tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.mark.parametrize("args, says", [
    (["results", "missing.json"], "no such results file"),
    (["report", "notjson.json"], "not JSON"),
    (["compare", "notjson.json", LADDER], "not JSON"),
    (["bench", "--kernels", "nosuch", "--sizes", "8"], "no kernel named 'nosuch'"),
    (["traffic", "--kernels", "nosuch"], "no kernel named 'nosuch'"),
    (["bench", "--sizes", "12x"], "bad size '12x'"),
    (["bench", "--shapes", "nosuchset"], "nosuchset"),
    (["nosuchcommand"], "invalid choice"),
    (["bench", "--bogus"], "tilegemm bench: unrecognized arguments: --bogus"),
    (["bench", "--kernels", "mixed_half"], "nothing to run: mixed_half: it takes float16"),
    (["bench", "--kernels", ""], "--kernels is empty"),
    (["bench", "--sizes", ""], "no size given"),
    (["bench", "--sizes", "16,,32"], "an empty entry"),
    (["bench", "--budget", "-1"], "must be a positive number"),
    (["bench", "--rse", "0"], "must be a positive number"),
    (["bench", "--sizes", "8", "--json", "notjson.json/out.json"], "cannot write notjson.json/out.json"),
    (["bench", "--sizes", "8", "--table", "."], "it is a folder"),
    (["bench", "--shapes", "notjson.json"], "notjson.json: not a shape file (not JSON"),
    (["results", "binary.json"], "binary.json: not a results file (not UTF-8 text)"),
    (["race", "--trials", "0"], "must be a positive integer"),
    (["race", "--size", "-5"], "must be a positive integer"),
    (["model-bench", "--runs", "0"], "must be a positive integer"),
    (["model-bench", "--models", "nosuch"], "unknown model 'nosuch' (choose from llama3-8b, llama3-70b-slice, tiny)"),
    (["model-bench", "--models", ","], "--models ',' names no model"),  # (it said "unknown model ''" twice)
    (["model-bench", "--modes", ","], "--modes ',' names no mode"),
    (["report", LADDER, "--readme", "nosuch.md", "--out", "rep"], "--readme nosuch.md: no such file"),  # ([Errno 2])
    (["report", LADDER, "--readme", "binary.json", "--out", "rep"], "--readme binary.json: not a README (not UTF-8"),
    (["ladder", LADDER, "--resources", "emptylist.json", "--out", "l.md"], "a resource table with no rows"),  # (exit 0,
    # the page without the table)
    # the arguments before the GPU (each said "needs a CUDA GPU" on a CPU) and --merge's (a measuring option given with
    # it was ignored, exit 0; a folder was "[Errno 21] Is a directory")
    (["tune", "--dtypes", "nosuch", "--sizes", "8"], "tilegemm tune: unknown dtype nosuch"),
    (["library", "--shapes", "nosuch"], "tilegemm library: unknown shape set 'nosuch'"),
    (["library", "--merge", "notjson.json", "--dtypes", "bf16", "--json", "m.json"], "--dtypes measures"),
    (["model-bench", "--merge", "notjson.json", "--models", "tiny", "--json", "m.json"], "--models measures"),
    (["library", "--merge", "adir", "--json", "m.json"], "--merge: adir: a folder, not a library results file"),
])
def test_mistakes_are_one_line(args, says, tmp_path):
    (tmp_path / "notjson.json").write_text("{ not json")
    (tmp_path / "binary.json").write_bytes(bytes(range(256)))
    (tmp_path / "emptylist.json").write_text("[]")
    (tmp_path / "adir").mkdir()
    run = _run(args, tmp_path, timeout=300)
    assert run.returncode == 2, (run.stdout[-1000:], run.stderr[-2000:])
    assert says in _one_line(run)


def test_dist_bench_under_a_bad_world_size_is_one_line_naming_it(tmp_path):
    """torchrun's WORLD_SIZE, when it is no number: it said "invalid literal for int() with base 10: 'x'"."""
    run = _run(["dist-bench", "--sizes", "8", "--modes", "1d"], tmp_path, timeout=120, WORLD_SIZE="x", RANK="0")
    assert run.returncode == 2 and "WORLD_SIZE='x': torchrun's process count, a whole number" in _one_line(run)
    run = _run(["dist-bench", "--sizes", "8", "--modes", "1d"], tmp_path, timeout=120, WORLD_SIZE="2", RANK="x")
    assert run.returncode == 2 and "RANK='x': torchrun's index of this process" in _one_line(run)


@pytest.mark.skipif(_cuda.has_gpu(), reason="a machine without a GPU")
@pytest.mark.parametrize("args, says", [
    (["bench", "--kernels", "cpu_naive,smem_tiled_32", "--sizes", "128"], "every size is above 64"),
    (["race", "--racecheck"], "--racecheck needs a CUDA GPU"),
])
def test_mistakes_on_a_machine_without_a_gpu_are_one_line_before_the_work(args, says, tmp_path):
    run = _run(args, tmp_path, timeout=300)
    assert run.returncode == 2 and says in _one_line(run) and "Race demo" not in run.stdout


@pytest.mark.parametrize("command", ["info", "kernels", "bench"])
def test_a_bad_environment_variable_is_one_line_for_every_command(command, tmp_path):
    """Read while the commands are put together (a module reads whether the simulator is on): one
    line naming the command (it said only "tilegemm:"), exit 2, as for any mistake, not a traceback."""
    run = _run([command], tmp_path, timeout=120, TILEGEMM_SIMULATOR="maybe")
    assert run.returncode == 2 and _one_line(run).startswith(f"tilegemm {command}: TILEGEMM_SIMULATOR='maybe'")


def test_outputs_in_a_new_folder_or_through_a_device_file(tmp_path):
    """The output check refuses no path a writer can write: a folder yet to be made (made), and
    /dev/null or /dev/stdout (written through, never replaced by a rename)."""
    import stat

    run = _run(["bench", "--kernels", "cpu", "--sizes", "16", "--budget", "0.02", "--quiet", "--table", "new/t.txt",
                "--json", "/dev/null"], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "new" / "t.txt").exists() and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    run = _run(["results", LADDER, "--csv", "/dev/stdout"], tmp_path, timeout=300)
    assert run.returncode == 0 and "kernel" in run.stdout, run.stderr[-2000:]


def test_every_kernel_through_bench_and_traffic(tmp_path):
    """`--kernels all`: a kernel that cannot take the dtype is skipped by rule, not by a crash."""
    for args in (["bench", "--kernels", "all", "--sizes", "16", "--budget", "0.02", "--warmup", "0.01", "--quiet"],
                 ["traffic", "--kernels", ",".join(k.name for k in __import__("tilegemm").registry.select(backend="simt")),
                  "--shapes", "8x8x8"]):
        run = _run(args, tmp_path)
        assert run.returncode == 0, (args, run.stdout[-2000:], run.stderr[-3000:])
        assert "Traceback" not in run.stderr
