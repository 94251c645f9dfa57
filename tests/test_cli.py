"""The lab's commands, run in-process (simulator on CPU)."""

import json
import sys

import pytest

from tilegemm import argtypes, cli


def run(capsys, *argv):
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


@pytest.mark.skipif(__import__("tilegemm")._cuda.has_gpu(), reason="the simulator, on a machine without a GPU")
def test_bench_table_simulated(capsys, tmp_path):
    path = tmp_path / "r.json"
    table = tmp_path / "t.txt"
    code, out = run(capsys, "bench", "--sizes", "8,5x7x3", "--quiet", "--json", str(path), "--table", str(table))
    assert code == 0
    for header in ("CPU naive", "CPU BLAS", "GPU naive", "GPU tiled-16", "GPU tiled-32", "GPU register-blocked",
                   "best GFLOP/s", "best vs CPU naive"):
        assert header in out
    assert "SIMULATOR" in out and "not GPU times" in out
    doc = json.loads(path.read_text())
    recs = doc["records"]
    kernels = {r["kernel"] for r in recs}
    assert {"cpu_naive", "cpu_blas", "naive", "smem_tiled_16", "smem_tiled_32", "smem32_conflicted", "smem32_padded",
            "register_blocked", "broken_nosync"} <= kernels  # the README's table: the lab's default
    assert all(r["ok"] for r in recs if r["kernel"] not in ("cublas", "broken_nosync"))
    said = [line for line in out.splitlines() if ": WRONG: " in line]  # the checker's line for each wrong result
    assert len(said) == sum(not r["ok"] for r in recs) and all(x.startswith("broken_nosync ") for x in said)
    assert all(r["median_ms"] > 0 if r["ok"] else r["median_ms"] is None for r in recs)  # a wrong result: no time
    assert {(r["m"], r["n"], r["k"]) for r in recs} == {(8, 8, 8), (5, 7, 3)}
    assert "GPU tiled-32" in table.read_text()


@pytest.mark.skipif(__import__("tilegemm")._cuda.has_gpu(), reason="the simulator, on a machine without a GPU")
def test_bench_drops_large_sizes_under_the_simulator(capsys):
    code, out = run(capsys, "bench", "--sizes", "4,4096", "--kernels", "cpu_blas,naive", "--quiet", "--no-e2e")
    assert code == 0 and "dropped: 4096" in out


def test_bench_of_cpu_kernels_alone_keeps_every_size_and_real_times(capsys):
    """No simulated kernel asked for: no size is dropped, and the table is the CPU's, not the simulator's."""
    code, out = run(capsys, "bench", "--sizes", "96", "--kernels", "cpu", "--quiet", "--budget", "0.02",
                    "--warmup", "0")
    where = "the CPU" if not __import__("tilegemm")._cuda.has_gpu() else ""  # (a GPU machine's table names its GPU)
    assert code == 0 and "dropped" not in out and "SIMULATOR" not in out and f"float32, {where}" in out
    # its times are the host clock's: the footnote said "device events ... L2 flushed" and named an e2e column
    # of matmul() that a CPU-only run never fills
    note = next(line for line in out.splitlines() if line.startswith("Times:"))
    assert "host clock" in note and (where == "" or ("device events" not in note and "e2e" not in note)), note


def test_model_bench_refuses_a_model_whose_weights_do_not_fit(capsys, monkeypatch):
    """Refused in one line before the build (which the kernel would kill for want of memory)."""
    pytest.importorskip("transformers")
    from tilegemm import arrays
    from tilegemm._cuda import has_gpu

    if has_gpu():
        pytest.skip("the CPU's memory")
    monkeypatch.setattr(arrays, "available_host_bytes", lambda: 10**9)
    assert cli.main(["model-bench", "--models", "llama3-8b"]) == 2
    assert "llama3-8b's weights alone need 32.1 GB in float32 on cpu, and 1.0 GB are free" in capsys.readouterr().err


def test_bench_shows_wrong_for_the_broken_kernel(capsys):
    code, out = run(capsys, "bench", "--sizes", "40x40x64", "--kernels", "broken_nosync,smem_tiled_32", "--quiet",
                    "--no-e2e")
    assert "WRONG" in out and "broken_nosync 40×40×64 float32: WRONG" in out
    assert code == 0  # a teaching kernel being wrong is the lesson, not a failure


