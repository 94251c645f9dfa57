"""`tilegemm sanitize`: the summary parser on captured text, the expectations, the kernels it
checks, the child on the simulator and Triton's interpreter, the sweep's plumbing through a
stand-in compute-sanitizer, and (on a GPU) the real one over the correct and the broken kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tilegemm import registry, sanitize

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")

MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
tilegemm-sanitize-child {"done": true, "ok": true, "why": ""}
========= ERROR SUMMARY: 0 errors
"""
MEMCHECK_ERRORS = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at smem_tiled_32+0x2f0
=========     by thread (3,0,0) in block (0,0,0)
=========     Address 0x7f3c0e000204 is out of bounds
=========
========= Invalid __global__ write of size 4 bytes
=========     at smem_tiled_32+0x2f0
=========
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
"""
# tilegemm race --racecheck on the H200 (results/h200/race.txt), the kernel signatures shortened
RACECHECK_HAZARDS = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 4 hazards displayed (2 errors, 2 warnings)
========= Error: Race reported between Write access at broken_nosync(Array<float, (int)2, ...>)+0x710
=========     and Read access at broken_nosync(Array<float, (int)2, ...>)+0x730 [256 hazards]
=========     and Read access at broken_nosync(Array<float, (int)2, ...>)+0x790 [256 hazards]
"""
RACECHECK_CLEAN = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""


def test_parse_memcheck():
    clean = sanitize.parse(MEMCHECK_CLEAN)
    assert (clean.errors, clean.hazards, clean.first) == (0, None, [])
    assert clean.summary == ["========= ERROR SUMMARY: 0 errors"]
    bad = sanitize.parse(MEMCHECK_ERRORS)
    assert (bad.errors, bad.hazards) == (2, None)
    assert bad.first == ["========= Invalid __global__ write of size 4 bytes"] * 2
    assert sanitize.parse("========= ERROR SUMMARY: 1 error").errors == 1


def test_parse_racecheck():
    rep = sanitize.parse(RACECHECK_HAZARDS)
    assert (rep.errors, rep.hazards) == (2, 4)
    assert rep.summary == ["========= RACECHECK SUMMARY: 4 hazards displayed (2 errors, 2 warnings)"]
    assert len(rep.first) == 3 and rep.first[0].startswith("========= Error: Race reported between Write")
    assert rep.first[2].endswith("+0x790 [256 hazards]")
    assert (sanitize.parse(RACECHECK_CLEAN).errors, sanitize.parse(RACECHECK_CLEAN).hazards) == (0, 0)
    one = sanitize.parse("========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)")
    assert (one.errors, one.hazards) == (0, 1)


def test_parse_no_summary():
    """A run killed at its timeout, or a sanitizer that never started, counts nothing: None, not 0."""
    rep = sanitize.parse("========= COMPUTE-SANITIZER\nTraceback (most recent call last):\n")
    assert (rep.errors, rep.hazards, rep.summary) == (None, None, [])


def _rec(kernel="smem_tiled_32", tool="memcheck", text=MEMCHECK_CLEAN, child_ok=True, exit_code=0, timed_out=False):
    rep = sanitize.parse(text)
    rec = dict(kernel=kernel, tool=tool, expect=sanitize.expected(kernel, tool), errors=rep.errors,
               hazards=rep.hazards, exit_code=exit_code, seconds=1.0, timed_out=timed_out, child_ok=child_ok,
               products=[dict(ok=bool(child_ok), msg="" if child_ok else "C[0, 0] wrong")])
    return sanitize.judge(rec)


