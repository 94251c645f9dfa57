"""Count what a kernel really reads and writes, under Numba's CUDA simulator, and hold the cost
model to it.

The simulator runs a @cuda.jit kernel as plain Python, one OS thread per CUDA thread, passing
through any argument that is neither a NumPy array nor a device array. So we hand the kernel
*counting proxies* for A, B and C: every `A[i, p]` is one global load, every `C[i, j] = x` one
global store. Shared memory is counted the same way: inside `counting()` the simulator's
`cuda.shared.array` factory (FakeCUDAShared.array) returns counting wrappers around the NumPy
arrays it would have returned. Registers and local arrays (`cuda.local.array`) are not memory
traffic and are not counted. The counts are of element accesses a thread makes, the "by design"
traffic of the cost model: caches, coalescing and sector granularity are a hardware matter.

    c = count(registry.get("smem_tiled_16"), 33, 17, 5)
    c.global_bytes == kernel.traffic(33, 17, 5, 4)      # the registry's cost model, exactly

Needs the simulator: on a GPU machine, `tilegemm traffic` re-runs itself with TILEGEMM_SIMULATOR=1.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import _cuda, registry, validate


class Counter:
    """Element counts: loads and stores per named array, and per memory space.

    Each simulator thread adds to its own entries, keyed by its thread id, and the totals are
    summed when read; so an access takes no lock. A lock taken at every access made a convoy of
    the simulator's 1024 threads a block: the thread holding it lost the GIL, the others woke one
    by one to find it taken, and a count that takes 2 s took from 30 s to minutes, by process."""

    def __init__(self):
        self._loads: dict[tuple[int, str], int] = {}
        self._stores: dict[tuple[int, str], int] = {}

    @staticmethod
    def _add(table: dict, name: str, n: int) -> None:
        key = (threading.get_ident(), name)  # only this thread writes this key while it lives
        table[key] = table.get(key, 0) + n

    def load(self, name: str, n: int) -> None:
        self._add(self._loads, name, n)

    def store(self, name: str, n: int) -> None:
        self._add(self._stores, name, n)

    @staticmethod
    def _per_name(table: dict) -> dict[str, int]:
        out: dict[str, int] = {}
        for (_, name), n in list(table.items()):
            out[name] = out.get(name, 0) + n
        return out

    @property
    def loads(self) -> dict[str, int]:
        return self._per_name(self._loads)

    @property
    def stores(self) -> dict[str, int]:
        return self._per_name(self._stores)

    @staticmethod
    def total(table: dict, space: str) -> int:
        return sum(v for k, v in table.items() if k.startswith(space + ":"))


class CountingArray:
    """Wraps a NumPy array; counts elements read by `x[idx]` and written by `x[idx] = v`.
    `shape`, `dtype`, `ndim`, `size` pass through; anything else is refused so that an access
    the counter does not see cannot happen silently."""

    __slots__ = ("_ary", "_name", "_counter", "shape", "dtype", "ndim", "size", "data_address")

    def __init__(self, ary: np.ndarray, name: str, counter: Counter):
        self._ary = ary
        self._name = name
        self._counter = counter
        self.shape = ary.shape
        self.dtype = ary.dtype
        self.ndim = ary.ndim
        self.size = ary.size
        self.data_address = ary.ctypes.data  # for the kernels' alignment checks (no array interface)

    def __getitem__(self, idx):
        v = self._ary[idx]
        self._counter.load(self._name, int(np.size(v)))
        return v

    def __setitem__(self, idx, val):
        self._ary[idx] = val
        self._counter.store(self._name, int(np.size(self._ary[idx])))

    def __len__(self):
        return len(self._ary)

    def __repr__(self):
        return f"CountingArray({self._name}, shape={self.shape}, dtype={self.dtype})"


@contextlib.contextmanager
def counting_shared(counter: Counter):
    """Within the block, the simulator's cuda.shared.array returns CountingArray wrappers.

    Static arrays are found as the simulator finds them, by the kernel's (file, line), so all
    threads of a block get the same one (`_cuda.shared_array_method`, race-free); dynamic shared
    memory is the simulator's one buffer, wrapped."""
    if not _cuda.SIMULATOR:
        raise RuntimeError("counting shared memory needs Numba's CUDA simulator (TILEGEMM_SIMULATOR=1)")
    _cuda.cuda  # noqa: B018  (numba.cuda bound, the simulator's method made race-free)
    from numba.cuda.simulator import kernelapi

    cls = kernelapi.FakeCUDAShared
    original = cls.array

    def dynamic(self, shape, dtype, alignment=None):
        return CountingArray(original(self, shape, dtype, alignment), "shared:dynamic", counter)

    array = _cuda.shared_array_method(
        dynamic, lambda new, frame: CountingArray(new, f"shared:{frame.f_code.co_name}:{frame.f_lineno}", counter))
    cls.array = array
    try:
        yield counter
    finally:
        cls.array = original


