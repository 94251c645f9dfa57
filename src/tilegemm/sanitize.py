"""`tilegemm sanitize`: compute-sanitizer over every GPU kernel in the registry, on awkward shapes.

    tilegemm sanitize [--kernels a,b] [--tools memcheck,racecheck] [--jobs 8] [--timeout 300] [--json PATH]
    tilegemm sanitize --kernels tc_warp_specialized --config '{"BM": 192, ...}' --precisions fp16,bf16

Each kernel × tool is one child process under `compute-sanitizer --tool TOOL`:
`python -m tilegemm.sanitize --child KERNEL` runs that kernel alone, on SIMT_SHAPES in its first
dtype (a SIMT rung: its registry launcher on Numba device arrays), or on TC_SHAPES in each of
TC_PRECISIONS and both B layouts (a tensor-core rung: `dispatch.run_problem` on torch CUDA tensors, the path of
`matmul(kernel=...)` and `gemm(precision=...)`, which also says which rung ran: t05 hands what it
cannot run, rows not 16-byte aligned among them, to t03, which realigns them). A tensor-core
child's FP16, BF16 and FP8 operands are made from FP32 ones by gemm's conversion kernels
(kernels.tensorcore._convert: a cast, FP8's amax and quantisation; both operands' paired, and A's
alone beside a B that comes converted, as an e4m3 weight comes with its caller's scale; FP8 from
one shape to the next with the operands' own scales or a caller's, GIVEN), launched by run_problem
ahead of the rung's, so the tool checks them too. FP8 needs sm_89, and under Triton's
interpreter (the CPU tests) BF16 and FP8 are computed wrongly: those products are left out. Outputs are poisoned with NaN and
every product is checked against the float64 reference (`validate.check`); the child exits 1 on a
wrong product, on a rung that fell back where it could have run, or on a rung that never ran, so
that a clean report never hides a wrong result. `--config` forces one configuration on one
tensor-core rung (a form the tuning database never gives these small shapes, such as t05's 192-row
tile): every product the rung can run runs it, or the child fails saying what ran instead (another
rung, or the rung in another configuration); those it cannot run go where they always go, said
in the table of which rung ran them.

Expected: memcheck, initcheck, racecheck and synccheck all clean, except on the kernels tagged
"broken" (broken_nosync), which racecheck must flag (hazards > 0) and whose products may be wrong.
Clean means a summary line that counts nothing, exit 0 and a child whose products were right.

Flags: racecheck `--racecheck-report analysis`; every tool `--report-api-errors no`, so the
errors counted are the kernels' (a failed API call fails the child instead, visibly; torch and
Triton probe the driver with calls that may fail on purpose). Tensor-core children run with
PYTORCH_NO_CUDA_MEMORY_CACHING=1: through torch's caching allocator an overrun into a neighbour
in the same block would look like a valid access. Every child runs on the GPU, never Numba's
simulator (TILEGEMM_SIMULATOR=0, NUMBA_ENABLE_CUDASIM=0), with TILEGEMM_AUTOTUNE=0 (no search
under the sanitizer).

Warp-specialised Gluon kernels (t05) carry Triton's dispatch: the default warps write each worker
warp's partition number into a table in shared memory, and the workers read it after a barrier.
racecheck reports hazards between those writes and reads (never in t05's own accesses), and
reports them as well in a control kernel that has t05's prologue and dispatch and no shared data of
its own (`kernels/tensorcore/_ws_control.py`). Where such a kernel is checked, racecheck also runs
the control, and a hazard whose two accesses are both at the dispatch's source lines (the kernel's
`def`, its `gl.warp_specialize` call and the statements around that call, where Triton puts the
dispatch code) counts as the dispatch's: the check passes only if every hazard is located and is
the dispatch's, and the control, in the same run, shows hazards at its own dispatch's lines, none
elsewhere, and computes right. Any other hazard, or one racecheck gives no source line for, fails
it. The rule cannot tell a hazard in other compiler-made code that Triton also puts at the `def`
line from the dispatch's (docs/perf-notes.md, 45).

Triton compiles slowly under the sanitizer, so each tensor-core child first runs once without it;
its compiles land in Triton's cache (TRITON_CACHE_DIR, default ~/.triton/cache), which every
child shares. A child past `timeout` seconds is killed and its check fails, saying so. A rung the
GPU cannot run (t03 and t05 need sm_90) is recorded as not run, neither passed nor failed.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from . import registry, validate
from .argtypes import positive_float, positive_int

SCHEMA = "tilegemm.sanitizer/1"
TOOLS = ("memcheck", "initcheck", "racecheck", "synccheck")
COMMON_FLAGS = ("--report-api-errors", "no")
TOOL_FLAGS = {"racecheck": ("--racecheck-report", "analysis")}
GPU_BACKENDS = ("simt", "tensorcore")
SIMT_SHAPES = ((1, 1, 1), (17, 33, 7), (33, 65, 129))
# 3×16×8 and 130×264×24 have 16-byte aligned rows (TMA runs them: a tensor smaller than one tile,
# then edge tiles and K below one tile step); the others are unaligned, and edges everywhere;
# 2×72×1040 is decode, K past one 1024-step of t06 with aligned rows (its FOLD within a thread).
TC_SHAPES = ((1, 1, 1), (5, 23, 7), (3, 16, 8), (130, 264, 24), (257, 263, 129), (2, 72, 1040))
# B row-major (n), and column-major (t: B = Wᵀ, a view of an N×K weight, as nn.Linear passes it)
TC_LAYOUTS = ("n", "t")
TC_PRECISIONS = ("fp16", "bf16", "tf32", "fp8")
TC_TOLERANCE = {"fp16": "float16", "bf16": "bfloat16", "tf32": "tf32", "fp8": "float8_e4m3fn"}
CALLERS_SCALE = 2.0**-6  # FP8: a scale the caller gives (|x| < 1 quantises below 64)
# FP8: the operands gemm quantises with the caller's scale (the quantiser's GIVEN form), by layout and shape index
# (turn i % len): B row-major, A's (B's amax alone, then a pair of one given scale and one own), none (both amaxes
# paired: 5×23×7 and 257×263×129, A's amax over many programs), then B's; B = Wᵀ (converted already, with its
# caller's scale), A's own amax, then A's given (the quantiser alone, no amax)
GIVEN = {"n": (("a",), (), ("b",)), "t": ((), ("a",))}
TIMEOUT_S = 300.0
MARK = "tilegemm-sanitize-child "  # a child's report lines, among the sanitizer's

# warp-specialised kernels: (module, Gluon function) of the kernel, and of their control
DISPATCHES = {"tc_warp_specialized": ("tilegemm.kernels.tensorcore.t05_warp_specialized", "ws_kernel")}
CONTROL = ("tilegemm.kernels.tensorcore._ws_control", "ws_control")

_ERRORS = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_SITE = re.compile(r"(?:Race reported between|and) (Read|Write) access at (.+?)(?: in (\S+):(\d+))?(?: \[(\d+) hazards?\])?$")
_RACES = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


def available() -> bool:
    """compute-sanitizer is on the PATH and a real CUDA GPU is here."""
    from . import _cuda

    return shutil.which("compute-sanitizer") is not None and _cuda.has_gpu()


def kernels_to_check(names=None) -> list[registry.Kernel]:
    """The registry's GPU kernels (SIMT and tensor-core), in its order; `names` picks some."""
    if names is None:
        return [k for k in registry.all_kernels() if k.backend in GPU_BACKENDS]
    kernels = registry.select(names)
    host = [k.name for k in kernels if k.backend not in GPU_BACKENDS]
    if host:
        raise ValueError(f"not a GPU kernel: {', '.join(host)} (sanitize checks the SIMT and tensor-core kernels)")
    return kernels