def test_expected_and_judge():
    assert sanitize.expected("broken_nosync", "racecheck") == "hazards"
    assert {sanitize.expected(k, t) for k in ("broken_nosync", "smem_tiled_32", "tc_tiled") for t in sanitize.TOOLS
            if (k, t) != ("broken_nosync", "racecheck")} == {"clean"}
    assert _rec() == (True, "")
    assert _rec(text=MEMCHECK_ERRORS, exit_code=1) == (False, "2 errors")
    assert _rec(tool="racecheck", text=RACECHECK_HAZARDS) == (False, "4 hazards")
    assert _rec(tool="racecheck", text=RACECHECK_CLEAN) == (True, "")
    assert _rec("broken_nosync", "racecheck", RACECHECK_HAZARDS, child_ok=False, exit_code=1) == (True, "")
    assert _rec("broken_nosync", "racecheck", RACECHECK_CLEAN)[0] is False  # a race racecheck missed
    assert _rec("broken_nosync", "memcheck", child_ok=False, exit_code=1) == (True, "")  # its products may be wrong
    ok, why = _rec(child_ok=False, exit_code=1)  # clean, but a wrong product: not clean
    assert not ok and "wrong result" in why
    ok, why = _rec(text="", exit_code=-9, timed_out=True)
    assert not ok and "timed out" in why
    ok, why = _rec(text="========= COMPUTE-SANITIZER\n", child_ok=None, exit_code=-11)
    assert not ok and "no sanitizer summary" in why
    assert _rec(tool=None, text="", child_ok=True) == (True, "")  # the warm-up: the child alone


def test_kernels_to_check_are_the_gpu_kernels():
    from tilegemm.kernels import tensorcore

    names = [k.name for k in sanitize.kernels_to_check()]
    assert "broken_nosync" in names and "smem_tiled_32" in names and "mixed_half" in names
    assert not [n for n in names if registry.get(n).backend == "cpu"]
    assert {k.name for k in registry.select(backend="simt")} <= set(names)
    if tensorcore.AVAILABLE:
        assert set(tensorcore.RUNGS) <= set(names)
    assert [k.name for k in sanitize.kernels_to_check(["naive", "broken_nosync"])] == ["naive", "broken_nosync"]
    with pytest.raises(ValueError, match="cpu_naive"):
        sanitize.kernels_to_check(["cpu_naive"])


def _child(kernel, *args, **env):
    cmd = sanitize.child_command(kernel, *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=SRC, TILEGEMM_AUTOTUNE="0", **env))
    return proc, sanitize._child_report(proc.stdout)


def test_child_simt_on_the_simulator():
    proc, (ok, products) = _child("smem_tiled_32", [(1, 1, 1), (17, 33, 7)], TILEGEMM_SIMULATOR="1")
    assert proc.returncode == 0 and ok, proc.stdout + proc.stderr[-2000:]
    assert [p["shape"] for p in products] == [[1, 1, 1], [17, 33, 7]] and all(p["ok"] for p in products)


def test_child_tensorcore_on_the_interpreter():
    pytest.importorskip("triton")
    proc, (ok, products) = _child("tc_tma_persistent", [(5, 23, 7), (3, 16, 8)], ["fp16", "tf32"],
                                  TRITON_INTERPRET="1")
    assert proc.returncode == 0 and ok, proc.stdout + proc.stderr[-2000:]
    assert all(p["ok"] for p in products) and len(products) == 4
    # 5×23×7's rows are not 16-byte aligned: t03 copies them to aligned rows and runs it itself
    assert {p["ran"] for p in products} == {"tc_tma_persistent"}


def test_child_fails_where_the_rung_ran_none_of_the_products(monkeypatch, capsys):
    """A rung whose every product ran on another rung was not checked at all: the child says so
    and exits 1, though every product was right."""
    import numpy as np

    from tilegemm import registry, validate

    a = np.ones((2, 3), np.float32)

    def elsewhere(kern, shapes, precisions):
        for shape in shapes:
            yield dict(shape=list(shape), precision="fp16", ran="tc_persistent", fell_back=False), \
                validate.check(a @ a.T, a, a.T)

    monkeypatch.setattr(sanitize, "_tc_products", elsewhere)
    assert registry.get("tc_tma_persistent").backend == "tensorcore"
    assert sanitize.child(["--child", "tc_tma_persistent", "--shapes", "2x2x3"]) == 1
    assert "ran none of the products" in capsys.readouterr().out