def test_bench_runs_a_size_named_twice_once(capsys, tmp_path):
    """The table has one row a size: a size run twice showed the second run's times alone, and the
    JSON held both under one key, the e2e time of the second on both."""
    path = tmp_path / "r.json"
    code, out = run(capsys, "bench", "--sizes", "8,4,8x8x8", "--kernels", "cpu_blas", "--quiet", "--budget", "0.01",
                    "--warmup", "0", "--no-cublas", "--no-e2e", "--json", str(path))
    assert code == 0 and "Named more than once, run once: 8 " in out
    assert [(r["m"], r["n"], r["k"]) for r in json.loads(path.read_text())["records"]] == [(8, 8, 8), (4, 4, 4)]


def test_bench_skips_cpu_naive_beyond_budget(capsys):
    code, out = run(capsys, "bench", "--sizes", "48", "--kernels", "cpu_naive", "--cpu-naive-budget", "1e-9",
                    "--quiet", "--no-e2e")
    assert code == 0 and "skipped: predicted" in out


@pytest.mark.skipif(__import__("tilegemm")._cuda.has_gpu(), reason="the simulator, on a machine without a GPU")
def test_race_demo(capsys):
    code, out = run(capsys, "race", "--size", "40", "--k", "64", "--trials", "1")
    assert code == 0
    assert "broken_nosync: wrong in 2 of 2 runs" in out
    assert "smem_tiled_32: 2 of 2 runs correct" in out
    assert "first wrong: C[i, j] expected → got" in " ".join(out.split())  # (rich took [i, j] for markup)


def test_info_and_kernels(capsys):
    code, out = run(capsys, "info")
    assert code == 0 and ("simulator" in out.lower() or "compute capability" in out)
    code, out = run(capsys, "kernels")
    assert code == 0 and "register_blocked" in out and "broken_nosync (teaching)" in out


def test_explain_says_what_matmul_would_run_for_each_shape(capsys):
    """`tilegemm explain`: tilegemm.explain for each shape of --sizes, on operands of --dtype laid
    out as --layout says (t: stored transposed, passed as .T), made where matmul finds them and
    never filled; a kernel named by --kernel is explained as asked; a dtype or name no kernel
    here serves is matmul's own error in one line (exit 2)."""
    import tilegemm

    code, out = run(capsys, "explain", "--sizes", "64x48x32,1x40x24", "--dtype", "float32")
    on_gpu = tilegemm._cuda.has_gpu()
    assert code == 0 and "64×32 @ 32×48, float32" in out and "1×24 @ 24×40, float32" in out, out
    assert ("cpu_blas" in out) != on_gpu, out
    code, out = run(capsys, "explain", "--sizes", "64x48x32", "--layout", "tt", "--kernel", "register_blocked",
                    "--dtype", "float32")
    assert code == 0 and "register_blocked" in out and "asked for by name" in out, out
    a, b = cli._explained_operands(64, 48, 32, "float32", "nt")
    contiguous = (lambda x: x.flags.c_contiguous) if not on_gpu else (lambda x: x.is_contiguous())
    assert a.shape == (64, 32) and b.shape == (32, 48) and contiguous(a) and contiguous(b.T) and not contiguous(b)
    if not on_gpu:
        assert cli.main(["explain", "--dtype", "bfloat16"]) == 2
        assert "bfloat16 runs on a CUDA GPU" in capsys.readouterr().err
    assert cli.main(["explain", "--kernel", "nope"]) == 2 and "no kernel named 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("value, shows", [("1", True), ("yes", True), ("On", True), ("0", False), ("maybe", False)])
def test_debug_takes_the_flags_words(monkeypatch, capsys, value, shows):
    """TILEGEMM_DEBUG=yes (or on, true) was ignored where every other flag takes those words; a
    value not understood is off, never an error of its own (the CLI reads it while reporting one)."""
    monkeypatch.setenv("TILEGEMM_DEBUG", value)
    if shows:
        with pytest.raises(KeyError, match="no kernel named 'nope'"):
            cli.main(["explain", "--kernel", "nope"])
    else:
        assert cli.main(["explain", "--kernel", "nope"]) == 2 and "no kernel named" in capsys.readouterr().err


