"""`tilegemm`: the lab's command line.

    tilegemm bench      the comparison table (CPU naive, CPU BLAS, GPU rungs, cuBLAS)
    tilegemm race       what a missing syncthreads() does; racecheck on a GPU
    tilegemm info       the device (or the simulator / CPU)
    tilegemm kernels    what is registered and what runs here
    tilegemm explain    which kernel matmul runs for a shape, dtype and layout, and why
plus the measurement tools whose modules provide `add_cli(subparsers)` (ceilings, traffic,
report, compare, sanitize, ...).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import _cuda, env
from .argtypes import nonnegative_float, nonnegative_int, positive_float, positive_int, sizes

TOOL_MODULES = ("tilegemm.bench.ceilings", "tilegemm.bench.traffic", "tilegemm.bench.report",
                "tilegemm.bench.compare", "tilegemm.bench.results", "tilegemm.bench.ladder", "tilegemm.bench.counters",
                "tilegemm.bench.library", "tilegemm.bench.model", "tilegemm.bench.distributed",
                "tilegemm.tuning.command", "tilegemm.sanitize")


def _shapes(args) -> list[tuple[int, int, int]]:
    from .bench import sweep

    if args.sizes and args.shapes is not None:
        raise ValueError("--sizes and --shapes both name the shapes to run; give one")
    if args.sizes:
        return args.sizes
    if args.shapes is not None:
        from .bench.shapes import load_shapes

        return load_shapes(args.shapes)
    return [(s, s, s) for s in (sweep.GPU_SIZES if _cuda.has_gpu() else sweep.SIM_SIZES)]


def cmd_bench(args) -> int:
    from .bench import sweep, table

    con = console(record=bool(args.table))
    settings = sweep.Settings(dtype=args.dtype, budget_s=args.budget, warmup_s=args.warmup,
                              target_rse=args.rse, flush=not args.no_flush, cublas=not args.no_cublas,
                              e2e=not args.no_e2e, cpu_naive_budget_s=args.cpu_naive_budget, seed=args.seed)
    if args.kernels is not None and not args.kernels.strip(" ,"):
        raise ValueError("--kernels is empty: course, all, simt, cpu, or kernel names (tilegemm kernels)")
    kernels = sweep.choose_kernels(args.kernels)
    why = {k.name: sweep.why_not_run(k, settings.dtype) for k in kernels}
    if all(why.values()):
        raise ValueError("nothing to run: " + "; ".join(f"{name}: {w}" for name, w in why.items()))
    shapes = _shapes(args)
    twice = [s for s in dict.fromkeys(shapes) if shapes.count(s) > 1]
    if twice:  # (the table has one row a size: a second run of one hid the first's times, both in the JSON)
        con.print(f"[yellow]Named more than once, run once: {', '.join(table.size_label(*s) for s in twice)} (to time "
                  "a kernel twice, name it twice in --kernels).[/]")
        shapes = list(dict.fromkeys(shapes))
    simulated = [k for k in kernels if k.backend == "simt" and not why[k.name]]
    if not _cuda.has_gpu() and simulated:
        big = [s for s in shapes if max(s) > _cuda.SIM_MAX_SIDE]
        con.print("[bold yellow]No CUDA GPU found: GPU kernels run under Numba's CUDA simulator "
                      "(correct results, meaningless times).[/]")
        if big and not args.force:
            if len(big) == len(shapes):
                raise ValueError(f"every size is above {_cuda.SIM_MAX_SIDE}, which the simulator takes hours over "
                                 f"({', '.join(table.size_label(*s) for s in big)}): ask for smaller sizes, "
                                 "--kernels cpu, or --force")
            con.print(f"[yellow]Sizes above {_cuda.SIM_MAX_SIDE} are impractical in the simulator; dropped: "
                          f"{', '.join(table.size_label(*s) for s in big)} (use --force to keep them).[/]")
            shapes = [s for s in shapes if max(s) <= _cuda.SIM_MAX_SIDE]
    for name, w in why.items():
        if w:
            con.print(f"[yellow]{name}: not run: {w}[/]")
    total = len(shapes) * (len(kernels) + 2)
    with Progress(TextColumn("{task.description:<40}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=con, transient=True, disable=args.quiet) as prog:
        task = prog.add_task("bench", total=total)

        def progress(msg):
            prog.update(task, description=msg, advance=1)

        from .bench.clocks import ClockWatch

        with ClockWatch() as clock_watch:
            records = sweep.Sweep(kernels, shapes, settings, progress).run()
    clocks = clock_watch.to_dict()
    if clocks.get("warning"):
        con.print(f"[yellow]clocks: {clocks['warning']}[/]")
    simulated = settings.simulated and any(r.get("simulated") for r in records)  # CPU kernels alone: real times
    where = _gpu_name() if _cuda.has_gpu() else "Numba CUDA simulator" if simulated else "the CPU"
    table.print_table(records, con, f"tilegemm bench: {settings.dtype}, {where}", simulated)
    if args.json:
        from .bench import results

        from .bench import ceilings

        cached = ceilings.load_cached(_gpu_name()) if _cuda.has_gpu() else None
        doc = results.document(records, settings.harness(), clocks, ceilings=cached)
        results.save(doc, args.json)
        con.print(f"results written to {args.json}")
    if args.table:
        from .bench.results import write_json

        write_json(args.table, con.export_text())  # (any text: whole or not at all, its folder made)
    wrong = [r for r in records if r.get("ok") is False and "broken" not in r["kernel"]]
    return 1 if wrong else 0


def console(record: bool = False) -> Console:
    """Full width when writing to a file or pipe, so tables are not squeezed to 80 columns (the lab's
    table, nine kernels and their summaries, takes about 250)."""
    return Console(record=record, width=None if sys.stdout.isatty() else 320)


def _gpu_name() -> str:
    name = _cuda.cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else name


def cmd_race(args) -> int:
    from . import race, sanitize

    if args.racecheck and not sanitize.available():  # said before the demo runs, not after
        raise RuntimeError("--racecheck needs a CUDA GPU and compute-sanitizer on the PATH; run without it")
    size = args.size or race.default_size()
    m, n, k = size, size, args.k or size
    if not _cuda.has_gpu():
        if not _cuda.SIMULATOR:
            raise RuntimeError("race needs a CUDA GPU or Numba's CUDA simulator, and TILEGEMM_SIMULATOR=0 forbids "
                               "the simulator here")
        if max(m, n, k) > _cuda.SIM_MAX_SIDE:  # (as bench's)
            raise ValueError(f"--size {size}{f' --k {args.k}' if args.k else ''} under Numba's CUDA simulator (no "
                             f"GPU here) would take hours: ask for {_cuda.SIM_MAX_SIDE} or less")
    con = console()
    kernels = (args.only,) if args.only else (race.CORRECT, race.BROKEN)
    where = _gpu_name() if _cuda.has_gpu() else "Numba CUDA simulator"
    con.print(f"[bold]Race demo[/] on {where}: {m}×{n}×{k}, tile 32, {args.trials} runs each")
    runs = race.race(m, n, k, trials=args.trials, seed=args.seed, kernels=kernels)
    t = Table(header_style="bold")
    # (\\[: a bracket, not rich markup: the header read "first wrong: C expected → got")
    for col in ("inputs", "kernel", "run", "wrong elements", "rel. error", "first wrong: C\\[i, j] expected → got"):
        t.add_column(col)
    for r in runs:
        c = r.check
        first = "; ".join(f"C[{i},{j}] {w:.6g} → {g:.6g}" for i, j, w, g in c.first_bad[:2]) or "—"
        style = "green" if c.ok else "red"
        t.add_row(r.inputs, r.kernel, str(r.trial + 1), f"[{style}]{c.n_bad} / {c.n_total}[/]",
                  f"{c.rel_err:.2e}", first)
    con.print(t)
    broken = [r for r in runs if r.kernel == race.BROKEN]
    correct = [r for r in runs if r.kernel == race.CORRECT]
    if broken:
        counts = sorted({r.check.n_bad for r in broken})
        con.print(f"{race.BROKEN}: wrong in {sum(not r.check.ok for r in broken)} of {len(broken)} runs; "
                      f"wrong-element counts seen: {counts} (a count that changes from run to run is a race).")
    if correct:
        con.print(f"{race.CORRECT}: {sum(r.check.ok for r in correct)} of {len(correct)} runs correct.")
    if _cuda.SIMULATOR and any(not math.isfinite(r.check.rel_err) or r.check.rel_err > 1e6 for r in broken):
        con.print("Under the simulator shared memory starts as whatever the host's allocator left there (a GPU's "
                  "holds the last kernel's tiles), so a read before the tile is written can be any number, even "
                  "inf or NaN: the sizes of the errors are the simulator's; that they are there is the race's.")
    const_ok = [r for r in broken if r.inputs.startswith("A=1") and r.check.ok]
    if const_ok:
        con.print("Note: with A = 1 and B = 2 every tile holds the same values, so a warp that reads another "
                  "step's tile (or a half-written one) often still gets the right numbers: constant inputs can "
                  "hide a race. Random inputs expose it; racecheck finds it without relying on the data.")
    if args.racecheck:
        for name in (race.BROKEN, race.CORRECT):
            con.print(f"[bold]compute-sanitizer --tool racecheck[/] on {name} at {args.racecheck_size}³ …")
            hazards, summary = sanitize.racecheck(name, args.racecheck_size)
            con.print(summary)
    elif sanitize.available():
        con.print("compute-sanitizer is on the PATH: `tilegemm race --racecheck` runs both kernels under "
                      "racecheck (small size; it is slow).")
    bad_correct = [r for r in correct if not r.check.ok]
    return 1 if bad_correct else 0


def cmd_info(args) -> int:
    from . import info

    con = console()
    what, details = info.describe()
    t = Table(title=f"tilegemm info: {what}", show_header=False)
    t.add_column(style="bold")
    t.add_column()
    for k, v in details.items():
        t.add_row(k, str(v))
    for k, v in info.cpu_info().items():
        t.add_row(k, v)
    con.print(t)
    return 0


def cmd_kernels(args) -> int:
    import tilegemm

    if args.source:
        print(kernel_source(args.source), end="")
        return 0
    con = console()
    t = Table(title="registered kernels", header_style="bold")
    for col in ("name", "backend", "rung", "dtypes", "runs here", "what it is"):
        t.add_column(col)
    for k in tilegemm.kernels():
        runs = ("yes" if not k["note"] else f"yes: {k['note']}") if k["runs_here"] else f"no: {k['note']}"
        name = k["name"] + (" (teaching)" if k["teaching"] else "")
        t.add_row(name, k["backend"], str(k["rung"]), ", ".join(k["dtypes"]), runs, k["summary"])
    con.print(t)
    return 0


def cmd_explain(args) -> int:
    """`tilegemm.explain` for each shape: operands of the dtype and layout asked for, made where
    matmul would find them (torch CUDA tensors on a GPU, host arrays without one), never filled."""
    import tilegemm

    dtype = args.dtype or ("bfloat16" if _cuda.has_gpu() else "float32")
    for i, (m, n, k) in enumerate(args.sizes):
        a, b = _explained_operands(m, n, k, dtype, args.layout)
        print(("\n" if i else "") + tilegemm.explain(a, b, args.kernel))
    return 0


def _explained_operands(m: int, n: int, k: int, dtype: str, layout: str):
    """Uninitialised A (M×K) and B (K×N) of `dtype`; a 't' in layout stores that operand
    transposed (A as K×M, B as N×K: nn.Linear's weight) and passes its .T."""
    shapes = ((k, m) if layout[0] == "t" else (m, k), (n, k) if layout[1] == "t" else (k, n))
    try:
        if _cuda.has_gpu() or dtype == "bfloat16":  # (NumPy has no bfloat16: a torch CPU tensor, refused as matmul would)
            import torch

            dev = "cuda" if _cuda.has_gpu() else "cpu"
            xs = [torch.empty(s, dtype=getattr(torch, dtype), device=dev) for s in shapes]
        else:
            import numpy as np

            xs = [np.empty(s, dtype=dtype) for s in shapes]
    except (MemoryError, ValueError, RuntimeError, OverflowError) as e:  # (NumPy: "Maximum allowed dimension
        # exceeded" or "Unable to allocate"; torch: an allocator's RuntimeError)
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"--sizes {m}x{n}x{k}: explain makes the {dtype} operands matmul would get (never "
                         f"filled), and they cannot be allocated here ({first}); ask for a smaller size") from None
    return tuple(x.T if t == "t" else x for x, t in zip(xs, layout))


