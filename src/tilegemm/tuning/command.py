"""`tilegemm tune`: measure the fastest rung and configuration for shapes, and keep them.

    tilegemm tune --shapes tuning --dtypes bf16,fp8,tf32        # into your tuning cache
    tilegemm tune --sizes 4096x14336x4096 --dtypes fp16          # one shape
    tilegemm tune --sizes 8192 --dtypes fp8-promoted             # gemm(..., fast_accum=False)'s FP8
    tilegemm tune --shapes tuning --ship                         # this GPU's shipped database
    tilegemm tune --from-cache --ship                            # the database from your cache, no timing
    tilegemm tune --derive CACHE.json --gpu "NVIDIA H200" --db F  # the same, offline, from a cache file

Each shape and dtype is tuned once per class and bucket (`tilegemm.tuning.tuner.tune`); the
winner goes to the user's cache, and with --ship (or --db PATH) to the database file of this GPU
that the package ships (`tilegemm/data/tuning/<gpu>.json`), which every call without a cached
entry reads. A database's tuning (and --derive's choice) ranks candidates as if each launch cost
the host at least `cache.SHIP_FLOOR_MS` (a slow host's), where the user's cache alone ranks at this
host's measured cost: the database serves other hosts (--from-cache copies the cache's decisions as
they were ranked). B is row-major except for FP8 (column-major, as torch._scaled_mm wants it);
--layouts adds others. Needs a CUDA GPU with torch and Triton.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..argtypes import positive_float, positive_int, sizes
from .cache import PROMOTED

DTYPES = ("bf16", "fp16", "fp8", PROMOTED, "tf32", "fp32")  # PROMOTED ("fp8-promoted"): gemm(..., fast_accum=False)'s
# class; fp32: the SIMT ladder's autotuned rung (k11), once per GPU
MEASURING = ("shapes", "sizes", "dtypes", "layouts", "budget_s", "max_candidates")  # what a tuning run times, which
# --from-cache (no timing: every decision in the cache) refuses rather than ignores
_IN = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp8": "float8_e4m3fn", PROMOTED: "float8_e4m3fn"}
_OUT = {"bf16": "bfloat16", "fp16": "float16", "tf32": "float32", "fp8": "bfloat16", PROMOTED: "bfloat16"}


def problem(dtype: str, m: int, n: int, k: int, b_layout: str = ""):
    """A problem of random operands (never zeros) for tuning: B row-major ('n') or column-major
    ('t'); default: column-major for FP8, row-major otherwise."""
    import torch

    from ..kernels.tensorcore import _problem as P

    dev = torch.device("cuda")
    a = (torch.rand(m, k, device=dev) * 2 - 1).to(getattr(torch, _IN[dtype]))
    fp8 = dtype in ("fp8", PROMOTED)
    b_t = b_layout == "t" or (not b_layout and fp8)
    b = (torch.rand(n, k, device=dev) * 2 - 1).to(getattr(torch, _IN[dtype])).t() if b_t else \
        (torch.rand(k, n, device=dev) * 2 - 1).to(getattr(torch, _IN[dtype]))
    c = torch.empty(m, n, device=dev, dtype=getattr(torch, _OUT[dtype]))
    scale = torch.ones(1, device=dev) if fp8 else None
    return P.Problem(a, b, c, "fp8" if fp8 else dtype, scale_a=scale, scale_b=scale, fast_accum=dtype != PROMOTED)


def db_path(gpu: str) -> str:
    """The shipped database file of this GPU, inside the package (src/tilegemm/data/tuning/)."""
    from . import cache

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(here, "data", "tuning", f"{cache.slug(gpu)}.json")


def write_db(path: str, entries: dict, facts: dict, simt: dict | None = None, old: dict | None = None) -> int:
    """Merge entries (and SIMT winners) into the database at path (old: its contents, where the
    caller has read them already), its header refreshed; returns the entry count. A file there
    that is not a tuning database is refused (read_db), never merged into and overwritten."""
    from . import cache

    if old is None:
        old = read_db(path) if os.path.exists(path) else {}
    merged = dict(old.get("entries", {}))
    merged.update(entries)
    winners = dict(old.get("simt", {}))
    winners.update(simt or {})
    cache.write_json(path, dict(facts, entries=merged, simt=winners), replace=True)
    return len(merged)


def tune_simt(con) -> dict:
    """k11's search on this GPU (its own cache written too): {"float32|version": entry}."""
    from .. import env
    from ..kernels.simt import k11_autotuned as k11

    res = k11.autotune("float32", force=True, budget_s=env.number("TILEGEMM_AUTOTUNE_BUDGET_S", 60.0))
    if not res.get("winner"):
        con.print("k11: no candidate ran")
        return {}
    con.print(f"k11 (SIMT, fp32): {res['winner']} at {res['tflops']:.1f} TFLOP/s on {'×'.join(map(str, res['shape']))}")
    return {f"float32|{k11.VERSION}": dict(winner=res["winner"], tflops=res["tflops"], shape=res["shape"],
                                           when=time.strftime("%Y-%m-%dT%H:%M:%S"))}