def expected(kernel: str, tool: str | None) -> str:
    """'hazards' where racecheck must flag the kernel (one tagged 'broken'), else 'clean'."""
    return "hazards" if tool == "racecheck" and "broken" in registry.get(kernel).tags else "clean"


# ---- what compute-sanitizer printed --------------------------------------------------------------

@dataclass
class Report:
    errors: int | None  # ERROR SUMMARY's count (racecheck: RACECHECK SUMMARY's errors); None: no summary
    hazards: int | None  # racecheck's hazards displayed (errors and warnings); None for the other tools
    summary: list[str] = field(default_factory=list)  # the summary lines
    first: list[str] = field(default_factory=list)  # the first findings


def parse(text: str, first: int = 5) -> Report:
    """The summary of a compute-sanitizer run, from its output."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    errors = [int(m.group(1)) for m in map(_ERRORS.search, lines) if m]
    races = [m for m in map(_RACES.search, lines) if m]
    hazards = sum(int(m.group(1)) for m in races) if races else None
    n_errors = sum(errors) if errors else sum(int(m.group(2)) for m in races) if races else None
    summary = [ln for ln in lines if "ERROR SUMMARY" in ln or "RACECHECK SUMMARY" in ln]
    findings = [ln for ln in lines if ln.startswith("========= ")
                and (not ln.startswith("=========  ") or ln.endswith("hazards]"))
                and "SUMMARY" not in ln and "COMPUTE-SANITIZER" not in ln and "Target application" not in ln]
    return Report(n_errors, hazards, summary, findings[:first])


def races(text: str) -> list[dict]:
    """racecheck's analysis lines as pairs of accesses: [{"sites": (site, site), "hazards": n}],
    one for each "and" line under a "Race reported between" line; a site is "file:line", or the
    access's own words where racecheck gave no source line (Numba's kernels), which no dispatch
    matches."""
    out, first = [], None
    for line in text.splitlines():
        m = _SITE.search(line.rstrip())
        if m is None:
            continue
        site = f"{m.group(3).rsplit('/', 1)[-1]}:{m.group(4)}" if m.group(3) else m.group(2)
        if "Race reported between" in line:
            first = site
        else:
            out.append(dict(sites=(first or "?", site), hazards=int(m.group(5) or 1)))
    return out


def dispatch_sites(module: str, function: str) -> set[str]:
    """The source lines Triton gives a Gluon kernel's warp-specialize dispatch, as "file:line": the
    kernel's `def` line, and each `warp_specialize` call's line and the lines of the statements
    that enclose it (t05's calls sit under `if CONSUMERS == 1:` and `elif CONSUMERS == 2:`, lines
    Triton may give the dispatch's last table write)."""
    import ast
    import importlib
    import inspect
    import textwrap

    fn = getattr(importlib.import_module(module), function)
    fn = getattr(fn, "fn", fn)  # the Python function under the JIT wrapper
    lines, start = inspect.getsourcelines(fn)
    name = os.path.basename(inspect.getsourcefile(fn))
    tree = ast.parse(textwrap.dedent("".join(lines)))
    found = set()

    def visit(node, enclosing):
        if isinstance(node, ast.FunctionDef):
            found.add(node.lineno)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "warp_specialize":
            found.update(enclosing + [node.lineno])
        inner = enclosing + [node.lineno] if isinstance(node, (ast.If, ast.For, ast.While, ast.With)) else enclosing
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, [])
    return {f"{name}:{start + n - 1}" for n in found}


