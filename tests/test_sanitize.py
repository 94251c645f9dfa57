"""`tilegemm sanitize`: the summary parser on captured text, the expectations, the kernels it
checks, the child on the simulator and Triton's interpreter, the sweep's plumbing through a
stand-in compute-sanitizer, and (on a GPU) the real one over the correct and the broken kernel."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tilegemm import cli, registry, sanitize

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")

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


def _rec(kernel="smem_tiled_32", tool="memcheck", text=MEMCHECK_CLEAN, child_ok=True, exit_code=0, timed_out=False,
         right=None, child_why=""):
    rep = sanitize.parse(text)
    right = bool(child_ok) if right is None else right
    rec = dict(kernel=kernel, tool=tool, expect=sanitize.expected(kernel, tool), errors=rep.errors,
               hazards=rep.hazards, exit_code=exit_code, seconds=1.0, timed_out=timed_out, child_ok=child_ok,
               products=[dict(ok=right, msg="" if right else "C[0, 0] wrong")], child_why=child_why)
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
    why = "tc_gemv ran none of the products"  # every product right, on another rung: the child's own reason
    assert _rec("tc_gemv", child_ok=False, exit_code=1, right=True, child_why=why) == (False, why)
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
    path = SRC + os.pathsep + os.environ.get("PYTHONPATH", "")  # (then the caller's: a GPU machine's numpy wheel)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=path, TILEGEMM_AUTOTUNE="0", **env))
    return proc, sanitize._child_report(proc.stdout)[:2]


def test_child_simt_on_the_simulator():
    proc, (ok, products) = _child("smem_tiled_32", [(1, 1, 1), (17, 33, 7)], TILEGEMM_SIMULATOR="1")
    assert proc.returncode == 0 and ok, proc.stdout + proc.stderr[-2000:]
    assert [p["shape"] for p in products] == [[1, 1, 1], [17, 33, 7]] and all(p["ok"] for p in products)


def test_child_tensorcore_on_the_interpreter():
    pytest.importorskip("triton")
    proc, (ok, products) = _child("tc_tma_persistent", [(5, 23, 7), (3, 16, 8)], ["fp16", "tf32"],
                                  TRITON_INTERPRET="1")
    assert proc.returncode == 0 and ok, proc.stdout + proc.stderr[-2000:]
    assert all(p["ok"] for p in products) and len(products) == 8  # 2 shapes × 2 precisions × B's 2 layouts
    assert {p["b"] for p in products} == {"n", "t"}
    # 5×23×7's rows are not 16-byte aligned: t03 copies them to aligned rows and runs it itself
    assert {p["ran"] for p in products} == {"tc_tma_persistent"}


def test_child_runs_a_forced_configuration_and_fails_where_the_rung_cannot():
    """--config: every product runs that configuration (its source says so); one the rung cannot
    run (t02 with a 192-row block: Triton's are powers of two) fails the child, never passes."""
    pytest.importorskip("triton")
    cfg = dict(BM=32, BN=32, BK=32, GROUP_M=8, num_stages=2, num_warps=4)
    proc, (ok, products) = _child("tc_persistent", [(5, 23, 7)], ["fp16"], cfg, TRITON_INTERPRET="1")
    assert proc.returncode == 0 and ok, proc.stdout + proc.stderr[-2000:]
    assert {(p["ran"], p["source"]) for p in products} == {("tc_persistent", "forced configuration")}
    proc, (ok, products) = _child("tc_persistent", [(5, 23, 7)], ["fp16"], dict(cfg, BM=192), TRITON_INTERPRET="1")
    assert proc.returncode != 0 and ok is not True and "power of 2" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.gpu
def test_gpu_child_makes_its_operands_with_gemms_conversion_kernels():
    """On a GPU a tensor-core child's BF16 and FP8 operands come from FP32 through gemm's conversion
    kernels: both operands' paired for B row-major, A's alone beside a Wᵀ that comes converted (FP8:
    with the caller's scale), as gemm launches them; FP8 quantises A by turns with a caller's scale
    (A of the pair: B's amax alone; A beside Wᵀ: no amax at all); every product right, on the rung
    itself."""
    import torch

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("t03 needs sm_90")
    proc, (ok, products) = _child("tc_tma_persistent", [(5, 23, 7), (130, 264, 24)], ["bf16", "fp8"])
    assert proc.returncode == 0 and ok, proc.stdout + proc.stderr[-2000:]
    assert len(products) == 8 and all(p["ok"] for p in products)
    assert {p["ran"] for p in products} == {"tc_tma_persistent"}
    by = {(p["precision"], p["b"], tuple(p["shape"]), *p["callers_scale"]): p["converted"] for p in products}
    assert by == {("bf16", "n", (5, 23, 7)): ["cast_pair"], ("bf16", "t", (5, 23, 7)): ["cast"],
                  ("bf16", "n", (130, 264, 24)): ["cast_pair"], ("bf16", "t", (130, 264, 24)): ["cast"],
                  ("fp8", "n", (5, 23, 7), "a"): ["partial_amax", "quantise_pair"],
                  ("fp8", "t", (5, 23, 7)): ["partial_amax", "quantise"],
                  ("fp8", "n", (130, 264, 24)): ["partial_amax_pair", "quantise_pair"],
                  ("fp8", "t", (130, 264, 24), "a"): ["quantise"]}


def test_child_on_the_interpreter_converts_with_torch_and_leaves_bf16_and_fp8_out():
    """Under Triton's interpreter the conversion kernels are not CUDA's to run: FP16 from torch's
    cast; BF16 and FP8, computed wrongly there, left out rather than checked wrong, and a child left
    nothing at all says so and fails."""
    pytest.importorskip("triton")
    proc, (ok, products) = _child("tc_tiled", [(5, 23, 7)], ["fp16", "bf16", "fp8"], TRITON_INTERPRET="1")
    assert proc.returncode == 0 and ok, proc.stdout + proc.stderr[-2000:]
    assert [(p["precision"], p["converted"]) for p in products] == [("fp16", []), ("fp16", [])]
    proc, (ok, products) = _child("tc_tiled", [(5, 23, 7)], ["fp8"], TRITON_INTERPRET="1")
    assert proc.returncode == 1 and ok is False and products == [] and "no product to run" in proc.stdout


def test_fp8_operands_take_the_callers_scale_by_turns():
    """FP8 quantises each layout's operands by turns with their own amax or a caller's scale
    (sanitize.GIVEN), so that the quantiser's form that reads a given scale runs under the tools
    too: alone (A beside a converted Wᵀ) and in either half of a pair. Here on the CPU, where
    torch's cast quantises: the scales are the caller's where given, the amax's elsewhere, and the
    values the rung multiplies are the operands to FP8's precision. The table counts each form in
    a child's products."""
    pytest.importorskip("triton")
    import numpy as np

    from tilegemm import validate

    a32, b32 = validate.random_operands(5, 23, 7, "float32", seed=0)
    forms = {}
    for layout, turns in sanitize.GIVEN.items():
        for given in turns:
            ops, values = sanitize._tc_operands(a32, b32, "fp8", layout, "cpu", given)
            got = {x: float(ops[f"scale_{x}"]) for x in "ab"}
            callers = set(given) | ({"b"} if layout == "t" else set())
            for x, v in got.items():
                own = float(np.abs(a32 if x == "a" else b32).max()) / 448
                assert v == (sanitize.CALLERS_SCALE if x in callers else pytest.approx(own, rel=1e-6)), (layout, given)
            a, b = (x.numpy() for x in values())
            assert np.allclose(a, a32, rtol=2**-3, atol=2**-9) and np.allclose(b, b32, rtol=2**-3, atol=2**-9)
            assert ops["fast_accum"] == (layout == "t")
            forms[layout, given] = got
    assert set(forms) == {("n", ()), ("n", ("b",)), ("n", ("a",)), ("t", ()), ("t", ("a",))}
    with pytest.raises(ValueError, match="no scale to give"):
        sanitize._tc_operands(a32, b32, "fp8", "t", "cpu", ("b",))
    doc = json.loads((ROOT / "results" / "h100" / "sanitizer-tensorcore.json").read_text())
    for rec in doc["records"]:
        for x in rec.get("products") or ():
            x.pop("callers_scale", None)
    assert "GIVEN" not in sanitize.markdown(doc)
    for rec in doc["records"]:  # (every child runs the same products: the table counts one child's)
        for x, given in zip(rec.get("products") or (), ("b", "b", "a", "a", "a")):
            x.update(precision="fp8", b="n" if given == "b" else "t", callers_scale=[given])
        if rec.get("products"):
            rec["products"][4]["b"] = "n"
    text = sanitize.markdown(doc)
    assert "products of a tensor-core child: A alone (B = Wᵀ converted already) ×2, A of a pair ×1, B of a pair ×2." \
        in text, text


def test_sanitize_refuses_a_forced_configuration_without_one_tensorcore_kernel(capsys):
    for argv in (["sanitize", "--config", '{"BM": 64}'],
                 ["sanitize", "--kernels", "tc_persistent,tc_splitk", "--config", '{"BM": 64}'],
                 ["sanitize", "--kernels", "tc_persistent", "--config", "[64]"],
                 ["sanitize", "--kernels", "tc_persistent", "--config", "{}"],
                 ["sanitize", "--kernels", "tc_persistent", "--precisions", "fp4"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err


def test_child_fails_where_the_rung_ran_none_of_the_products(monkeypatch, capsys):
    """A rung whose every product ran on another rung was not checked at all: the child says so
    and exits 1, though every product was right."""
    import numpy as np

    from tilegemm import registry, validate

    a = np.ones((2, 3), np.float32)

    def elsewhere(kern, shapes, precisions, config=None):
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
    monkeypatch.setenv("PYTHONPATH", SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
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


# racecheck on t05 (tc_warp_specialized, 130×264×24) on the H200, 2026-11-24, with the line numbers
# of the source it ran (210: `def ws_kernel`, 227: the `if` that encloses its `gl.warp_specialize(`
# call) as {DEF}, {WS}
T05_RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Read access at ws_kernel+0xf0 in t05_warp_specialized.py:{DEF}
=========     and Write access at ws_kernel+0x1040 in t05_warp_specialized.py:{DEF} [13 hazards]
=========     and Write access at ws_kernel+0x2b00 in t05_warp_specialized.py:{WS} [5 hazards]
=========
========= Error: Race reported between Read access at ws_kernel+0xf0 in t05_warp_specialized.py:{DEF}
=========     and Write access at ws_kernel+0x1040 in t05_warp_specialized.py:{DEF} [6 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""
CONTROL_RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Read access at ws_control+0x130 in _ws_control.py:{DEF}
=========     and Write access at ws_control+0x560 in _ws_control.py:{DEF} [8 hazards]
=========     and Write access at ws_control+0x6a0 in _ws_control.py:{WS} [4 hazards]
=========
tilegemm-sanitize-child {{"done": true, "ok": true, "why": ""}}
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def _lines(module, function):
    sites = sorted(sanitize.dispatch_sites(module, function), key=lambda s: int(s.rsplit(":", 1)[1]))
    return {"DEF": sites[0].rsplit(":", 1)[1], "WS": sites[1].rsplit(":", 1)[1]}, sites


def test_dispatch_sites_are_the_def_and_warp_specialize_lines():
    """Triton gives a Gluon kernel's warp-specialize dispatch its `def` line and the line of its
    gl.warp_specialize call: the sites found are exactly those lines of the source."""
    from tilegemm.kernels.tensorcore import _ws_control, t05_warp_specialized

    for mod, fn in (sanitize.DISPATCHES["tc_warp_specialized"], sanitize.CONTROL):
        _, sites = _lines(mod, fn)
        path = {"ws_kernel": t05_warp_specialized.__file__, "ws_control": _ws_control.__file__}[fn]
        text = open(path).read().splitlines()
        found = [text[int(s.rsplit(":", 1)[1]) - 1].strip() for s in sites]
        assert found[0].startswith(f"def {fn}(") and len(found) >= 2, found
        calls = [line for line in text if "gl.warp_specialize(" in line and not line.lstrip().startswith(("#", "`"))]
        assert sum("gl.warp_specialize(" in line for line in found) == len(calls) >= 1, found
        # the rest: the statements that enclose a call (t05's `if CONSUMERS == 1:` and `elif CONSUMERS == 2:`)
        assert all(line.startswith(("gl.warp_specialize(", "if ", "elif ", "for ", "with ", "while "))
                   for line in found[1:]), found


def test_races_are_pairs_of_sites_with_their_counts():
    # Numba's kernels report no source lines: their sites are the access's own words, which no
    # dispatch's lines match
    assert sanitize.races(RACECHECK_HAZARDS) == [
        dict(sites=("broken_nosync(Array<float, (int)2, ...>)+0x710", "broken_nosync(Array<float, (int)2, ...>)+0x730"),
             hazards=256),
        dict(sites=("broken_nosync(Array<float, (int)2, ...>)+0x710", "broken_nosync(Array<float, (int)2, ...>)+0x790"),
             hazards=256)]
    text = T05_RACECHECK.format(DEF=210, WS=227)
    assert sanitize.races(text) == [
        dict(sites=("t05_warp_specialized.py:210", "t05_warp_specialized.py:210"), hazards=13),
        dict(sites=("t05_warp_specialized.py:210", "t05_warp_specialized.py:227"), hazards=5),
        dict(sites=("t05_warp_specialized.py:210", "t05_warp_specialized.py:210"), hazards=6)]


def _t05_rec(text, control_text, control_ok=True, control_timed_out=False):
    t05_lines, _ = _lines(*sanitize.DISPATCHES["tc_warp_specialized"])
    c_lines, _ = _lines(*sanitize.CONTROL)
    out = text.format(**t05_lines)
    rep = sanitize.parse(out)
    rec = dict(kernel="tc_warp_specialized", tool="racecheck", expect="clean", errors=rep.errors, hazards=rep.hazards,
               exit_code=0, seconds=1.0, timed_out=False, child_ok=True, products=[dict(ok=True, msg="")],
               races=sanitize.races(out))
    c_out = control_text.format(**c_lines)
    crep = sanitize.parse(c_out)
    control = dict(hazards=crep.hazards, races=sanitize.races(c_out), child_ok=control_ok, timed_out=control_timed_out)
    return sanitize.attribute(rec, control)


def test_t05s_hazards_pass_only_if_all_are_the_dispatchs_and_the_control_shows_them():
    rec = _t05_rec(T05_RACECHECK, CONTROL_RACECHECK)
    assert rec["ok"] and rec["dispatch"]["hazards"] == 24 and rec["dispatch"]["own"] == 0, rec
    assert rec["dispatch"]["control_hazards"] == 12
    assert sanitize.cell(rec).startswith("clean in its own accesses; 24 hazards in Triton's dispatch")
    # a hazard at one of t05's own lines (its consumer's epilogue store, say) fails it
    own = T05_RACECHECK.replace("and Write access at ws_kernel+0x1040 in t05_warp_specialized.py:{DEF} [6",
                                "and Write access at ws_kernel+0x1040 in t05_warp_specialized.py:190 [6")
    rec = _t05_rec(own, CONTROL_RACECHECK)
    assert not rec["ok"] and "6 hazards in its own accesses" in rec["note"], rec["note"]
    # a control racecheck finds clean, or whose result is wrong, explains nothing
    clean = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    rec = _t05_rec(T05_RACECHECK, clean)
    assert not rec["ok"] and "the control does not show" in rec["note"]
    rec = _t05_rec(T05_RACECHECK, CONTROL_RACECHECK, control_ok=False)
    assert not rec["ok"] and "wrong or missing" in rec["note"]
    # a hazard racecheck gives no source line for is not the dispatch's
    bare = T05_RACECHECK.replace(" in t05_warp_specialized.py:{DEF} [6", " [6")
    rec = _t05_rec(bare, CONTROL_RACECHECK)
    assert not rec["ok"] and "6 hazards in its own accesses" in rec["note"], rec["note"]
    # hazards counted in the summary but no racecheck line read: not located, not passed
    rec = _t05_rec("========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n", CONTROL_RACECHECK)
    assert not rec["ok"] and "none located" in rec["note"]
    rec = _t05_rec(T05_RACECHECK, "", control_timed_out=True)
    assert not rec["ok"] and "the control timed out" in rec["note"]
    # no hazards at all: clean, whatever the control shows
    rec = _t05_rec(clean, CONTROL_RACECHECK)
    assert rec["ok"] and sanitize.cell(rec) == "clean"


def test_the_control_compiles_to_t05s_prologue_and_dispatch():
    """Offline (Triton's ptxas for sm_90): the control has what t05 has before its partitions, a
    barrier among the default warps with a thread count after the mbarriers' initialisation, then
    the dispatch at named barrier 1 and the register moves; its expected output per program."""
    from tilegemm.kernels.tensorcore import _ws_control

    ptx = _ws_control.compile_for_sm90().asm["ptx"]
    assert ptx.count("mbarrier.init") == 2 and "bar.sync \t0, 256;" in ptx
    assert "barrier.sync \t1;" in ptx and "setmaxnreg" in ptx
    want = _ws_control.expected()
    assert int(want[0]) == 0 and int(want[1024]) == 1024 and int(want[1024 + 32]) == 0 and len(want) == 4 * 2048


def test_a_json_path_ending_md_is_refused_before_the_work(monkeypatch, tmp_path, capsys):
    """The Markdown table is written beside the JSON as its .md: `--json report.md` wrote the
    JSON, then replaced it with the table (said "wrote report.md" twice, exit 0): the run's records lost."""
    ran = []
    monkeypatch.setattr(sanitize, "available", lambda: True)
    monkeypatch.setattr(sanitize, "sweep", lambda *a, **kw: ran.append(1) or [])
    path = tmp_path / "report.md"
    assert cli.main(["sanitize", "--kernels", "naive", "--tools", "memcheck", "--json", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "would replace it" in err, err
    assert not ran and not path.exists()
    assert cli.main(["sanitize", "--kernels", "naive", "--tools", "memcheck", "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == sanitize.SCHEMA
    assert (tmp_path / "r.md").read_text().startswith("# compute-sanitizer")


@pytest.mark.parametrize("kernels", [",", "", " , "])
def test_kernels_naming_none_is_said_so(kernels, capsys):
    """`--kernels ,` was every kernel, CPU ones included: "not a GPU kernel: cpu_blas, cpu_naive"."""
    assert cli.main(["sanitize", "--kernels", kernels]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--kernels names no kernel" in err and "cpu_" not in err, err