@contextlib.contextmanager
def counting_atomics():
    """Within the block, an atomic on a CountingArray (`cuda.atomic.add(C, idx, v)`: split-K's
    partial sums) counts one load and one store per element, the read-modify-write the cost model
    charges. The simulator spells an atomic `old = ary[idx]; ary[idx] += v`, which the wrapper
    alone would count as two loads and a store (M·N·splits loads too many)."""
    from numba.cuda.simulator import kernelapi

    cls = kernelapi.FakeCUDAAtomic
    names = [n for n, v in vars(cls).items() if callable(v) and not n.startswith("__")]
    originals = {n: vars(cls)[n] for n in names}

    def counted(method):
        def atomic(self, array, *args):
            if not isinstance(array, CountingArray):
                return method(self, array, *args)
            old = method(self, array._ary, *args)  # the simulator's atomic on the plain array
            size = int(np.size(old))
            array._counter.load(array._name, size)
            array._counter.store(array._name, size)
            return old
        return atomic

    for n in names:
        setattr(cls, n, counted(originals[n]))
    try:
        yield
    finally:
        for n in names:
            setattr(cls, n, originals[n])


@dataclass
class TrafficCount:
    kernel: str
    m: int
    n: int
    k: int
    dtype: str
    global_loads: int  # elements
    global_stores: int
    shared_loads: int
    shared_stores: int
    model_bytes: float  # kernel.traffic(m, n, k, itemsize): the registry's design traffic
    compulsory_bytes: float
    itemsize: int
    result_ok: bool
    per_array: dict = field(default_factory=dict)

    @property
    def global_bytes(self) -> int:
        return (self.global_loads + self.global_stores) * self.itemsize

    @property
    def matches(self) -> bool:
        return self.global_bytes == self.model_bytes

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(global_bytes=self.global_bytes, matches=self.matches)
        return d