def attribute(rec: dict, control: dict | None) -> dict:
    """A warp-specialised kernel's racecheck record with its hazards split into the dispatch's
    (both accesses at `dispatch_sites`) and its own, beside what the control showed; judged again."""
    mine = dispatch_sites(*DISPATCHES[rec["kernel"]])
    theirs = dispatch_sites(*CONTROL)
    pairs = rec.get("races") or []
    in_dispatch = sum(r["hazards"] for r in pairs if set(r["sites"]) <= mine)
    own = sum(r["hazards"] for r in pairs if not set(r["sites"]) <= mine)
    ctrl = control or {}
    rec = dict(rec, dispatch=dict(
        hazards=in_dispatch, own=own, sites=sorted(mine),
        control_hazards=sum(r["hazards"] for r in ctrl.get("races") or [] if set(r["sites"]) <= theirs),
        control_other=sum(r["hazards"] for r in ctrl.get("races") or [] if not set(r["sites"]) <= theirs),
        control_right=bool(ctrl.get("child_ok")),
        control={k: ctrl.get(k) for k in ("hazards", "summary", "first_errors", "child_ok", "exit_code", "seconds",
                                          "timed_out")}))
    rec["ok"], rec["note"] = judge(rec)
    if rec["ok"]:
        rec.pop("tail", None)  # kept by run() while the hazards were not yet attributed
    return rec


# ---- one child -------------------------------------------------------------------------------------

def child_command(kernel: str, shapes=None, precisions=None, config: dict | None = None) -> list[str]:
    """The command line of the child that runs `kernel` alone (shapes, precisions: the defaults;
    config: a configuration forced on every product)."""
    cmd = [sys.executable, "-m", "tilegemm.sanitize", "--child", kernel]
    if shapes:
        cmd += ["--shapes", ",".join("x".join(map(str, s)) for s in shapes)]
    if precisions:
        cmd += ["--precisions", ",".join(precisions)]
    if config:
        cmd += ["--config", json.dumps(config, sort_keys=True)]
    return cmd