_ORDER = ("tc_tma_persistent", "tc_persistent", "tc_splitk", "tc_warp_specialized", "tc_gemv")  # tie order


def derive(cached: dict, gpu: str) -> dict:
    """Database entries decided from a cache's rung tunings, by the rule `tuner.tune` applies to
    them: the t03/t05 verdict where one was re-timed (and still names the configurations it
    compared), else the lowest eager score at cache.SHIP_FLOOR_MS's launch floor at least, then tuned
    median (the tuner's order on a tie). No GPU needed."""
    from .. import shipped
    from . import cache

    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x

    rungs: dict = {}  # (class, bucket) -> {rung: entry}
    verdicts: dict = {}
    for key, e in cached.items():
        parts = key.split("|")
        if (len(parts) != 10 or parts[1] != gpu or parts[9] != cache.TUNER_VERSION or parts[8]
                or not isinstance(e, dict)):
            continue  # (a value that is not an object: a hand-edited file's, not a tuning)
        where = ("|".join(parts[2:7]), parts[7])
        if "+" in parts[0]:
            if (isinstance(e.get("configs"), dict) and isinstance(e.get("ms"), dict)
                    and isinstance(e.get("winner"), str) and number(e["ms"].get(e["winner"]))):
                verdicts[where] = e
        elif (number(e.get("ms")) and number(e.get("score_ms", 0)) and number(e.get("launches", 1))
              and isinstance(e.get("config"), dict)):
            rungs.setdefault(where, {})[parts[0]] = e
    out = {}
    for (cls, bucket), tuned in rungs.items():
        v = verdicts.get((cls, bucket))
        if v and v.get("winner") in tuned and all(tuned.get(r, {}).get("config") == c for r, c in v["configs"].items()):
            rung = v["winner"]
            ms = v["ms"][rung]
        else:
            rung = min(tuned, key=lambda r: (_shipped_score(tuned[r]), tuned[r]["ms"],
                                             _ORDER.index(r) if r in _ORDER else 9))
            ms = tuned[rung]["ms"]
        e = tuned[rung]
        entry = dict(rung=rung, config=e["config"], ms=ms, shape=[e.get("m"), e.get("n"), e.get("k")],
                     when=e.get("when"), derived="from the rungs' tunings in the cache")
        if shipped.is_entry(f"{cls}|{bucket}", entry):  # (a key of a hand-edited file may name no bucket)
            out[f"{cls}|{bucket}"] = entry
    return out


def _shipped_score(e: dict) -> float:
    """A rung tuning's eager score at a database's launch floor at least (`tune --db` ranks so): a
    cache tuned on a fast host scored a two-launch split-K at that host's floor."""
    from . import cache

    return max(e.get("score_ms", e["ms"]), e.get("launches", 1) * cache.SHIP_FLOOR_MS)


def device_facts() -> dict:
    import torch
    import triton

    from . import cache

    prop = torch.cuda.get_device_properties(torch.cuda.current_device())
    return dict(gpu=prop.name, capability=[prop.major, prop.minor], sms=prop.multi_processor_count,
                triton=triton.__version__, torch=torch.__version__, tuner=cache.TUNER_VERSION,
                date=time.strftime("%Y-%m-%dT%H:%M:%S"))


