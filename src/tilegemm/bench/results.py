"""The one results format: a versioned JSON document, and a flat CSV view of it.

    doc = document(records, harness=settings.harness(), clocks=watch.to_dict())
    save(doc, "results/h200/course.json"); save_csv(doc, "results/h200/course.csv")
    doc = load("results/h200/course.json")     # refuses other schema versions, saying why

Document, schema "tilegemm.results/1":
    schema       "tilegemm.results/1"
    created      ISO-8601 UTC time of writing
    environment  environment(): GPU, driver and CUDA versions, library versions, host, simulator
    harness      the timing settings the run used (warm-up, budget, stopping rule, L2 flush, ...)
    clocks       clocks.ClockWatch.to_dict() around the run, or null
    ceilings     a ceilings document (bench.ceilings) measured on the same GPU, or null
    records      one dict per kernel × shape, as bench.sweep writes them (REQUIRED_KEYS at least)
Floats that are NaN or infinite are written as null, so the file is strict JSON.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from ..errors import TileGemmError

SCHEMA = "tilegemm.results/1"
# results of the other commands, which a user may hand to report, compare, results or ladder
OTHER_KINDS = {"tilegemm.library/1": "library", "tilegemm.model/1": "model-bench", "tilegemm.scaleout/1": "dist-bench",
               "tilegemm.sanitizer/1": "sanitize", "tilegemm.ceilings/1": "ceilings"}
REQUIRED_KEYS = ("kernel", "backend", "m", "n", "k", "dtype", "ok")
LIBRARIES = ("numpy", "numba", "numba-cuda", "torch", "triton", "matplotlib", "nvidia-ml-py")
# CSV columns first in this order; any other scalar record key follows, sorted.
CSV_FIRST = ("kernel", "label", "backend", "m", "n", "k", "dtype", "ok", "rel_err", "median_ms", "tflops",
             "gbps", "flops", "traffic_bytes", "compulsory_bytes", "intensity", "compile_ms", "e2e_ms",
             "simulated", "check", "note")
CSV_TIME = ("q1_ms", "q3_ms", "iqr_ms", "min_ms", "max_ms", "rse", "reps", "clock", "flush", "warmup_ms",
            "stopped_by")


class ResultsError(TileGemmError, ValueError):
    """A results file that is not a tilegemm results document of a version this code reads."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _host_cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver_version_string() -> str | None:
    """The display driver's version ('570.86.15'): NVML, else nvidia-smi."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001  (optional source)
        pass
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0].strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


def _gpu() -> dict | None:
    from .. import _cuda

    if not _cuda.has_gpu():
        return None
    cuda = _cuda.cuda
    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    info = dict(name=name, compute_capability=".".join(map(str, dev.compute_capability)),
                sm_count=int(dev.MULTIPROCESSOR_COUNT), l2_bytes=int(getattr(dev, "L2_CACHE_SIZE", 0) or 0),
                driver=_driver_version_string())
    try:
        info["memory_bytes"] = int(cuda.current_context().get_memory_info()[1])
    except Exception:  # noqa: BLE001
        info["memory_bytes"] = None
    try:
        from numba.cuda.cudadrv import driver

        info["cuda_driver_api"] = ".".join(map(str, driver.driver.get_version()))
    except Exception:  # noqa: BLE001
        info["cuda_driver_api"] = None
    try:
        info["cuda_runtime"] = ".".join(map(str, cuda.runtime.get_version()))
    except Exception:  # noqa: BLE001
        info["cuda_runtime"] = None
    return info


def environment() -> dict:
    """Where a measurement was taken. GPU fields are null under the simulator or without a GPU."""
    from .. import _cuda

    libs = {"python": platform.python_version()}
    libs.update({name: _version(name) for name in LIBRARIES})
    torch_cuda = None
    if "torch" in sys.modules or libs.get("torch"):
        try:
            import torch

            torch_cuda = torch.version.cuda
        except Exception:  # noqa: BLE001
            torch_cuda = None
    libs["torch_cuda"] = torch_cuda
    try:
        libs["tilegemm"] = _version("tilegemm") or __import__("tilegemm").__dict__.get("__version__")
    except Exception:  # noqa: BLE001
        libs["tilegemm"] = None
    return dict(
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        simulator=bool(_cuda.SIMULATOR),
        gpu=_gpu(),
        libraries=libs,
        code=code_revision(),
        host=dict(cpu=_host_cpu(), cores=os.cpu_count(), os=platform.platform(), hostname=platform.node()),
    )


def code_revision() -> dict:
    """The code a measurement ran, so that a figure can be tied to it: `source`, a SHA-256 of the
    package's files (code and the shipped tuning databases; path and bytes, in path order: the same
    at any copy of one commit), and where the package's own files are tracked by a git checkout
    (not a copy installed inside someone's repository), its `commit` and whether the package's
    files differ from it (`dirty`). (The version says nothing: it stays 0.1.0 across changes.)"""
    import hashlib
    import subprocess

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    out = dict(source=h.hexdigest()[:16])
    try:
        git = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True,  # noqa: E731
                                        timeout=10)
        head = git("rev-parse", "HEAD")
        if head.returncode == 0 and git("ls-files", "--error-unmatch", "__init__.py").returncode == 0:
            out["commit"] = head.stdout.strip()
            out["dirty"] = bool(git("status", "--porcelain", "--", ".").stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def gpu_name(doc: dict) -> str | None:
    gpu = (doc.get("environment") or {}).get("gpu")
    return gpu.get("name") if gpu else None


def document(records: list[dict], harness: dict, clocks: dict | None = None, *, env: dict | None = None,
             ceilings: dict | None = None) -> dict:
    """A results document around sweep records. `env` defaults to environment() now."""
    for i, r in enumerate(records):
        missing = [k for k in REQUIRED_KEYS if k not in r]
        if missing:
            raise ResultsError(f"record {i} ({r.get('kernel', '?')}) lacks {', '.join(missing)}")
    return dict(schema=SCHEMA, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                environment=env if env is not None else environment(), harness=dict(harness),
                clocks=clocks, ceilings=ceilings, records=list(records))


def _clean(x):
    """NaN/Inf -> None; numpy scalars and arrays -> Python; tuples -> lists."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "tolist") and type(x).__module__ == "numpy":
        return _clean(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_json(path, text: str) -> Path:
    """Write `text` to `path` whole or not at all (a temporary file, then a rename): a run cut
    short, or a reader in the middle of a write, never sees half a results file."""
    p = Path(path)
    if _stream(p):  # /dev/stdout, a pipe: appended to, never replaced by a rename (which, run as root, would put
        # a file where /dev/null was) nor truncated (which would wipe what a redirected stdout already holds)
        std = _std_stream(p)
        if std is not None:  # this process's own stdout (stderr): through it, in order with what it prints (a
            # second opening of a redirected stdout has an offset of its own: the next line printed, "results
            # written to /dev/stdout", landed on the JSON's first line)
            std.flush()
            std.write(text)
            std.flush()
            return p
        with open(p, "a", encoding="utf-8") as f:
            f.write(text)
        return p
    target = p.resolve() if p.is_symlink() else p  # a link: its file is replaced, the link kept
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return p


def _std_stream(p: Path):
    """sys.stdout or sys.stderr where p is the file it writes to (/dev/stdout, or the file it is redirected to), else None."""
    for stream in (sys.stdout, sys.stderr):
        try:
            mine, there = os.fstat(stream.fileno()), os.stat(p)
        except (OSError, ValueError, AttributeError):  # (io.UnsupportedOperation is an OSError and a ValueError)
            continue
        if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
            return stream
    return None


def _stream(p: Path) -> bool:
    """Is p a device, a pipe or a process's file descriptor (written through), not a file to replace?"""
    return str(p.absolute()).startswith(("/dev/", "/proc/")) or (p.exists() and not p.resolve().is_file())


def check_writable(path) -> None:
    """Refuse, before any work, an output path that write_json could not write: its nearest folder
    that exists must take a new file (a test file made and removed there); the path must not be a
    folder. (write_json makes the folders between.)"""
    import tempfile

    p = Path(path)
    if p.is_dir():
        raise OSError(f"cannot write {p}: it is a folder; name a file")
    if _stream(p):  # written through (write_json): /dev/stdout
        if not os.access(p, os.W_OK):
            raise OSError(f"cannot write {p}: not writable")
        return
    p = p.resolve() if p.is_symlink() else p  # a link, dangling or not: its file is what write_json makes
    if p.is_dir():
        raise OSError(f"cannot write {path}: it leads to a folder; name a file")
    folder = p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OSError(f"cannot write {p}: {folder} is not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tilegemm-write-test-"):
            pass
    except OSError as e:
        raise OSError(f"cannot write {p}: {folder} takes no new file ({e.strerror or e})") from None


def read_json(path, what: str):
    """A JSON file's content, or one line naming the file and what is wrong with it (missing, a
    folder, not text, not JSON); `what` says what the file should have been."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{p}: no such {what}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{p}: a folder, not a {what}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not a {what} (not UTF-8 text)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: not a {what} (not JSON: {e})") from None


def dumps(doc: dict) -> str:
    """A document as the results files hold it: strict JSON (NaN and Inf as null), one trailing newline."""
    return json.dumps(_clean(doc), indent=1, allow_nan=False, ensure_ascii=False, default=str) + "\n"


def save(doc: dict, path) -> Path:
    if doc.get("schema") != SCHEMA:
        raise ResultsError(f"refusing to save a document with schema {doc.get('schema')!r}; expected {SCHEMA!r}")
    return write_json(path, dumps(doc))


def load(path, *, measured: bool = False) -> dict:
    """Read a results document; a clear ResultsError for anything that is not schema 1, or, for a
    page drawn from its times (measured), that holds no records (its tables and plots would be
    empty, and say "no GPU" of a GPU's run)."""
    p = Path(path)
    try:
        doc = read_json(p, "results file")
    except (OSError, ValueError) as e:
        raise ResultsError(str(e)) from None
    if not isinstance(doc, dict) or "schema" not in doc:
        raise ResultsError(f"{p}: not a tilegemm results document (no 'schema' field; expected {SCHEMA!r})")
    if not isinstance(doc["schema"], str):
        raise ResultsError(f"{p}: 'schema' must be a string (expected {SCHEMA!r}); got {doc['schema']!r}")
    if doc["schema"] in OTHER_KINDS:
        raise ResultsError(f"{p}: the results of `tilegemm {OTHER_KINDS[doc['schema']]}` (schema {doc['schema']!r}); "
                           f"this command reads bench's and the ladder's ({SCHEMA!r}), and scripts/update_docs.py "
                           "draws the pages of every kind")
    if doc["schema"] != SCHEMA:
        raise ResultsError(f"{p}: schema {doc['schema']!r}, but this tilegemm reads {SCHEMA!r}; "
                           "re-run the benchmark or use the tilegemm version that wrote it")
    if not isinstance(doc.get("records"), list):
        raise ResultsError(f"{p}: 'records' must be a list")
    problem = shape_problem(doc)
    if problem:
        raise ResultsError(f"{p}: {problem}")
    if measured and not doc["records"]:
        raise ResultsError(f"{p}: no records, nothing to draw from (a run that measured nothing: see its log)")
    for i, r in enumerate(doc["records"]):
        missing = [k for k in REQUIRED_KEYS if k not in r]
        if missing:
            raise ResultsError(f"{p}: record {i} lacks {', '.join(missing)}")
        problem = _record_problem(r)
        if problem:
            raise ResultsError(f"{p}: record {i} ({r.get('kernel')}): {problem}")
    return doc


def shape_problem(doc) -> str | None:
    """What is not of its type in a tilegemm document's common parts (the environment, its GPU, the
    clocks, harness and ceilings objects, records as objects), or None: a file edited by hand or cut
    short is said so, not met as an AttributeError deep in a report."""
    if not isinstance(doc, dict):
        return f"not a JSON object (a {type(doc).__name__})"
    if "environment" in doc and not isinstance(doc["environment"], dict):  # (null too: every writer gives one)
        return f"'environment' must be an object; got {_a(doc['environment'])}"
    for key in ("clocks", "harness", "ceilings", "overhead"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            return f"'{key}' must be an object; got {_a(doc[key])}"
    for key in ("gpu", "libraries", "code"):
        x = doc.get("environment", {}).get(key)
        if x is not None and not isinstance(x, dict):
            return f"'environment.{key}' must be an object or null; got {_a(x)}"
    parts = doc.get("parts")
    if parts is not None and not (isinstance(parts, list) and all(isinstance(x, dict) for x in parts)):
        return "'parts' must be a list of objects"
    records = doc.get("records", [])
    if not isinstance(records, list):
        return "'records' must be a list"
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            return f"record {i} is not an object (a {type(r).__name__})"
    return None


def _a(x) -> str:
    """A JSON value's kind, as a message names it ("null", "a list")."""
    return "null" if x is None else f"a {type(x).__name__}"


def _record_problem(r: dict) -> str | None:
    """A results record's fields that the tables compute with, checked for type and sense."""
    for key in ("m", "n", "k"):
        if isinstance(r[key], bool) or not isinstance(r[key], int) or r[key] < 0:
            return f"{key} must be a whole number ≥ 0; got {r[key]!r}"
    if r["ok"] is not None and not isinstance(r["ok"], bool):
        return f"ok must be true, false or null; got {r['ok']!r}"
    t = r.get("median_ms")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0):
        return f"median_ms must be a positive time in milliseconds or null; got {t!r}"
    tm = r.get("time")
    if tm is not None and not isinstance(tm, dict):
        return f"time must be an object or null; got a {type(tm).__name__}"
    samples = (tm or {}).get("samples_ms")
    if samples is not None and (not isinstance(samples, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in samples)):
        return f"time.samples_ms must be a list of positive times in milliseconds; got {str(samples)[:60]}"
    return None


def flat_rows(doc: dict) -> list[dict]:
    """One flat dict per record: record scalars, time_* summary fields (no samples), GPU name."""
    gpu = gpu_name(doc) or ("simulator" if (doc.get("environment") or {}).get("simulator") else "")
    rows = []
    for r in doc["records"]:
        row = {k: r.get(k) for k in CSV_FIRST}
        for k, v in r.items():
            if k not in row and k != "time" and not isinstance(v, (dict, list)):
                row[k] = v
        t = r.get("time") or {}
        for k in CSV_TIME:
            row[f"time_{k}"] = t.get(k)
        row["gpu"] = gpu
        rows.append(_clean(row))
    return rows


def save_csv(doc: dict, path) -> Path:
    rows = flat_rows(doc)
    cols: list[str] = []
    for row in rows:
        cols += [c for c in row if c not in cols]
    import io

    f = io.StringIO(newline="")
    w = csv.DictWriter(f, fieldnames=cols or list(CSV_FIRST))
    w.writeheader()
    for row in rows:
        w.writerow({c: "" if row.get(c) is None else row.get(c) for c in cols})
    return write_json(path, f.getvalue())  # (any text: whole or not at all, a stream written through, as JSON is)


# ---- CLI ----------------------------------------------------------------------------------------

def add_cli(subparsers) -> None:
    p = subparsers.add_parser("results", help="check a results file and print its environment, or convert it to CSV")
    p.add_argument("path", help="results JSON (schema tilegemm.results/1)")
    p.add_argument("--csv", metavar="OUT.csv", help="write the flat CSV view here")
    p.set_defaults(func=cli_results)


def cli_results(args) -> int:
    doc = load(args.path)
    env = doc.get("environment") or {}
    gpu = env.get("gpu") or {}
    print(f"{args.path}: {doc['schema']}, {len(doc['records'])} records, created {doc.get('created')}")
    print(f"  GPU: {gpu.get('name', 'none')}  simulator: {env.get('simulator')}  date: {env.get('date')}")
    libs = env.get("libraries") or {}
    if libs:
        print("  versions: " + ", ".join(f"{k} {v}" for k, v in libs.items() if v))
    code = env.get("code") or {}
    if code:
        print(f"  code: {code.get('commit', '')[:12] or 'not a git checkout'}"
              + (" (with changes)" if code.get("dirty") else "") + f", source {code.get('source')}")
    clk = doc.get("clocks") or {}
    if isinstance(clk.get("before"), dict) and isinstance(clk.get("after"), dict):
        mhz = lambda r: f"SM {r['sm_mhz']:.0f} MHz" if isinstance(r.get("sm_mhz"), (int, float)) else "unread"  # noqa: E731
        print(f"  clocks: {mhz(clk['before'])} before, {mhz(clk['after'])} after"
              + (f"; {clk['warning']}" if clk.get("warning") else ""))
    if args.csv:
        print(f"  wrote {save_csv(doc, args.csv)}")
    return 0


def measuring_given(command: str, args, flag: str = "--merge joins measured parts") -> bool:
    """`--merge` joins measured parts and measures nothing (as tune's `--from-cache`): an option that
    measures, given with it (named on the command line, which the CLI keeps in args.named_options,
    or its value not the parser's default, which the command's add_cli keeps in args.measuring), is
    said in one line on stderr (True) rather than ignored, the command exiting 0 without it."""
    named = getattr(args, "named_options", ())
    given = [f"--{dest.replace('_', '-')}" for dest, default in getattr(args, "measuring", {}).items()
             if dest in named or getattr(args, dest) != default]
    if given:
        print(f"tilegemm {command}: {flag}; {', '.join(given)} measure{'s' if len(given) == 1 else ''}: give one or "
              "the other", file=sys.stderr)
    return bool(given)


def merge_files(command: str, paths: list[str], out: str | None, merge) -> int:
    """`command --merge PART… --json OUT`: the parts' documents joined by `merge` (no timing, CPU
    is fine) and written to out; a bad part or a refused join is one line on stderr, exit 2."""
    if not out:
        print(f"tilegemm {command} --merge: name the merged file with --json", file=sys.stderr)
        return 2
    docs = []
    for path in paths:
        try:  # (read_json names the part and what is wrong: a folder said "[Errno 21] Is a directory")
            docs.append(read_json(path, f"{command} results file"))
        except (OSError, ValueError) as e:
            print(f"tilegemm {command} --merge: {e}", file=sys.stderr)
            return 2
        problem = shape_problem(docs[-1]) if isinstance(docs[-1], dict) else None  # (a part that is no object:
        if problem:  # merge names it, as a call of merge from Python gets it)
            print(f"tilegemm {command} --merge: {path}: {problem}", file=sys.stderr)
            return 2
    try:
        doc = merge(docs)
    except ValueError as e:
        print(f"tilegemm {command} --merge: {e}", file=sys.stderr)
        return 2
    write_json(out, dumps(doc))
    print(f"{len(doc['records'])} records from {len(docs)} parts written to {out}")
    return 0