def _child_env(backend: str) -> dict:
    src = str(Path(__file__).resolve().parent.parent)  # this tilegemm, whatever the child's path
    # the real GPU, never the simulator (a simulated child launches nothing: a vacuous "clean")
    env = dict(os.environ, TILEGEMM_SIMULATOR="0", NUMBA_ENABLE_CUDASIM="0", TILEGEMM_AUTOTUNE="0",
               PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    if backend == "tensorcore":
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    return env


def _child_report(out: str) -> tuple[bool | None, list[dict], str]:
    """(the child's verdict, None where it did not finish; its products; its reason for a verdict
    against it) from its report lines."""
    ok, products, why = None, [], ""
    for line in out.splitlines():
        if line.startswith(MARK):
            try:
                item = json.loads(line[len(MARK):])
            except ValueError:
                continue
            if "done" in item:
                ok, why = bool(item["ok"]), item.get("why") or ""
            else:
                products.append(item)
    return ok, products, why


def _flagged(rec: dict) -> int:
    """What racecheck flagged: its hazards, or the errors where no RACECHECK SUMMARY was printed."""
    return rec["hazards"] if rec["hazards"] is not None else rec["errors"] or 0


def judge(rec: dict) -> tuple[bool, str]:
    """(does the record match its expectation, why not)."""
    kern = registry.get(rec["kernel"])
    broken = "broken" in kern.tags
    if rec["timed_out"]:
        hint = " (Triton compiling under the sanitizer? raise --timeout)" if kern.backend == "tensorcore" else ""
        return False, f"timed out after {rec['seconds']:.0f} s{hint}"
    if rec["tool"] is not None and rec["errors"] is None:
        return False, f"no sanitizer summary (exit {rec['exit_code']})"
    if rec["expect"] == "hazards":
        return (True, "") if _flagged(rec) else (False, "racecheck did not flag it")
    d = rec.get("dispatch")
    if rec["hazards"] and d:
        if d["own"]:
            return False, f"{d['own']} hazards in its own accesses ({d['hazards']} in Triton's dispatch)"
        if not d["hazards"]:
            return False, f"{rec['hazards']} hazards, none located (no racecheck line read)"
        c = d.get("control") or {}
        if c.get("timed_out") or c.get("hazards") is None:
            return False, (f"{d['hazards']} hazards in Triton's dispatch; the control "
                           f"{'timed out' if c.get('timed_out') else 'gave no racecheck summary'}")
        if not (d["control_hazards"] and not d["control_other"] and d["control_right"]):
            return False, (f"{d['hazards']} hazards in Triton's dispatch, which the control does not show "
                           f"as they are ({d['control_hazards']} at its dispatch's lines, {d['control_other']} "
                           f"elsewhere{'' if d['control_right'] else ', its result wrong or missing'})")
    elif rec["hazards"]:
        return False, f"{rec['hazards']} hazards"
    if rec["errors"] and not (d and rec["hazards"]):  # racecheck's errors are its hazards, judged above
        return False, f"{rec['errors']} errors"
    if rec["child_ok"] is None:
        return False, f"the child did not finish (exit {rec['exit_code']})"
    if not broken and not rec["child_ok"]:
        wrong = "; ".join(p["msg"] for p in rec["products"] if not p["ok"])[:300]
        return False, f"wrong result: {wrong}" if wrong else rec.get("child_why") or "the child failed"
    if not broken and rec["exit_code"] != 0:
        return False, f"exit {rec['exit_code']}"
    return True, ""


def run(kernel: str, tool: str | None, timeout: float = TIMEOUT_S, shapes=None, precisions=None,
        config: dict | None = None) -> dict:
    """Run `kernel`'s child under `compute-sanitizer --tool TOOL` (tool None: without the
    sanitizer) and return its record: the counts, the summary and first findings, the child's
    products and verdict, exit code, seconds, and `ok` (it matches `expected`) with a `note`."""
    kern = registry.get(kernel)
    cmd = child_command(kernel, shapes, precisions, config)
    out, exit_code, seconds, timed_out = _under(tool, cmd, _child_env(kern.backend), timeout)
    rep = parse(out)
    child_ok, products, why = _child_report(out)
    rec = dict(kernel=kernel, backend=kern.backend, tool=tool, expect=expected(kernel, tool), errors=rep.errors,
               hazards=rep.hazards, exit_code=exit_code, seconds=seconds, timed_out=timed_out, summary=rep.summary,
               first_errors=rep.first, child_ok=child_ok, products=products, not_run=None,
               child_why=why)
    if config:
        rec["config"] = config
    if tool == "racecheck":
        rec["races"] = races(out)
    rec["ok"], rec["note"] = judge(rec)
    if not rec["ok"]:
        rec["tail"] = out[-3000:]
    return rec


def run_control(timeout: float = TIMEOUT_S) -> dict:
    """The warp-specialize control (`_ws_control`) under racecheck: what racecheck reports of
    Triton's dispatch alone, and whether the control's result was right."""
    cmd = [sys.executable, "-m", "tilegemm.sanitize", "--control"]
    _under(None, cmd, _child_env("tensorcore"), timeout)  # compiles it into Triton's cache, as the rungs' warm-up
    out, exit_code, seconds, timed_out = _under("racecheck", cmd, _child_env("tensorcore"), timeout)
    rep = parse(out)
    return dict(kernel="ws_control", tool="racecheck", hazards=rep.hazards, errors=rep.errors, exit_code=exit_code,
                seconds=seconds, timed_out=timed_out, summary=rep.summary, first_errors=rep.first,
                child_ok=_child_report(out)[0], races=races(out))


def _under(tool: str | None, cmd: list[str], env: dict, timeout: float) -> tuple[str, int, float, bool]:
    """cmd under `compute-sanitizer --tool TOOL` (None: alone): (output, exit code, seconds, timed out)."""
    if tool is not None:
        exe = shutil.which("compute-sanitizer")
        if exe is None:
            raise FileNotFoundError("compute-sanitizer is not on the PATH")
        cmd = [exe, "--tool", tool, *COMMON_FLAGS, *TOOL_FLAGS.get(tool, ()), *cmd]
    t0 = time.perf_counter()
    # a session of its own, so that a timeout ends the sanitizer and the child it started
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    return out, proc.returncode, round(time.perf_counter() - t0, 1), timed_out


def racecheck(kernel: str, size: int = 64, timeout: float = 600) -> tuple[int, str]:
    """Run one kernel at size³ under racecheck (`tilegemm race --racecheck`): (hazards, summary
    and first findings)."""
    rec = run(kernel, "racecheck", timeout, shapes=[(size, size, size)])
    text = "\n".join(rec["summary"] + rec["first_errors"])
    return rec["hazards"] or 0, text or rec.get("tail", "")


def not_run(kernel: registry.Kernel, tool: str, why: str) -> dict:
    return dict(kernel=kernel.name, backend=kernel.backend, tool=tool, expect=expected(kernel.name, tool),
                not_run=why, ok=None, note=f"not run: {why}")


# ---- the sweep -------------------------------------------------------------------------------------

def _one_tensorcore(kernels, config: dict | None) -> None:
    if config and [k.backend for k in kernels] != ["tensorcore"]:
        raise ValueError("--config forces a configuration on one tensor-core kernel: name it alone in --kernels")


def sweep(kernels, tools=TOOLS, *, jobs: int = 4, timeout: float = TIMEOUT_S, progress=None, precisions=None,
          config: dict | None = None) -> list[dict]:
    """Every kernel × tool, `jobs` children at a time; records in kernel, then tool order.
    Tensor-core kernels first run once without the sanitizer, to fill Triton's cache.
    precisions, config: the tensor-core children's (config: one tensor-core kernel's, forced)."""
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1; got {jobs}")
    _one_tensorcore(kernels, config)
    run_ = lambda name, tool: run(name, tool, timeout, precisions=precisions, config=config)  # noqa: E731
    say = progress or (lambda line: None)
    why_not = {k.name: k.runnable() for k in kernels}
    runs = [k for k in kernels if why_not[k.name][0]]
    records = [not_run(k, t, why_not[k.name][1]) for k in kernels if not why_not[k.name][0] for t in tools]
    with ThreadPoolExecutor(jobs) as pool:
        warm = [pool.submit(run_, k.name, None) for k in runs if k.backend == "tensorcore"]
        for f in as_completed(warm):
            rec = f.result()
            say(f"{rec['kernel']:24s} {'(warm-up)':10s} {cell(rec)} ({rec['seconds']:.0f} s)")
        # the slowest first: tensor-core rungs, racecheck
        tasks = sorted(((k, t) for k in runs for t in tools),
                       key=lambda kt: (kt[0].backend != "tensorcore", kt[1] != "racecheck"))
        futures = [pool.submit(run_, k.name, t) for k, t in tasks]
        control = None
        if "racecheck" in tools and any(k.name in DISPATCHES for k in runs):
            control = pool.submit(run_control, timeout)
        mine = []
        for f in as_completed(futures):
            rec = f.result()
            if rec["kernel"] in DISPATCHES and rec["tool"] == "racecheck":
                mine.append(rec)  # judged once the control has run
                continue
            say(f"{rec['kernel']:24s} {rec['tool']:10s} {cell(rec)} ({rec['seconds']:.0f} s)")
            records.append(rec)
        ctrl = control.result() if control else None
        for rec in mine:
            rec = attribute(rec, ctrl)
            say(f"{rec['kernel']:24s} {rec['tool']:10s} {cell(rec)} ({rec['seconds']:.0f} s)")
            records.append(rec)
    order = {k.name: i for i, k in enumerate(kernels)}
    return sorted(records, key=lambda r: (order[r["kernel"]], tools.index(r["tool"])))


def sanitizer_version() -> str | None:
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith("Version")), " ".join(lines) or None)