def run(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    con = Console(stderr=False, width=None if sys.stdout.isatty() else 160)
    if args.derive or args.from_cache:
        from ..bench import results

        said = ("--derive writes a database from a cache file's rung tunings, timing nothing" if args.derive else
                "--from-cache writes a database from your tuning cache, timing nothing")
        if results.measuring_given("tune", args, said):
            return 2
    if args.derive:
        return _derive(args, con)
    try:
        import torch

        from . import cache, timer, tuner
    except ImportError:
        print("tilegemm tune: needs torch and triton (pip install 'tilegemm[gpu]')", file=sys.stderr)
        return 2
    # the arguments first, then the GPU: a mistake in them said only "needs a CUDA GPU" on a CPU
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        print(f"tilegemm tune: unknown dtype {', '.join(bad)}; choose from {', '.join(DTYPES)}", file=sys.stderr)
        return 2
    if not dtypes and not args.from_cache:  # (--dtypes "": it tuned 0 of 0 pairs, exit 0)
        print(f"tilegemm tune: --dtypes {args.dtypes!r} names none; choose from {', '.join(DTYPES)}", file=sys.stderr)
        return 2
    layouts = [x.strip() for x in (args.layouts or "").split(",") if x.strip()]
    if any(x not in ("n", "t") for x in layouts):
        print(f"tilegemm tune: unknown layout {', '.join(x for x in layouts if x not in ('n', 't'))}; B's layouts "
              "are n (row-major) and t (column-major)", file=sys.stderr)
        return 2
    if args.budget_s is not None:
        os.environ["TILEGEMM_TUNE_BUDGET_S"] = str(args.budget_s)
    if args.max_candidates:
        os.environ["TILEGEMM_TUNE_MAX_CANDIDATES"] = str(args.max_candidates)
    if not args.from_cache:  # settings that are not understood: one line now, not each shape's failure
        tuner.budget_s(), tuner.max_candidates()
    if args.from_cache and not (args.db or args.ship):
        raise ValueError("--from-cache writes a database from your tuning cache: name it (--db PATH, or --ship for "
                         "the package's)")
    if args.db and os.path.exists(args.db):
        read_db(args.db)  # (whether it is a database; whether it is this GPU's, once the GPU is known, below)
    shapes = []
    if not args.from_cache:
        from ..bench.shapes import load_shapes

        try:
            shapes = load_shapes(args.shapes) if args.shapes else []
        except (ValueError, FileNotFoundError) as e:
            print(f"tilegemm tune: {e}", file=sys.stderr)
            return 2
        shapes += args.sizes or []
        if not shapes and [d for d in dtypes if d != "fp32"]:  # (fp32 alone: k11's tuning, once per GPU, no shapes)
            print("tilegemm tune: no shapes: give --shapes NAME|FILE or --sizes MxNxK,…", file=sys.stderr)
            return 2
    if not torch.cuda.is_available():
        print("tilegemm tune: needs a CUDA GPU (tuning times kernels on it); none is visible here", file=sys.stderr)
        return 2
    facts = device_facts()
    out_paths = [x for x in (args.db, db_path(facts["gpu"]) if args.ship else None) if x]  # (both "also")
    for path in out_paths:
        if os.path.exists(path):
            read_db(path, facts["gpu"])  # a wrong --db is said now, not after the tuning it would have held
    if out_paths and not args.from_cache:  # a database serves slower hosts than this one: rank at their floor
        timer.floor_at_least(cache.SHIP_FLOOR_MS)
    entries, log, simt = {}, [], {}
    if "fp32" in dtypes and not args.from_cache:
        simt = tune_simt(con)
        dtypes = [d for d in dtypes if d != "fp32"]
    if args.from_cache:
        from .. import shipped

        prefix = f"auto|{facts['gpu']}|"
        for key, e in cache._user().items():
            if key.startswith(prefix) and key.endswith("|" + cache.TUNER_VERSION):
                entry_key = key[len(prefix):].rsplit("|", 1)[0]
                if shipped.is_entry(entry_key, e):  # (a hand-edited cache's entry that is not a decision: it was
                    # shipped, and every process warned that the database holds entries that are not decisions)
                    entries[entry_key] = e
        con.print(f"{len(entries)} decisions for {facts['gpu']} in {cache.cache_path()}")
    else:
        layouts = layouts or [""]
        jobs = [(d, s, lay) for s in shapes for d in dtypes for lay in layouts]  # shape by shape: a run cut short
        # has tuned every dtype of the shapes it reached
        with Progress(TextColumn("{task.description:<44}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=con, disable=args.quiet) as prog:
            task = prog.add_task("tune", total=len(jobs))
            for dtype, (m, n, k), lay in jobs:
                prog.update(task, description=f"{dtype} {m}×{n}×{k}{' B ' + lay if lay else ''}")
                t0 = time.perf_counter()
                try:
                    p = problem(dtype, m, n, k, lay)
                    d = tuner.tune(p)
                except Exception as e:  # noqa: BLE001  (one shape's failure is reported, the rest go on)
                    log.append(dict(dtype=dtype, m=m, n=n, k=k, error=f"{type(e).__name__}: {e}"[:300]))
                    prog.advance(task)
                    continue
                rec = dict(dtype=dtype, m=m, n=n, k=k, layout=p.layout(), seconds=round(time.perf_counter() - t0, 2))
                if d is None:
                    rec["error"] = "no configuration ran"
                else:
                    entries[cache.db_entry_key(p)] = cache.record(p, d)
                    rec.update(rung=d.rung, ms=d.ms, config=d.config)
                    for path in out_paths:  # after every shape: a run cut short keeps what it tuned
                        write_db(path, {cache.db_entry_key(p): entries[cache.db_entry_key(p)]}, facts, simt)
                log.append(rec)
                torch.cuda.empty_cache()
                prog.advance(task)
        failed = [r for r in log if "error" in r]
        con.print(f"tuned {len(log) - len(failed)} of {len(log)} (shape, dtype) pairs into {cache.cache_path()}"
                  + (f"; {len(failed)} failed, e.g. {failed[0]}" if failed else ""))
    for path in out_paths:
        n = write_db(path, entries, facts, simt)
        con.print(f"database {path}: {len(entries)} entries written, {n} in all")
    if args.log:
        os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
        with open(args.log, "w") as f:
            json.dump(dict(facts, runs=log), f, indent=1, default=str)
    return 0


def read_tuning_cache(path: str) -> dict:
    """The JSON object of a cache file to derive from. Not cache._read: that one forgives a
    missing or unreadable file (a user's cache that the next tuning rewrites), where here a wrong
    path or a file of something else is the user's mistake, to be said in one line."""
    from ..bench.results import read_json

    data = read_json(path, "tuning cache")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON {type(data).__name__}, not a tuning cache (a JSON object of "
                         "'rung|GPU|…' entries, as `tilegemm tune` writes it)")
    return data


def read_db(path: str, gpu: str | None = None) -> dict:
    """The tuning database at path, which --derive adds to: refused in one line where it is not
    one (a results document, a tuning cache, any other JSON object that holds no 'entries', a
    list, not JSON), rather than overwritten or merged into; and where `gpu` is given, where it is
    another GPU's database (its decisions would be merged under that GPU's name)."""
    from .. import shipped
    from ..bench.results import read_json

    data = read_json(path, "tuning database")
    why = shipped.database_problem(data) or next(("an entry is not an object" for e in data.get("entries", {}).values()
                                                  if not isinstance(e, dict)), "")
    if why:
        raise ValueError(f"{path}: not a tuning database ({why}; `tilegemm tune --db` writes a JSON object of "
                         "'entries' and 'simt'); name a new file, or the database itself")
    if gpu is not None and data.get("gpu") not in (None, gpu):
        raise ValueError(f"{path}: the tuning database of {data['gpu']}, not of {gpu}; name that GPU's database "
                         "or a new file")
    return data


def _derive(args, con) -> int:
    """`--derive CACHE`: database entries from a cache file's rung tunings, offline. Every refusal
    comes before the database is touched: deriving nothing must not leave an empty database."""
    if not args.gpu or not args.db:
        raise ValueError("--derive needs the GPU it is for (--gpu 'NVIDIA H200') and the database file (--db PATH)")
    ignored = [f"--{x}" for x in ("ship", "log") if getattr(args, x)]  # (each was dropped without a word, exit 0)
    if ignored:
        raise ValueError(f"--derive writes --db alone (nothing is tuned here to ship or log); {' and '.join(ignored)} "
                         f"would do nothing: leave {'them' if len(ignored) > 1 else 'it'} out, and copy the --db file "
                         "where it should go")
    from . import cache

    cached = read_tuning_cache(args.derive)
    keys = [k.split("|") for k, e in cached.items() if len(k.split("|")) == 10 and isinstance(e, dict)]
    if not keys:
        raise ValueError(f"{args.derive}: no tuning entries (keys 'rung|GPU|…', as `tilegemm tune` writes "
                         "its cache); nothing to derive, the database is left as it was")
    entries = derive(cached, args.gpu)
    if not entries:
        versions = sorted({k[9] for k in keys if k[1] == args.gpu})
        why = (f"none of its {cache.TUNER_VERSION} tunings for it is a timed configuration (a 'config' object and "
               "an 'ms' number)" if cache.TUNER_VERSION in versions else
               f"its tunings for it are of tuner {', '.join(versions)}, this one is {cache.TUNER_VERSION}" if versions
               else f"its tunings are for {', '.join(repr(g) for g in sorted({k[1] for k in keys}))}")
        raise ValueError(f"{args.derive}: no rung tunings to derive from for --gpu {args.gpu!r} ({why}); "
                         "the database is left as it was")
    old = read_db(args.db, args.gpu) if os.path.exists(args.db) else {}
    facts = {k: v for k, v in old.items() if k not in ("entries", "simt")} or dict(gpu=args.gpu, tuner=cache.TUNER_VERSION)
    mine = old.get("entries", {})
    new = {k: v for k, v in entries.items() if k not in mine}  # what the GPU tuned itself stands
    n = write_db(args.db, new, facts, old=old)
    con.print(f"{len(entries)} decisions derived for {args.gpu}; {len(new)} added to {args.db} ({n} entries in all)")
    return 0


def add_cli(sub) -> None:
    t = sub.add_parser("tune", help="tune shapes on this GPU (your cache; --ship: the shipped database)")
    t.add_argument("--shapes", help="a named shape set (e.g. tuning, library, llm) or a JSON file of shapes")
    t.add_argument("--sizes", type=sizes, help="comma-separated N or MxNxK")
    t.add_argument("--dtypes", default="bf16,fp16,fp8,tf32", help=f"comma-separated, of {', '.join(DTYPES)}")
    t.add_argument("--layouts", default="", help="B layouts to tune, comma-separated: n (row-major), t (column-major: "
                   "x @ W.t(), as nn.Linear passes it); default: row-major, FP8 column-major")
    t.add_argument("--budget-s", type=positive_float, help="seconds of timing per rung and shape (default 30)")
    t.add_argument("--max-candidates", type=positive_int, help="time only the first N candidates of each rung (known-good first)")
    t.add_argument("--ship", action="store_true", help="also write the package's database for this GPU")
    t.add_argument("--db", help="also write the database to this file")
    t.add_argument("--from-cache", action="store_true", help="no timing: the database from your tuning cache")
    t.add_argument("--derive", metavar="CACHE", help="offline: decisions from a cache file's rung tunings (with --gpu, --db)")
    t.add_argument("--gpu", help="the GPU a --derive is for, as torch names it")
    t.add_argument("--log", help="write what was tuned (JSON)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=run, measuring={dest: t.get_default(dest) for dest in MEASURING},
                   sets_env=lambda a: {v for v, given in (("TILEGEMM_TUNE_BUDGET_S", a.budget_s),
                                                          ("TILEGEMM_TUNE_MAX_CANDIDATES", a.max_candidates))
                                       if given is not None})  # (its options, where given, set them: run)