def count(kernel: registry.Kernel, m: int, n: int, k: int, dtype: str = "float32", seed: int = 0) -> TrafficCount:
    """Run `kernel` once under the simulator on counting proxies; return what it accessed."""
    if kernel.backend != "simt":
        raise ValueError(f"{kernel.name}: only Numba CUDA (simt) kernels can be counted; it is {kernel.backend}")
    if not _cuda.SIMULATOR:
        raise RuntimeError("traffic counting needs Numba's CUDA simulator: run with TILEGEMM_SIMULATOR=1")
    a, b = validate.integer_operands(m, n, k, dtype, seed=seed)
    c = np.full((m, n), np.nan, dtype=dtype)
    counter = Counter()
    A, B, C = (CountingArray(x, f"global:{nm}", counter) for x, nm in ((a, "A"), (b, "B"), (c, "C")))
    import warnings

    with counting_shared(counter), counting_atomics(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the broken kernel may read garbage
        kernel.launch(A, B, C, None)
    s = np.dtype(dtype).itemsize
    # small integers: every partial sum exact in an FP32 accumulator, in any order; the one rounding is
    # the result's own store (FP16's integers are exact only up to 2048)
    ok = bool(np.array_equal(c, (a.astype(np.float64) @ b.astype(np.float64)).astype(dtype)))
    loads, stores = counter.loads, counter.stores
    per = {name: dict(loads=loads.get(name, 0), stores=stores.get(name, 0))
           for name in sorted(set(loads) | set(stores))}
    return TrafficCount(kernel.name, m, n, k, dtype,
                        counter.total(loads, "global"), counter.total(stores, "global"),
                        counter.total(loads, "shared"), counter.total(stores, "shared"),
                        float(kernel.traffic(m, n, k, s)), registry.bytes_compulsory(m, n, k, s), s, ok, per)


# ---- CLI ----------------------------------------------------------------------------------------

DEFAULT_SHAPES = "20x24x40,33x17x5"
LESSON_SIDE = 128  # the block tile of k06 and later: the side from which the ladder's traffic lesson shows
MAX_MNK = 4 * LESSON_SIDE * LESSON_SIDE * 32  # the largest product counted without --force: four times the
# lesson's 128×128×32, which takes minutes (the simulator runs an OS thread per CUDA thread)
DTYPES = ("float16", "float32", "float64")  # every dtype a SIMT kernel takes (test_traffic holds it to the registry)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "traffic", help="count each SIMT kernel's global/shared loads and stores (simulator) against its cost model")
    p.add_argument("--kernels", default="simt", help="'simt' (default) or a comma-separated list of kernel names")
    p.add_argument("--shapes", default=DEFAULT_SHAPES,
                   help=f"shape set name, JSON file or list (default {DEFAULT_SHAPES}; keep them tiny)")
    p.add_argument("--dtype", default="float32", choices=DTYPES,
                   help="the element type (default float32); a kernel that does not take it is skipped")
    p.add_argument("--json", metavar="PATH", help="also write the counts as JSON")
    p.add_argument("--force", action="store_true", help=f"count products above {MAX_MNK:,} multiply-adds too "
                   "(hours in the simulator)")
    p.set_defaults(func=cli_traffic)


def countable(names: str, dtype: str) -> list[registry.Kernel]:
    """The kernels `--kernels names` asks for that take `dtype`; a kernel the count cannot run
    (not Numba CUDA) is refused by name, and nothing left to count is refused too, rather than
    printing an empty table that exits 0."""
    kernels = registry.select(backend="simt") if names == "simt" else \
        [registry.get(x.strip()) for x in names.split(",") if x.strip()]
    if not kernels:
        raise ValueError("no kernel given: --kernels takes 'simt' or a comma-separated list of SIMT kernel names")
    other = [k for k in kernels if k.backend != "simt"]
    if other:
        raise ValueError(f"{', '.join(f'{k.name} ({k.backend})' for k in other)}: traffic counts only SIMT (Numba "
                         "CUDA) kernels; give 'simt' or names of `tilegemm kernels` whose backend is simt")
    takes = [k for k in kernels if dtype in k.dtypes]
    if not takes:
        have = ", ".join(sorted({d for k in kernels for d in k.dtypes}))
        raise ValueError(f"nothing to count: {kernels[0].name} takes {have}, not {dtype}" if len(kernels) == 1 else
                         f"nothing to count: none of {', '.join(k.name for k in kernels)} takes {dtype} "
                         f"(they take {have})")
    return kernels


def cli_traffic(args) -> int:
    import json
    import os
    import subprocess

    kernels = countable(args.kernels, args.dtype)  # refused here, before a re-run under the simulator
    if not _cuda.SIMULATOR and _cuda._forced_set():  # (TILEGEMM_SIMULATOR=0: it re-ran itself with 1, unsaid)
        raise RuntimeError("traffic counts loads in Numba's CUDA simulator, and TILEGEMM_SIMULATOR=0 forbids the "
                           "simulator; unset it (traffic runs the simulator in a process of its own on a GPU machine)")
    if not _cuda.SIMULATOR:  # counting needs the simulator; numba.cuda is already bound to the GPU here
        env = dict(os.environ, TILEGEMM_SIMULATOR="1")
        cmd = [sys.executable, "-m", "tilegemm.cli", "traffic", "--kernels", args.kernels, "--shapes", args.shapes,
               "--dtype", args.dtype] + (["--json", args.json] if args.json else []) + (["--force"] if args.force else [])
        return subprocess.call(cmd, env=env)

    from rich.console import Console
    from rich.table import Table

    from .shapes import load_shapes

    shapes = load_shapes(args.shapes)
    big = [f"{m}×{n}×{k}" for m, n, k in shapes if m * n * k > MAX_MNK]
    if big and not args.force:
        raise ValueError(f"{', '.join(big[:3])}{' …' if len(big) > 3 else ''}: above {MAX_MNK:,} multiply-adds, which "
                         f"the simulator counts for hours (the lesson shows at {LESSON_SIDE}×{LESSON_SIDE}×32); ask for "
                         "smaller shapes, or --force")
    t = Table(title="Element accesses counted under the simulator vs the cost model (kernel.traffic)",
              header_style="bold")
    for col in ("kernel", "M×N×K", "global loads", "global stores", "bytes counted", "bytes by model", "model",
                "shared loads", "shared stores", "shared loads / MNK", "result"):
        t.add_column(col, justify="left" if col in ("kernel", "model", "result") else "right",
                     no_wrap=col in ("kernel", "M×N×K"))
    out, bad, wrong = [], 0, 0
    console = Console()
    if not console.is_terminal:  # logs and CI: do not squeeze the table into 80 columns
        console.width = max(console.width, 150)
    for kern in kernels:
        if args.dtype not in kern.dtypes:  # by rule: a kernel counts only the dtypes it takes
            console.print(f"{kern.name}: skipped, it takes {', '.join(kern.dtypes)}, not {args.dtype}")
            continue
        for m, n, k in shapes:
            c = count(kern, m, n, k, args.dtype)
            out.append(c.to_dict())
            bad += not c.matches
            wrong += not c.result_ok and "broken" not in kern.tags
            t.add_row(kern.name, f"{m}×{n}×{k}", str(c.global_loads), str(c.global_stores), str(c.global_bytes),
                      f"{c.model_bytes:.0f}", "[green]exact[/]" if c.matches else "[red]OFF[/]", str(c.shared_loads), str(c.shared_stores),
                      f"{c.shared_loads / (m * n * k):.2f}",
                      "right" if c.result_ok else "[yellow]wrong (expected for broken kernels)[/]"
                      if "broken" in kern.tags else "[red]wrong[/]")
    console.print(t)
    if args.json:
        from .results import write_json

        write_json(args.json, json.dumps(out, indent=1))
    if bad:
        console.print(f"[red]{bad} kernel × shape counts differ from the cost model[/]")
    if wrong:
        console.print(f"[red]{wrong} kernel × shape results are wrong (a kernel that should be right)[/]")
    if shapes and all(max(m, n) < LESSON_SIDE for m, n, _ in shapes):
        console.print(f"Every product here is narrower than the later rungs' {LESSON_SIDE}-wide tiles, so their counts "
                      f"look alike: these shapes check the cost model at awkward sizes. The ladder cutting traffic "
                      f"rung by rung shows from {LESSON_SIDE}×{LESSON_SIDE}×32 up (--shapes 128x128x32; minutes in "
                      "the simulator).")
    return 1 if bad or wrong else 0