def document(records: list[dict], tools, timeout: float, precisions=None, config: dict | None = None) -> dict:
    """The results document, schema tilegemm.sanitizer/1 (precisions, config: as given to sweep)."""
    from .bench import results

    failures = [f"{r['kernel']} {r['tool']}: {r['note']}" for r in records if r["ok"] is False]
    return dict(
        schema=SCHEMA, environment=results.environment(), compute_sanitizer=sanitizer_version(),
        tools=list(tools), flags={t: [*COMMON_FLAGS, *TOOL_FLAGS.get(t, ())] for t in tools}, timeout_s=timeout,
        shapes=dict(simt=SIMT_SHAPES, tensorcore=TC_SHAPES, tensorcore_precisions=tuple(precisions or TC_PRECISIONS),
                    tensorcore_layouts=TC_LAYOUTS),
        **(dict(config=config) if config else {}),
        records=records,
        summary=dict(checks=len(records), ok=sum(r["ok"] is True for r in records),
                     not_run=sum(r["ok"] is None for r in records), failures=failures),
    )


def cell(rec: dict) -> str:
    """A record in a word or three: clean, N errors, flagged: N hazards (expected), ..."""
    if rec["ok"] is None:
        return rec["note"]
    if rec["expect"] == "hazards" and rec["ok"]:
        return f"flagged: {_flagged(rec)} hazards (expected)"
    d = rec.get("dispatch") or {}
    if rec["ok"] and d.get("hazards"):
        return f"clean in its own accesses; {d['hazards']} hazards in Triton's dispatch, as in the control"
    if rec["ok"]:
        return "clean" if rec["tool"] else "right"
    return f"✗ {rec['note']}"


def _shapes_text(shapes) -> str:
    return ", ".join("×".join(map(str, s)) for s in shapes)