def kernel_source(name: str) -> str:
    """A kernel's source: the generated text of a rung written by a template (its default
    configuration), else its module's file."""
    import importlib
    import inspect

    from . import registry

    k = registry.get(name)
    try:
        mod = importlib.import_module(k.module)
    except ImportError as e:
        raise RuntimeError(f"the source of {name!r} needs {e.name or e}, which is not installed here") from None
    return mod.source(mod.DEFAULT) if hasattr(mod, "source") else inspect.getsource(mod)


class Parser(argparse.ArgumentParser):
    """argparse, with a user's mistake said in one line (argparse prints the usage block first)."""

    def error(self, message):
        if message.startswith("the following arguments are required: command"):  # (`tilegemm --nope` said only
            sub = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))  # that, of an option)
            message = f"no command given: name one of {', '.join(sub.choices)} (its options follow it)"
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


# what a command raises for a user's mistake or a machine it cannot run on: one line, exit 2
# (TILEGEMM_DEBUG=1 shows the traceback)
USER_ERRORS = (ValueError, TypeError, LookupError, OSError, RuntimeError, MemoryError)  # LookupError: KeyError too
OUTPUTS = ("json", "table", "csv", "db", "out", "log")  # the options that name a file a command writes (report's --out: a folder)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="tilegemm", description="A GPU matrix-multiplication lab.")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bench", help="the comparison table: CPU, GPU rungs and cuBLAS")
    b.add_argument("--sizes", type=sizes, help="comma-separated N or MxNxK (default 128…4096; 16…64 simulated)")
    b.add_argument("--shapes", help="a named shape set or a JSON file of shapes")
    b.add_argument("--kernels", help="course (default), all, simt, cpu, or name,name,… (the tensor cores: tilegemm library)")
    b.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    b.add_argument("--budget", type=positive_float, default=1.0, help="seconds of timed runs per kernel and size")
    b.add_argument("--warmup", type=nonnegative_float, default=0.1, help="seconds of warm-up per kernel and size")
    b.add_argument("--rse", type=positive_float, default=0.01, help="stop when the median's relative standard error is below")
    b.add_argument("--cpu-naive-budget", type=nonnegative_float, default=10.0, help="skip CPU naive where predicted slower (s)")
    b.add_argument("--no-cublas", action="store_true")
    b.add_argument("--no-e2e", action="store_true", help="skip the end-to-end matmul() column")
    b.add_argument("--no-flush", action="store_true", help="do not flush L2 before each sample")
    b.add_argument("--seed", type=nonnegative_int, default=0)
    b.add_argument("--force", action="store_true", help="keep large sizes under the simulator")
    b.add_argument("--json", help="save results (JSON, with GPU, versions, date)")
    b.add_argument("--table", help="save the printed table as text")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.set_defaults(func=cmd_bench)

    r = sub.add_parser("race", help="run the kernel without syncthreads() beside the correct one")
    r.add_argument("--size", type=positive_int, help="M = N (default 256 on a GPU, 48 simulated)")
    r.add_argument("--k", type=positive_int, help="K (default: size)")
    r.add_argument("--trials", type=positive_int, default=3)
    r.add_argument("--seed", type=nonnegative_int, default=0)
    r.add_argument("--only", choices=("smem_tiled_32", "broken_nosync"), help="run one kernel")
    r.add_argument("--racecheck", action="store_true", help="also run under compute-sanitizer racecheck (GPU)")
    r.add_argument("--racecheck-size", type=positive_int, default=64)
    r.set_defaults(func=cmd_race)

    i = sub.add_parser("info", help="describe the device")
    i.set_defaults(func=cmd_info)
    kk = sub.add_parser("kernels", help="list registered kernels")
    kk.add_argument("--source", metavar="NAME", help="print a kernel's source (a generated rung: the generated text)")
    kk.set_defaults(func=cmd_kernels)
    ex = sub.add_parser("explain", help="which kernel matmul runs for a shape, and why (nothing is run)")
    ex.add_argument("--sizes", type=sizes, default=[(4096, 4096, 4096), (1, 4096, 4096)],
                    help="comma-separated N or MxNxK (default 4096 and 1x4096x4096: a square and a decode row)")
    ex.add_argument("--dtype", choices=("float32", "float64", "float16", "bfloat16"),
                    help="the operands' dtype (default bfloat16 on a GPU, float32 without one)")
    ex.add_argument("--layout", default="nn", choices=("nn", "nt", "tn", "tt"),
                    help="t: that operand stored transposed and passed as its .T (nt: B = nn.Linear's W.T)")
    ex.add_argument("--kernel", default="auto", help="auto, or a registered name (`tilegemm kernels`)")
    ex.set_defaults(func=cmd_explain)

    for mod in TOOL_MODULES:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            continue
        module.add_cli(sub)
    return p