FAKE = textwrap.dedent("""\
    # stands for compute-sanitizer: runs the child on the simulator at small shapes, then prints a
    # summary: racecheck flags broken_nosync, every other run is clean; `sleep` outlasts any timeout
    import os, subprocess, sys, time
    args = sys.argv[1:]
    tool, kernel = args[args.index("--tool") + 1], args[args.index("--child") + 1]
    if kernel == "naive":
        time.sleep(60)
    cmd = args[args.index("-m") - 1:] + ["--shapes", "1x1x1,5x7x3"]
    rc = subprocess.call(cmd, env=dict(os.environ, TILEGEMM_SIMULATOR="1"))
    if tool == "racecheck":
        n = 12 if kernel == "broken_nosync" else 0
        print(f"========= RACECHECK SUMMARY: {n} hazards displayed ({n} errors, 0 warnings)")
    else:
        print("========= ERROR SUMMARY: 0 errors")
    sys.exit(rc)
""")


def test_sweep_through_a_stand_in_sanitizer(tmp_path, monkeypatch):
    """The sweep's plumbing on a CPU: children in parallel, records judged, a timeout recorded as
    a failure, the JSON and the Markdown table written."""
    exe = tmp_path / "compute-sanitizer"
    exe.write_text(f"#!{sys.executable}\n" + FAKE)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", SRC)
    kernels = sanitize.kernels_to_check(["smem_tiled_32", "broken_nosync"])
    records = sanitize.sweep(kernels, ("memcheck", "racecheck"), jobs=2)
    assert [(r["kernel"], r["tool"]) for r in records] == [
        ("smem_tiled_32", "memcheck"), ("smem_tiled_32", "racecheck"),
        ("broken_nosync", "memcheck"), ("broken_nosync", "racecheck")]
    assert all(r["ok"] for r in records), [(r["kernel"], r["tool"], r["note"], r.get("tail")) for r in records]
    assert records[3]["hazards"] == 12 and records[1]["hazards"] == 0
    assert records[0]["child_ok"] and len(records[0]["products"]) == 2
    slow = sanitize.run("naive", "memcheck", timeout=3)
    assert slow["timed_out"] and slow["ok"] is False and "timed out" in slow["note"]
    doc = sanitize.document(records + [slow], ("memcheck", "racecheck"), 3)
    assert doc["schema"] == "tilegemm.sanitizer/1"
    assert doc["summary"]["checks"] == 5 and doc["summary"]["ok"] == 4 and len(doc["summary"]["failures"]) == 1
    js, md = sanitize.save(doc, tmp_path / "out" / "sanitizer.json")
    assert json.loads(js.read_text())["records"][0]["kernel"] == "smem_tiled_32"
    table = md.read_text()
    assert "| broken_nosync | simt | clean | flagged: 12 hazards (expected) |" in table
    assert "| smem_tiled_32 | simt | clean | clean |" in table
    assert "| naive | simt | ✗ timed out" in table


@pytest.mark.gpu
def test_sanitizer_on_the_gpu():
    """The real compute-sanitizer: the tiled kernel clean under memcheck and racecheck, the
    kernel without its barriers flagged by racecheck."""
    if not sanitize.available():
        pytest.skip("compute-sanitizer is not on the PATH")
    kernels = sanitize.kernels_to_check(["smem_tiled_32", "broken_nosync"])
    records = sanitize.sweep(kernels, ("memcheck", "racecheck"), jobs=4)
    by = {(r["kernel"], r["tool"]): r for r in records}
    assert all(r["ok"] for r in records), [(r["kernel"], r["tool"], r["note"]) for r in records]
    assert by["broken_nosync", "racecheck"]["hazards"] > 0
    assert by["smem_tiled_32", "racecheck"]["hazards"] == 0 and by["smem_tiled_32", "memcheck"]["errors"] == 0