def markdown(doc: dict) -> str:
    """The kernel × tool table, with what was run and what ran it."""
    env = doc.get("environment") or {}
    gpu = (env.get("gpu") or {}).get("name", "no GPU")
    tools, shapes = doc["tools"], doc["shapes"]
    asked = shapes["tensorcore_precisions"]
    seen = {p["precision"] for r in doc["records"] for p in r.get("products") or () if "precision" in p}
    left = [x for x in asked if x not in seen] if seen else []
    out = ["# compute-sanitizer over every GPU kernel", "",
           f"Generated by `tilegemm sanitize` ({env.get('date', '?')}, {gpu}, compute-sanitizer "
           f"{doc.get('compute_sanitizer') or '?'}); do not edit.", "",
           f"SIMT rungs: {_shapes_text(shapes['simt'])} (M×N×K), in their first dtype. Tensor-core rungs: "
           f"{_shapes_text(shapes['tensorcore'])} in {', '.join(x for x in asked if x not in left)}"
           + (f" ({', '.join(left)} not run here: FP8 needs sm_89)" if left else "")
           + (", B row-major and column-major (Wᵀ)" if shapes.get("tensorcore_layouts") else "") + ". Every product "
           "is checked against a float64 reference. Expected: every tool clean, except racecheck on the "
           "broken kernel, which must flag hazards.", "",
           *([f"Every product the rung can run ran the configuration `{json.dumps(doc['config'], sort_keys=True)}`, "
              "forced (the others: below, which rung ran them).", ""]
             if doc.get("config") else []),
           "| kernel | backend | " + " | ".join(tools) + " |", "|---|---|" + "---|" * len(tools)]
    by = {(r["kernel"], r["tool"]): r for r in doc["records"]}
    kernels = list(dict.fromkeys(r["kernel"] for r in doc["records"]))
    for name in kernels:
        recs = [by.get((name, t)) for t in tools]
        backend = next(r["backend"] for r in recs if r)
        out.append(f"| {name} | {backend} | " + " | ".join(cell(r) if r else "—" for r in recs) + " |")
    s = doc["summary"]
    out += ["", f"{s['checks']} checks: {s['ok']} as expected, {len(s['failures'])} not, {s['not_run']} not run."]
    out += [f"- {f}" for f in s["failures"]]
    for rec in doc["records"]:
        d = rec.get("dispatch")
        if d:
            c = d["control"]
            out += ["", f"{rec['kernel']} under racecheck: {rec['hazards'] or 0} hazards displayed; {d['hazards']} "
                    f"hazards between accesses at the lines Triton gives its warp-specialize dispatch "
                    f"({', '.join(d['sites'])}), {d['own']} anywhere else. The control (`_ws_control`: t05's "
                    f"prologue and dispatch, no shared data of its own) in the same run: {c['hazards']} hazards "
                    f"displayed, {d['control_hazards']} of them at its dispatch's lines, {d['control_other']} "
                    f"elsewhere; its result {'right' if c['child_ok'] else 'wrong or missing'} "
                    "(docs/perf-notes.md, 45)."]
    ran = []
    for name in kernels:
        rec = next((r for r in doc["records"] if r["kernel"] == name and r.get("products")), None)
        if rec and rec["backend"] == "tensorcore":
            counts: dict[str, int] = {}
            for p in rec["products"]:
                counts[p["ran"]] = counts.get(p["ran"], 0) + 1
            ran.append(f"- {name}: " + ", ".join(f"{k} ×{v}" for k, v in counts.items()))
    if ran:
        out += ["", "Which rung ran the tensor-core products (t05 hands what it cannot run to t03, which realigns "
                "unaligned rows itself):"]
        out += ran
    converted = sorted({fn for r in doc["records"] for p in r.get("products") or () for fn in p.get("converted", ())})
    if converted:
        out += ["", "gemm's conversion kernels, run ahead of the rung's launches under every tool (the operands "
                "made from FP32, as gemm makes them): " + ", ".join(f"`{fn}`" for fn in converted) + "."]
    child = next((r for r in doc["records"] if r["backend"] == "tensorcore" and r.get("products")), None)
    given = collections.Counter((p["b"], x) for p in (child or {}).get("products", ())
                                for x in p.get("callers_scale", ()))
    if given:
        forms = {("t", "a"): "A alone (B = Wᵀ converted already)", ("n", "a"): "A of a pair", ("n", "b"): "B of a pair"}
        out += ["", "FP8 operands quantised with the caller's scale, not their own amax (the quantiser's GIVEN form), "
                "products of a tensor-core child: " + ", ".join(f"{forms[f]} ×{given[f]}" for f in forms if given[f])
                + "."]
    return "\n".join(out) + "\n"


def save(doc: dict, path) -> tuple[Path, Path]:
    """Write the document to `path` and its Markdown table beside it (same name, .md)."""
    from .bench.results import write_json

    p = Path(path)
    return (write_json(p, json.dumps(doc, indent=1, ensure_ascii=False) + "\n"),
            write_json(p.with_suffix(".md"), markdown(doc)))


# ---- the child -------------------------------------------------------------------------------------

def _simt_products(kern: registry.Kernel, shapes):
    from .race import run_kernel

    dtype = kern.dtypes[0]
    for i, (m, n, k) in enumerate(shapes):
        a, b = validate.random_operands(m, n, k, dtype, seed=i)
        yield dict(shape=[m, n, k], dtype=dtype, ran=kern.name), validate.check(run_kernel(kern.name, a, b), a, b,
                                                                                 kernel=kern.name)