@pytest.mark.parametrize("text,shape", [("512", (512, 512, 512)), ("4096x14336x4096", (4096, 14336, 4096)),
                                        ("3×5×7", (3, 5, 7))])
def test_parse_shape(text, shape):
    assert argtypes.shape(text) == shape


@pytest.mark.parametrize("bad", ["0", "1x2", "axb", "-4"])
def test_parse_shape_rejects(bad):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        argtypes.shape(bad)


@pytest.mark.parametrize("argv, says", [
    (["tune", "--budget-s", "0"], "argument --budget-s: '0': must be a positive number"),
    (["tune", "--max-candidates", "-1"], "argument --max-candidates: '-1': must be a positive integer"),
    (["tune", "--sizes", "0x4x4"], "argument --sizes: bad size '0x4x4'"),
    (["library", "--runs", "0"], "argument --runs: '0': must be a positive integer"),
    (["library", "--budget", "nan"], "argument --budget: 'nan': must be a positive number"),
    (["sanitize", "--jobs", "0"], "argument --jobs: '0': must be a positive integer"),
    (["sanitize", "--timeout", "-5"], "argument --timeout: '-5': must be a positive number"),
    (["dist-bench", "--budget", "-5"], "argument --budget: '-5': must be a positive number"),
    (["dist-bench", "--reps", "0"], "argument --reps: '0': must be a positive integer"),
    (["dist-bench", "--panel", "2.5"], "argument --panel: '2.5' is not a positive integer"),
    (["bench", "--seed", "-1"], "argument --seed: '-1': must be an integer ≥ 0"),
    (["bench", "--warmup", "inf"], "argument --warmup: 'inf': must be a number ≥ 0"),  # warmed up for ever
    (["sanitize", "--timeout", "inf"], "argument --timeout: 'inf': must be a positive number"),  # OverflowError
    (["race", "--seed", "x"], "argument --seed: 'x' is not an integer ≥ 0"),
])
def test_every_command_reads_a_number_the_same_way(argv, says, capsys):
    """A number no command can use is refused by the parser, in one line, before the command looks
    for a GPU (tune, library and sanitize said only 'needs a GPU' here and, on one, ran with zero
    runs, jobs or budget; a negative --seed was NumPy's 'expected non-negative integer')."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and says in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("argv, env, says", [
    (["tune", "--dtypes", "nosuch", "--sizes", "8"], {}, "tilegemm tune: unknown dtype nosuch; choose from"),
    (["tune", "--dtypes", ",", "--sizes", "8"], {}, "tilegemm tune: --dtypes ',' names none"),
    (["tune", "--layouts", "x", "--sizes", "8"], {}, "tilegemm tune: unknown layout x"),
    (["tune", "--shapes", "nosuch"], {}, "tilegemm tune: unknown shape set 'nosuch'"),
    (["tune"], {}, "tilegemm tune: no shapes: give --shapes"),
    (["tune", "--from-cache"], {}, "--from-cache writes a database from your tuning cache: name it"),
    (["tune", "--from-cache", "--ship", "--sizes", "64", "--dtypes", "bf16"], {},
     "tilegemm tune: --from-cache writes a database from your tuning cache, timing nothing; --sizes, --dtypes measure: "
     "give one or the other"),  # (they were ignored: every decision in the cache shipped, exit 0)
    (["tune", "--derive", "cache.json", "--gpu", "NVIDIA H200", "--db", "db.json", "--sizes", "64"], {},
     "tilegemm tune: --derive writes a database from a cache file's rung tunings, timing nothing; --sizes measures"),
    (["tune", "--derive", "cache.json", "--gpu", "NVIDIA H200", "--db", "db.json", "--ship"], {},
     "tilegemm tune: --derive writes --db alone"),  # (--ship and --log were dropped without a word, exit 0)
    (["tune", "--derive", "cache.json", "--gpu", "NVIDIA H200", "--db", "db.json", "--log", "l.json"], {},
     "--log would do nothing"),
    (["tune", "--sizes", "8"], {"TILEGEMM_TUNE_BUDGET_S": "x"}, "TILEGEMM_TUNE_BUDGET_S='x': use a finite number"),
    (["tune", "--sizes", "8", "--budget-s", "3", "--max-candidates", "2"],  # (the options set them: not refused
     {"TILEGEMM_TUNE_BUDGET_S": "x", "TILEGEMM_TUNE_MAX_CANDIDATES": "-1"}, "tilegemm tune: needs a CUDA GPU"),
    (["tune", "--sizes", "8"], {"TILEGEMM_TUNE_MAX_CANDIDATES": "-1"}, "TILEGEMM_TUNE_MAX_CANDIDATES='-1'"),
    (["tune", "--dtypes", "fp32", "--ship"], {}, "tilegemm tune: needs a CUDA GPU"),  # (k11's tuning needs no shapes:
    # it was refused for having none)
    (["library", "--shapes", "nosuch"], {}, "tilegemm library: unknown shape set 'nosuch'"),
    (["library", "--shapes", "0"], {}, "shape '0': every dimension must be ≥ 1"),
    (["library", "--dtypes", "nosuch"], {}, "tilegemm library: unknown dtype nosuch"),
    (["library", "--modes", "x"], {}, "tilegemm library: unknown mode x"),
])
def test_arguments_are_checked_before_the_gpu(argv, env, says, capsys, monkeypatch, tmp_path):
    """A mistake in tune's or library's arguments (or tune's environment) is named on any machine:
    on a CPU each said only that it needs a CUDA GPU, hiding the mistake until one was found."""
    if argv[0] == "tune":  # (tune imports its tuner, which needs both, before it reads its arguments)
        pytest.importorskip("torch"), pytest.importorskip("triton")
    torch = sys.modules.get("torch")
    if torch is not None:  # (no GPU, on any machine: a right command would run on one, tune --ship writing the package)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TILEGEMM_CACHE_DIR", str(tmp_path))  # (--from-cache: no user's cache read)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(argv) == 2
    out = capsys.readouterr()
    err = out.err.strip()
    assert says in err and len(err.splitlines()) == 1 and ("GPU" not in err) == ("GPU" not in says) and not out.out, err


@pytest.mark.parametrize("argv, says", [
    (["library", "--dtypes", "bf16"], "tilegemm library: --merge joins measured parts; --dtypes measures: give one or "
                                      "the other"),
    (["library", "--runs", "1", "--no-decode"], "--runs, --no-decode measure: give one or the other"),
    (["library", "--shapes", "llm"], "--shapes measures"),
    (["library", "--no-first"], "--no-first measures"),
    (["model-bench", "--models", "tiny"], "tilegemm model-bench: --merge joins measured parts; --models measures"),
    (["model-bench", "--modes", "eager"], "--modes measures"),
    (["model-bench", "--slice-layers", "2"], "--slice-layers measures"),
    (["library", "--runs", "3"], "--runs measures"),  # at its default: named, so refused (it was taken silently)
    (["library", "--runs=3", "--budget", "0.3"], "--runs, --budget measure"),
    (["library", "--run", "3"], "--runs measures"),  # (argparse's unambiguous prefix of --runs)
    (["library", "--dtypes", "bf16,fp16,tf32,fp8,fp8-promoted,fp32"], "--dtypes measures"),
    (["model-bench", "--runs", "3"], "--runs measures"),
])
def test_merge_refuses_an_option_that_measures(argv, says, capsys, tmp_path):
    """--merge joins parts and measures nothing: a measuring option given with it was ignored
    (exit 0, the merged file written as if it had not been given)."""
    out = tmp_path / "m.json"
    assert cli.main([*argv, "--merge", str(tmp_path / "p.json"), "--json", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and not out.exists(), err


@pytest.mark.parametrize("command", ["library", "model-bench"])
def test_merge_of_a_folder_names_it(command, capsys, tmp_path):
    """It said "[Errno 21] Is a directory: '…'", which names no argument."""
    (tmp_path / "adir").mkdir()
    assert cli.main([command, "--merge", str(tmp_path / "adir"), "--json", str(tmp_path / "m.json")]) == 2
    assert capsys.readouterr().err.strip() == (f"tilegemm {command} --merge: {tmp_path / 'adir'}: a folder, not a "
                                               f"{command} results file")


def test_no_tool_imports_the_cli():
    """Data flows one way: the CLI imports the tools, never the other way round (the tools took
    their argparse types from the CLI)."""
    import pathlib

    src = pathlib.Path(cli.__file__).parent
    offenders = [str(f.relative_to(src)) for f in src.rglob("*.py") if f.name != "cli.py"
                 and any(s in f.read_text() for s in ("from ..cli import", "from .cli import", "tilegemm.cli import",
                                                      "from . import cli", "from .. import cli",
                                                      "from tilegemm import cli", 'import_module("tilegemm.cli")'))]
    assert not offenders


def _shadowing_imports(tree) -> list:
    """(function, name, line read, line imported) where a function imports a name that the module
    binds at its top level too and reads it before that import: Python takes a name a function
    binds anywhere as local to all of it, so the read raises UnboundLocalError."""
    import ast

    top = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            top.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def own(fn):  # the nodes of fn's own scope (not those of the functions and classes inside it)
        todo = list(fn.body)
        while todo:
            node = todo.pop()
            yield node
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                todo.extend(ast.iter_child_nodes(node))

    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = list(own(fn))
        imported = {}
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    name = (a.asname or a.name).split(".")[0]
                    imported[name] = min(imported.get(name, node.lineno), node.lineno)
        declared = {n for node in nodes if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
        out += [(fn.name, node.id, node.lineno, imported[node.id]) for node in nodes
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in imported
                and node.id in top and node.id not in declared and node.lineno < imported[node.id]]
    return out


def test_no_function_reads_a_name_before_its_own_import_of_it():
    """A module imported by its own name inside gemm made that name local to the whole function, and
    gemm's earlier call of the module's function of that name raised UnboundLocalError on every call
    (the CPU tests saw it only through their subprocesses, 15 minutes in; pyflakes says nothing of
    it). Every function of the package is read for the pattern; the check itself is tried on it."""
    import ast
    import pathlib

    bad = ast.parse("def _convert(x):\n    return x\n\n\ndef gemm(a):\n    y = _convert(a)\n"
                    "    if a:\n        from os import path as _convert\n    return y\n")
    assert _shadowing_imports(bad) == [("gemm", "_convert", 6, 8)]
    src = pathlib.Path(cli.__file__).parent
    found = [(str(f.relative_to(src)), *hit) for f in sorted(src.rglob("*.py"))
             for hit in _shadowing_imports(ast.parse(f.read_text()))]
    assert not found


def test_kernel_named_twice_is_timed_twice(capsys, tmp_path):
    from tilegemm.bench import report, results

    path = tmp_path / "r.json"
    code, out = run(capsys, "bench", "--sizes", "24", "--kernels", "cpu_blas,cpu_naive,cpu_blas", "--quiet",
                    "--no-e2e", "--json", str(path))
    assert code == 0 and "Timed twice, cpu_blas at 24" in out
    doc = results.load(path)
    assert sorted(r.get("repeat") for r in doc["records"] if r["kernel"] == "cpu_blas") == [1, 2]
    md = report.render(doc, tmp_path / "rep").read_text()
    assert "## Repeatability" in md and "bootstrap verdict" in md


def test_outputs_through_links_and_streams(tmp_path):
    """A link's file is replaced whole, the link kept, a dangling one too; /dev/stdout is appended
    to, so what a redirected stdout already holds stays."""
    import os

    from tilegemm.bench.results import check_writable, write_json

    link = tmp_path / "latest.json"
    os.symlink(tmp_path / "run.json", link)
    check_writable(link)
    write_json(link, "{}\n")
    assert link.is_symlink() and (tmp_path / "run.json").read_text() == "{}\n"
    import subprocess
    import sys

    out = tmp_path / "out.txt"  # a stdout redirected to a file, as `tilegemm ... --json /dev/stdout > out.txt`
    code = ("print('before', flush=True); from tilegemm.bench.results import check_writable, write_json; "
            "check_writable('/dev/stdout'); write_json('/dev/stdout', '{\"a\": 1}\\n')")
    with open(out, "w") as f:
        subprocess.run([sys.executable, "-c", code], stdout=f, check=True, timeout=120)
    assert out.read_text() == 'before\n{"a": 1}\n'


def test_a_table_of_many_kernels_has_a_row_per_kernel():
    """--kernels simt gave 24 columns, every header cut at any width ('GPU brok… (no sync)'): past
    table.WIDE kernels the table has a row per kernel and a column per size, its headers whole."""
    import io

    from rich.console import Console

    from tilegemm.bench import table

    def rec(kernel, m, ms):
        return dict(kernel=kernel, label=f"GPU {kernel} with a long label", backend="simt", m=m, n=m, k=m, ok=True,
                    median_ms=ms, tflops=2 * m ** 3 / ms / 1e9, time=dict(median_ms=ms, reps=5, spread_ms=0.01 * ms))

    def text(n):
        recs = [rec(f"k{i:02d}", m, 1.0 + i) for m in (128, 256) for i in range(n)]
        con = Console(width=120, record=True, file=io.StringIO())
        con.print(table.build_table(recs, "t"))
        return con.export_text()

    wide = text(table.WIDE + 1)
    assert all(f"GPU k{i:02d} with a long label" in wide for i in range(table.WIDE + 1))  # whole, one a row
    assert "best GFLOP/s (ours)" in wide and "│ 128 " not in wide
    assert "│ 128 " in text(3) or "128 │" in text(3)  # few kernels: a row per size, as before


def test_explain_of_a_size_past_memory_says_so(capsys):
    """explain makes (never fills) the operands: one past NumPy's limits read "Maximum allowed
    dimension exceeded", not naming the size or why explain allocates."""
    if __import__("tilegemm")._cuda.has_gpu():
        pytest.skip("the CPU's memory")
    for size in ("99999999999999999999", "100000000"):
        assert cli.main(["explain", "--sizes", size]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and f"--sizes {size}x{size}x{size}" in err, err
        assert "cannot be allocated here" in err and "ask for a smaller size" in err, err


def test_a_size_past_memory_is_one_line(capsys):
    """A size whose operands cannot fit in the host's memory is refused before anything is made:
    NumPy's MemoryError came out as a traceback, and where the kernel allows overcommit (a GPU
    machine of 128 GiB) the allocation succeeded and filling it had the process killed."""
    assert cli.main(["bench", "--sizes", "64,999999999999x1x1", "--kernels", "cpu_blas"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "bench: 999999999999×1×1 in float32 needs about 22351.7 GiB of host memory" in err, err


@pytest.mark.skipif(__import__("tilegemm")._cuda.has_gpu(), reason="what a machine without a GPU does")
def test_race_says_what_it_cannot_run_here(capsys, tmp_path):
    """Under the simulator a large race would take hours (it started, without a word); with the
    simulator forbidden (TILEGEMM_SIMULATOR=0, a fresh process) it printed a driver traceback."""
    import subprocess
    import sys

    assert cli.main(["race", "--size", "100"]) == 2
    assert "would take hours: ask for 64 or less" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "tilegemm.cli", "race", "--size", "8", "--trials", "1"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**{k: v for k, v in __import__("os").environ.items() if k != "NUMBA_ENABLE_CUDASIM"},
                               "TILEGEMM_SIMULATOR": "0"})  # (this process's simulator set NUMBA_ENABLE_CUDASIM)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "forbids the simulator" in proc.stderr


@pytest.mark.parametrize("setting, says", [("TILEGEMM_DIST_GRAPHS=maybe", "use 1 (on) or 0 (off)"),
                                           ("TILEGEMM_DIST_TRANSPORT=carrier", "use one of auto, peer, nccl"),
                                           ("TILEGEMM_DIST_BARRIER_S=-1", "use a finite number above 0")])
def test_dist_bench_says_a_bad_setting_before_it_spawns(setting, says, capsys, monkeypatch):
    """Each rank printed the setting's traceback, then 'ranks 0, 1 failed'."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available() and torch.cuda.device_count() == 1:
        pytest.skip("one GPU: dist-bench refuses the machine first")
    import tilegemm.distributed  # noqa: F401  (imported already, as after other tests: the check must not rest on
    # the import of _core, which reads TILEGEMM_DIST_GRAPHS)

    name, value = setting.split("=")
    monkeypatch.setenv(name, value)
    assert cli.main(["dist-bench", "--sizes", "16", "--modes", "1d"]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, says", [
    (["bench", "--sizes", "8", "--shapes", "16"], "--sizes and --shapes both name the shapes"),  # --shapes was ignored
    (["bench", "--shapes", ""], "no shapes in ''"),  # ran the defaults
    (["bench", "--shapes", ","], "no shapes in ','"),  # an empty table, exit 0
    (["traffic", "--shapes", ""], "no shapes in ''"),  # '.: a folder, not a shape file'
    (["bench", "--shapes", "0x4x4"], "every dimension must be ≥ 1"),  # 'unknown shape set', the reason hidden
])
def test_shapes_that_name_nothing_runnable_are_refused(argv, says, capfd):
    assert cli.main(argv) == 2
    err = capfd.readouterr().err  # (capfd: on a GPU machine traffic says it from the child it starts)
    assert says in err and len(err.strip().splitlines()) == 1


def test_an_empty_shape_file_and_a_report_said_wrong_before_the_work(capsys, tmp_path):
    (tmp_path / "empty.json").write_text("[]")
    assert cli.main(["bench", "--shapes", str(tmp_path / "empty.json")]) == 2
    assert "no shapes in it" in capsys.readouterr().err
    for text, says in (('{"sets": [1, 2]}', "'sets' must be an object of named sets"),  # ("sequence item 0: expected
                       ('{"shapes": "8"}', "'shapes' must be a list of shapes")):  # str"; "no shapes in it")
        (tmp_path / "bad.json").write_text(text)
        assert cli.main(["bench", "--shapes", str(tmp_path / "bad.json")]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1
    doc = tmp_path / "r.json"
    doc.write_text(open(__import__("os").path.join(__import__("os").path.dirname(__file__), "..", "results",
                                                   "simulator", "bench.json")).read())
    (tmp_path / "afile").write_text("")
    assert cli.main(["report", str(doc), "--out", str(tmp_path / "afile")]) == 2  # was "[Errno 17] File exists"
    assert "a file, not a folder" in capsys.readouterr().err
    assert cli.main(["report", str(doc), "--out", str(tmp_path / "rep"), "--readme", str(tmp_path / "no.md")]) == 2
    assert not (tmp_path / "rep").exists()  # (the report was written, then the README found missing)


def test_a_ptxas_named_that_is_not_there_is_said(capsys, monkeypatch, tmp_path):
    """TILEGEMM_PTXAS naming no tool: another ptxas was used without a word."""
    monkeypatch.setenv("TILEGEMM_PTXAS", str(tmp_path / "nope"))
    if __import__("tilegemm")._cuda.has_gpu():
        pytest.skip("the GPU route reads no ptxas")
    assert cli.main(["resources"]) == 2
    assert "TILEGEMM_PTXAS=" in capsys.readouterr().err


def test_resources_says_what_it_does_before_its_compiles(monkeypatch):
    """Without a GPU the offline route compiles every rung before the table (minutes): one line
    says so first, through `progress` (the CLI's stderr), after the tools are found; a rung's row
    follows as before."""
    from tilegemm.bench import sass

    if not (sass._tool("ptxas") and sass._tool("nvdisasm")):  # (the route is named: a GPU here changes nothing)
        pytest.skip("the offline route needs ptxas and nvdisasm (CUDA toolkit)")
    lines = []
    rows = sass.resource_table(["naive"], "float32", route="offline", progress=lines.append)
    assert len(lines) == 1 and "the SIMT rungs (1) are compiled for sm_90 offline" in lines[0]
    assert [r["kernel"] for r in rows] == ["naive"] and "error" not in rows[0]


def test_counters_says_which_field_a_value_does_not_fit(capsys):
    """`unrolled:BM=abc` said int()'s message, naming neither the field nor the kernel."""
    assert cli.main(["counters", "--kernels", "unrolled:BM=abc"]) == 2
    err = capsys.readouterr().err
    assert "BM=abc: unrolled's BM is a whole number" in err and len(err.strip().splitlines()) == 1


def test_two_outputs_named_one_file_are_refused_before_the_work(capsys, tmp_path):
    """`bench --json X --table X` wrote the results, then replaced them with the printed table, and
    said "results written to X" (exit 0): a file `results X` then refused as not JSON."""
    path = tmp_path / "out"
    code = cli.main(["bench", "--kernels", "cpu_blas", "--sizes", "8", "--quiet", "--no-e2e", "--budget", "0.02",
                     "--json", str(path), "--table", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "--json and --table both name" in err and len(err.strip().splitlines()) == 1
    assert not path.exists()


def test_an_output_to_a_redirected_stdout_keeps_its_place_among_the_lines_printed(tmp_path):
    """`bench --json /dev/stdout > out.txt` wrote the JSON through a second opening of the file, at
    an offset of its own: the line printed next ("results written to /dev/stdout") landed on the
    JSON's first line; `results X --csv /dev/stdout > out.txt` and `ladder X --out /dev/stdout`
    truncated what was printed before. Each is written through the process's stdout, in order."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out.txt"
    code = ("print('before'); from tilegemm.bench.results import write_json, save_csv, SCHEMA; "
            "write_json('/dev/stdout', '{\"a\": 1}\\n'); print('between'); "
            "save_csv(dict(schema=SCHEMA, records=[]), '/dev/stdout'); print('after')")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(cli.__file__) + "/..",
                                                       os.environ.get("PYTHONPATH", "")]))
    with open(out, "w") as f:
        subprocess.run([sys.executable, "-c", code], stdout=f, check=True, timeout=120, env=env)
    lines = out.read_text().splitlines()
    assert lines[:3] == ["before", '{"a": 1}', "between"] and lines[3].startswith("kernel,label,") \
        and lines[4:] == ["after"], lines


@pytest.mark.parametrize("spec", ["warptile:BM=7", "unrolled:BM=7", "big_tile:BN=5"])
def test_counters_says_why_a_tile_smaller_than_its_warps_tile_cannot_run(capsys, spec):
    """A block tile smaller than its warp tile has no warps: the load rule divided by 0 threads
    (ZeroDivisionError, a traceback, exit 1)."""
    assert cli.main(["counters", "--kernels", spec]) == 2
    err = capsys.readouterr().err
    assert "BM, BN must be multiples of WM, WN" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name, value", [("TILEGEMM_AUTOTUNE", "maybe"), ("TILEGEMM_TUNE_BUDGET_S", "soon"),
                                         ("TILEGEMM_FAST_LAUNCH", "2")])
def test_a_setting_the_work_reads_is_refused_before_the_work(capsys, monkeypatch, name, value):
    """TILEGEMM_AUTOTUNE=maybe: bench simulated its kernels, failed the autotuned column on it and
    exited 1 (a wrong kernel's code); now every command says so first, in one line, exit 2."""
    monkeypatch.setenv(name, value)
    assert cli.main(["bench", "--kernels", "naive,autotuned", "--sizes", "8", "--quiet"]) == 2
    out = capsys.readouterr()
    assert f"{name}={value!r}" in out.err and len(out.err.strip().splitlines()) == 1
    assert not out.out.strip()  # (no table: nothing ran)


def test_traffic_refuses_a_simulator_forbidden(tmp_path):
    """TILEGEMM_SIMULATOR=0: traffic re-ran itself with TILEGEMM_SIMULATOR=1, unsaid, where race
    refuses the setting; it refuses it too (a fresh process: this one's simulator is decided)."""
    import os
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "tilegemm.cli", "traffic", "--kernels", "naive", "--shapes", "4"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**{k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"},
                               "TILEGEMM_SIMULATOR": "0", "PYTHONPATH": os.path.dirname(os.path.dirname(
                                   __import__("tilegemm").__file__))})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "TILEGEMM_SIMULATOR=0 forbids the simulator" in proc.stderr and not proc.stdout.strip()


def test_kernel_groups_and_names_combine():
    """`--kernels cpu,naive` said "no kernel named 'cpu'", though cpu is a documented value: groups
    and names combine, in the order named (a kernel named twice is timed twice, as names are)."""
    from tilegemm.bench import sweep

    names = [k.name for k in sweep.choose_kernels("cpu,naive")]
    assert sorted(names[:2]) == ["cpu_blas", "cpu_naive"] and names[2:] == ["naive"]
    assert [k.name for k in sweep.choose_kernels("course")] == list(sweep.COURSE)
    with pytest.raises(KeyError):
        sweep.choose_kernels("cpu,nosuch")


@pytest.mark.parametrize("argv", [[], ["--nope"]])
def test_no_command_is_said_with_the_commands(capsys, argv):
    """`tilegemm --nope` said "the following arguments are required: command", of an option."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "no command given: name one of bench, race" in err and len(err.splitlines()) == 1