def _named_options(parser: argparse.ArgumentParser, command: str, argv: list[str]) -> frozenset:
    """The dests of the options of `command` that its command line names, as argparse takes them
    (a whole option string, --opt=value, or an unambiguous prefix of a long option), whatever
    their values: --merge refuses a measuring option given at its default value too (ignored, it
    was taken silently)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    options = {o: a.dest for a in sub._actions for o in a.option_strings}
    named = set()
    for token in argv:
        if token == "--":
            break
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            dests = {options[name]} if name in options else {d for o, d in options.items() if o.startswith(name)}
            if len(dests) == 1:
                named |= dests
    return frozenset(named)


def main(argv=None) -> int:
    import warnings

    # Numba warns about small grids on every small launch; the lab launches small grids on purpose.
    warnings.filterwarnings("ignore", message=".*will likely result in GPU under-utilization.*")
    try:  # (a module that adds its command reads the environment: TILEGEMM_SIMULATOR=maybe)
        parser = build_parser()
    except USER_ERRORS as e:
        if env.debug():
            raise
        words = [w for w in (sys.argv[1:] if argv is None else argv) if not w.startswith("-")]
        who = f"tilegemm {words[0]}" if words else "tilegemm"  # (the command, not parsed yet: its first word)
        print(f"{who}: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:  # argparse would name the top command: name the one that was given them
        print(f"tilegemm {args.command}: unrecognized arguments: {' '.join(extra)} (see `tilegemm {args.command} "
              "--help`)", file=sys.stderr)
        return 2
    try:
        from .bench.results import check_writable

        inputs = {os.path.realpath(f) for k, v in vars(args).items()  # (files the command reads, named by options;
                  if k not in OUTPUTS  # a list: --merge PART…)
                  for f in (v if isinstance(v, list) else [v]) if isinstance(f, str) and os.path.isfile(f)}
        written: dict[str, str] = {}  # realpath -> the option that writes it (two outputs to one file: the
        # second write would replace the first, bench's --table its --json)
        for what in OUTPUTS:  # an output that cannot be written is said before the work, not after it
            if getattr(args, what, None) and not (what == "out" and args.command == "report"):
                real = os.path.realpath(getattr(args, what))
                if real in inputs:
                    raise ValueError(f"--{what} {getattr(args, what)} is also what this command reads; "
                                     "write the output elsewhere")
                if real in written and not real.startswith(("/dev/", "/proc/")):  # (a stream takes both)
                    raise ValueError(f"--{written[real]} and --{what} both name {getattr(args, what)}: the second "
                                     "would replace the first; give each its own file")
                written[real] = what
                check_writable(getattr(args, what))
        env.check(args.sets_env(args) if hasattr(args, "sets_env") else ())  # (a setting the work would read,
        # refused before the work; not one the command sets itself)
        args.named_options = _named_options(parser, args.command, sys.argv[1:] if argv is None else argv)
        return args.func(args) or 0
    except USER_ERRORS as e:
        if env.debug():
            raise
        msg = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        print(f"tilegemm {args.command}: {msg.splitlines()[0] if msg else type(e).__name__} "
              "(TILEGEMM_DEBUG=1 shows where)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tilegemm {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