def _tc_operands(a32, b32, prec: str, layout: str, dev: str, given: tuple = ()):
    """A and B at `prec` from FP32 operands, converted by gemm's own `_convert` (on a GPU its
    conversion calls, kernels.tensorcore._convert, which run under the tool too; under Triton's
    interpreter torch's cast), their calls ordered as gemm orders them (`paired`). Layout n (B
    row-major): both operands FP32, both converted, one launch a kernel for the two, FP8's scales
    their own but those `given` and the MMA's sums promoted to FP32 (fast_accum False). Layout t (B a view of an N×K
    weight): B comes at the precision already (FP8: e4m3 with a caller's scale, CALLERS_SCALE), so
    A's calls run alone, with fast_accum. TF32 converts nothing. given: the FP32 operands ("a", "b")
    that FP8 quantises with a caller's scale (CALLERS_SCALE) rather than its own amax. Returns
    (Problem's keyword arguments but c, a function giving the values the rung multiplied, to be
    called once the prologue has run)."""
    import numpy as np
    import torch

    from .kernels.tensorcore import _convert as conv
    from .kernels.tensorcore import _problem as P
    from .tensorcore_api import _convert

    a = torch.from_numpy(a32).to(dev)
    b = torch.from_numpy(b32).to(dev) if layout == "n" else torch.from_numpy(np.ascontiguousarray(b32.T)).to(dev).t()
    want = P.PRECISIONS[prec][0] or torch.float8_e4m3fn
    fp8 = prec == "fp8"
    if layout == "t" and "b" in given:
        raise ValueError("B = Wᵀ comes converted already, with its caller's scale: no scale to give its quantiser")
    scale = {x: CALLERS_SCALE if fp8 and x in given else None for x in "ab"}
    if layout == "t" and prec != "tf32":  # a weight kept at the precision (|B| < 1: below 64 at this scale)
        scale["b"] = CALLERS_SCALE if fp8 else None
        b = (b / CALLERS_SCALE if fp8 else b).to(want)
    (xa, sa, ka), (xb, sb, kb) = _convert(a, want, scale["a"]), _convert(b, want, scale["b"])
    made = dict(scale_a=sa, scale_b=sb, fast_accum=layout == "t") if fp8 else {}
    values = ((lambda: (xa.double() * sa.double(), xb.double() * sb.double())) if fp8  # noqa: E731
              else lambda: (xa, xb))
    return dict(a=xa, b=xb, sources=(a if ka else None, b if kb else None), prologue=tuple(conv.paired(ka, kb)),
                **made), values


def _tc_products(kern: registry.Kernel, shapes, precisions, config: dict | None = None):
    import torch

    from . import dispatch, tuning
    from .kernels.tensorcore import _problem as P

    dev = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: Triton's interpreter (the tests)
    gpu = dev == "cuda" and not P.interpreting()
    runs = dict(bf16=gpu, fp8=gpu and torch.cuda.get_device_capability() >= (8, 9))
    host = lambda x: x.double().cpu().numpy()  # noqa: E731
    for i, (m, n, k) in enumerate(shapes):
        for prec, layout in itertools.product(precisions, TC_LAYOUTS):
            if not runs.get(prec, True):  # (no FP8 MMA before sm_89; Triton's interpreter computes BF16 and FP8 wrongly)
                continue
            a32, b32 = validate.random_operands(m, n, k, "float32", seed=i)
            given = GIVEN[layout][i % len(GIVEN[layout])] if prec == "fp8" else ()
            ops, values = _tc_operands(a32, b32, prec, layout, dev, given)
            out = torch.bfloat16 if prec == "fp8" else P.PRECISIONS[prec][0]
            p = P.Problem(c=torch.full((m, n), float("nan"), dtype=out, device=dev), precision=prec, **ops)
            usable = tuning.usable(kern.name, p)
            got = dispatch.run_problem(p, kern.name, config=config)
            ran = got.get("kernel", kern.name)
            if config and ran == kern.name and any(got.get(k) != v for k, v in config.items()):
                ran += " (another configuration)"  # a fallback within the rung: not the form forced
            if dev == "cuda":
                torch.cuda.synchronize()
            a, b = (host(x) for x in values())
            chk = validate.check(host(p.c), a, b, dtype=TC_TOLERANCE[prec], kernel=kern.name,
                                 out_dtype="bfloat16" if prec == "fp8" else None)
            yield dict(shape=[m, n, k], precision=prec, b=layout, ran=ran, fell_back=usable and ran != kern.name,
                       source=got.get("source"), converted=[c.fn.__name__ for c in p.prologue],
                       callers_scale=list(given)), chk


def child(argv=None) -> int:
    """Run one kernel on the awkward shapes and check every product; print one report line per
    product and a last one with the verdict (MARK, then JSON); exit 1 where it is wrong."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tilegemm.sanitize")
    ap.add_argument("--child", metavar="KERNEL")
    ap.add_argument("--control", action="store_true", help="the warp-specialize control (_ws_control) instead")
    ap.add_argument("--shapes", help="MxNxK,... (default: SIMT_SHAPES or TC_SHAPES)")
    ap.add_argument("--precisions", default=",".join(TC_PRECISIONS), help="tensor-core rungs: of fp16, bf16, tf32, fp8")
    ap.add_argument("--config", type=json.loads, help="tensor-core rungs: a configuration (JSON) forced on every product")
    args = ap.parse_args(argv)
    if args.control:
        from .kernels.tensorcore import _ws_control

        right = _ws_control.check()
        print(MARK + json.dumps(dict(done=True, ok=right, why="" if right else "the control's stores are wrong")),
              flush=True)
        return 0 if right else 1
    if not args.child:
        ap.error("give --child KERNEL or --control")
    kern = registry.get(args.child)
    tc = kern.backend == "tensorcore"
    shapes = ([tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")] if args.shapes
              else TC_SHAPES if tc else SIMT_SHAPES)
    products = _tc_products(kern, shapes, args.precisions.split(","), args.config) if tc else _simt_products(kern, shapes)
    ok, ran_itself, count = True, False, 0
    for what, chk in products:
        count += 1
        good = chk.ok and not what.get("fell_back")
        msg = str(chk).splitlines()[0] if not chk.ok else f"fell back to {what['ran']}" if not good else ""
        rel = chk.rel_err if math.isfinite(chk.rel_err) else None
        print(MARK + json.dumps(dict(what, ok=good, rel_err=rel, msg=msg)), flush=True)
        ok &= good
        ran_itself |= what["ran"] == kern.name
    why = ("" if ran_itself else f"{kern.name} ran none of the products" if count else
           f"no product to run: {args.precisions} left out here (FP8 needs sm_89 and a GPU, BF16 a GPU: Triton's "
           "interpreter computes both wrongly)")
    print(MARK + json.dumps(dict(done=True, ok=ok and ran_itself, why=why)), flush=True)
    return 0 if ok and ran_itself else 1


# ---- the command -----------------------------------------------------------------------------------

def add_cli(subparsers) -> None:
    p = subparsers.add_parser("sanitize", help="compute-sanitizer (memcheck, initcheck, racecheck, synccheck) over "
                                               "every GPU kernel on awkward shapes (GPU)")
    p.add_argument("--kernels", help="name,name,... (default: every SIMT and tensor-core kernel)")
    p.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, of {', '.join(TOOLS)}")
    p.add_argument("--jobs", type=positive_int, default=4, help="children at a time (each keeps a CPU core busy)")
    p.add_argument("--timeout", type=positive_float, default=TIMEOUT_S, help="seconds a child may take; past it, a failure")
    p.add_argument("--json", metavar="PATH", help="write the results here, and the Markdown table beside it (.md)")
    p.add_argument("--precisions", help=f"tensor-core rungs' precisions, of {', '.join(TC_PRECISIONS)} (default: all)")
    p.add_argument("--config", help="a configuration (JSON) forced on every product of the one tensor-core kernel "
                   "in --kernels (e.g. a tile the database gives no small shape)")
    p.set_defaults(func=cli_sanitize, sets_env=lambda a: {"TILEGEMM_AUTOTUNE"})  # (its runs' own: _child_env)


def cli_sanitize(args) -> int:
    tools = [t for t in args.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    if bad or not tools:
        raise ValueError(f"unknown tool {', '.join(bad) or '(none)'}; choose from {', '.join(TOOLS)}")
    names = [n.strip() for n in args.kernels.split(",") if n.strip()] if args.kernels is not None else None
    if names == []:  # (kernels_to_check([]) would take every kernel, and name the CPU ones as not GPU kernels)
        raise ValueError("--kernels names no kernel: give name,name,… of `tilegemm kernels` (default: every GPU kernel)")
    kernels = kernels_to_check(names)
    precisions = [x for x in (args.precisions or "").split(",") if x] or None
    if precisions and not set(precisions) <= set(TC_PRECISIONS):
        raise ValueError(f"unknown precision in {args.precisions!r}; choose from {', '.join(TC_PRECISIONS)}")
    try:
        config = json.loads(args.config) if args.config else None
    except json.JSONDecodeError as e:
        raise ValueError(f"--config is not JSON: {e}") from None
    if config is not None and not (isinstance(config, dict) and config):
        raise ValueError("--config must be a JSON object of the rung's parameters, e.g. '{\"BM\": 128, ...}'")
    _one_tensorcore(kernels, config)
    if args.json:  # the Markdown goes beside it (save): said before the work, as the JSON's own path is (cli.main)
        md = Path(args.json).with_suffix(".md")
        if os.path.realpath(md) == os.path.realpath(args.json):
            raise ValueError(f"--json {args.json}: the Markdown table is written beside the JSON as {md.name}, "
                             "which would replace it; name the JSON file .json")
        from .bench.results import check_writable

        check_writable(md)
    if not available():
        print("tilegemm sanitize: needs an NVIDIA GPU and compute-sanitizer on the PATH", file=sys.stderr)
        return 2
    records = sweep(kernels, tools, jobs=args.jobs, timeout=args.timeout, progress=lambda s: print(s, flush=True),
                    precisions=precisions, config=config)
    doc = document(records, tools, args.timeout, precisions, config)
    print()
    print(markdown(doc), end="")
    if args.json:
        for path in save(doc, args.json):
            print(f"wrote {path}")
    return 1 if doc["summary"]["failures"] else 0


if __name__ == "__main__":
    sys.exit(child())
