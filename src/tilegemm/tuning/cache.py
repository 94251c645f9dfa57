"""Where a configuration comes from: the user's tuning cache, and the database shipped in the package.

The user's cache (`~/.cache/tilegemm/tuning.json`, directory from TILEGEMM_CACHE_DIR) holds what
this machine tuned: `tilegemm tune`, or a call with TILEGEMM_AUTOTUNE=1. Each rung's tuning is
kept under its own key, and the decision for a problem class and shape bucket (which rung, which
configuration) under a key of its own. The shipped database (`tilegemm/data/tuning/<gpu>.json`,
one file per GPU, written by `tilegemm tune --ship`) holds decisions only.

A problem's *class* is what a configuration's legality depends on (precision, input and output
dtypes, layout, beta); its *bucket* is M, N and K each rounded up to the grid of `space.grid_up`
(powers of two to 8, then a quarter octave apart: … 2048, 2560, 3072, 3584 …), and the batch.
`tuning.choose` answers, in order: the user's cache (exact bucket), the database of this GPU (exact
bucket, then the nearest tuned bucket whose configuration fits), then the database of the known
GPU most like this one (same compute capability, nearest SM count).

Writes are atomic (a temporary file renamed over the old) and serialised between processes by a
lock file; each write merges into what is on disk, so two processes tuning at once lose nothing.
A file that is not valid JSON is ignored (with a warning) and replaced on the next write.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

from .. import env, shipped

TUNER_VERSION = "v19"  # v2: graphs for short products; v3: SWAP/REG_A; v4: FLAT; v5: settle; v6: t05 swapped TF32;
# v7: FP32 decode tiles; v8: settle interleaves single samples (the decisions' own keys, "auto|…", came
# after v8 without changing how any rung is timed); v9: ranked by eager_score (launches count); v10: no
# graph replays (L2 flushed before every sample, whatever the product's size); v11: buckets a quarter
# octave apart (space.grid_up), so a v10 key names another bucket; v12: L2 flushed by reading (clean
# lines), not zeroed: a zeroed flush's write-back was in every sample (docs/perf-notes.md, 67); v13:
# 16-bit decode tiles with 32 KB stages of B (note 86), so a v12 decision at M ≤ 16 never saw them;
# v14: the same at 16 < M ≤ 64 (note 87); v15: FP8 decode tiles with 32 and 64 KB stages of B (note
# 89); v16: a 5-stage 128×128×64 tile for 16-bit operands at 64 < M ≤ 256 (note 90); v17: FP8
# decode's 16×64×512 tile with 4 stages (note 100); v18: t06's 32-column tiles for a row-major B (note
# 111); v19: t05's OVERLAP forms among promoted FP8's candidates (note 147: a v18 decision of the class never
# saw them). The version is
# in every key, so a bump drops every cached decision, not only those at the shapes that changed

SHIP_FLOOR_MS = 0.020  # a launch's host time that a shipped database's ranking assumes at least: the slowest
# host seen on the lent H100s and H200s (torch.mm at 64³ BF16, 20.1 µs a call; 11 to 12 on a fast one). A
# database serves hosts slower than the one that tuned it, where a two-launch pick that won by a few µs on a
# fast host loses one launch's floor (H100 TF32 128×1024×8192: 0.78× cuBLAS, docs/perf-notes.md, 143).
# Here, not in timer (which imports torch): `tune --derive` ranks by it too, on a machine without either

_LOCK = threading.Lock()
_USER: dict | None = None  # the user's cache, read once per process (and after each write)
_MEMO: dict = {}  # key -> entry resolved in this process
ON_RESET: list = []  # callbacks run by reset() (the dispatcher empties its plans)


@dataclass(frozen=True)
class Decision:
    """A rung and configuration for a problem, and where it came from (for `tilegemm.explain`)."""

    rung: str
    config: dict
    source: str
    ms: float | None = None
    shape: tuple | None = None  # where it was timed: a tuning at another shape of its bucket, an entry's shape
    by_waves: bool = False  # chosen by the waves of p's own M and N (tuning.pick): not its bucket's for every shape
    tunes_later: bool = False  # explain's, under TILEGEMM_AUTOTUNE=1: the call that runs p tunes it (not kept)


def autotune_on_call() -> bool:
    """TILEGEMM_AUTOTUNE=1: tune a shape the first time it is called (off by default: a call runs
    at once, with what the cache, the database or the heuristic gives)."""
    return env.autotune() != "off"


def cache_dir() -> str:
    return env.cache_dir()


def cache_path() -> str:
    return os.path.join(cache_dir(), "tuning.json")


# ---- keys ------------------------------------------------------------------------------------------


PROMOTED = "fp8-promoted"  # the precision word of FP8 classes without fast accumulation (`Problem.promoted`)


def problem_class(p) -> str:
    """'precision|A dtype|C dtype|layout|beta'. FP8 that promotes its partial sums into FP32 is a
    class of its own (PROMOTED): its promotion holds a second register tile (two with t05's
    OVERLAP) and, but in that form, waits for the MMAs in flight; the fast class's tiles ran it up
    to 2.2x slower than its own tuning's (docs/perf-notes.md, 146-147)."""
    dt = lambda t: str(t.dtype).removeprefix("torch.")  # noqa: E731
    # a bias row (a linear layer's) is the nobeta class's: N elements read once, where a C_in is M·N
    beta = "beta" if p.has_beta and not p.bias_row else "nobeta"
    return "|".join([PROMOTED if p.promoted else p.precision, dt(p.a), dt(p.c), p.layout(), beta])


def bucket(p) -> str:
    from .space import shape_bucket

    return shape_bucket(p)


def tune_key(rung: str, p, variant: str = "") -> str:
    """A rung's own tuning of p's class and bucket on this GPU."""
    from ..kernels.tensorcore._problem import gpu_name

    return "|".join([rung, gpu_name(p.a.device), problem_class(p), bucket(p), variant, TUNER_VERSION])


def decision_key(p, gpu: str) -> str:
    return "|".join(["auto", gpu, problem_class(p), bucket(p), TUNER_VERSION])


# ---- the user's cache ------------------------------------------------------------------------------


def _read(path: str, what: str = "the tuning cache") -> dict:
    return env.read_cache(path, what)


def _user() -> dict:
    global _USER
    if _USER is None:
        _USER = _read(cache_path())
    return _USER


@contextmanager
def _file_lock(path: str):
    """An exclusive lock between processes for the file at path (where fcntl exists), on a lock
    file in the temporary directory, named after the file's real path (two processes that reach it
    through a symbolic link take one lock)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic rename still keeps the file whole
        yield
        return
    import hashlib

    name = hashlib.sha1(os.path.realpath(path).encode()).hexdigest()[:16]
    with open(os.path.join(tempfile.gettempdir(), f"tilegemm-{name}.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_json(path: str, update: dict, replace: bool = False, what: str = "the tuning cache") -> dict:
    """Merge `update` into the JSON object at path (or replace it), atomically and under the lock;
    returns what is now in the file. A write that fails leaves no temporary file behind."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with _file_lock(path):
        data = {} if replace else _read(path, what)
        data.update(update)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tuning.", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would make a shipped database unreadable to others
            os.replace(tmp, path)
        except BaseException:  # (path a folder, a full disk, an interrupt: each tuning left a .tuning.*.json)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    return data


def cached_entry(key: str) -> dict | None:
    """An entry of the user's cache: this process's copy, else the file's. An entry that is not a
    JSON object (a hand-edited file) is none, with a warning: the next tuning of it rewrites it."""
    hit = _MEMO.get(key)
    if hit is None:
        with _LOCK:
            hit = _user().get(key)
        if hit is not None and not isinstance(hit, dict):
            if key not in _WARNED:
                _WARNED.add(key)
                warnings.warn(f"tilegemm: ignoring entry {key!r} of the tuning cache {cache_path()} (a JSON "
                              f"{type(hit).__name__}, not an object); it is rewritten on the next tuning",
                              RuntimeWarning, stacklevel=2)
            return None
        if hit is not None:
            _MEMO[key] = hit
    return hit


_WARNED: set = set()  # keys of the user's cache already warned about (cached_entry)
_RETUNED: set = set()  # keys tuned again in this process under TILEGEMM_AUTOTUNE=force


def forced(key: str) -> bool:
    """TILEGEMM_AUTOTUNE=force, and key not yet tuned again in this process: its cached entry is
    not used but retuned (as k11's: a search again at the first launch in this process)."""
    return env.autotune() == "force" and key not in _RETUNED


def retuned(key: str) -> None:
    """Key has been tuned in this process: under TILEGEMM_AUTOTUNE=force its entry stands from now on."""
    _RETUNED.add(key)


def timed_shape(entry: dict) -> tuple | None:
    """An entry's (M, N, K) where it was timed, or None where its "shape" is not three positive
    whole numbers (none recorded, or a hand-edited file)."""
    shape = entry.get("shape")
    if not isinstance(shape, (list, tuple)) or len(shape) < 3:
        return None
    mnk = tuple(shape[:3])
    return mnk if all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in mnk) else None


def store_entry(key: str, entry: dict) -> None:
    global _USER
    with _LOCK:
        try:
            _USER = write_json(cache_path(), {key: entry})
        except OSError:  # a read-only home: keep it for this process, tune again next time
            _user()[key] = entry
    _MEMO[key] = entry


def reset() -> None:
    """Forget the in-memory copies (the next lookup rereads the files) and every plan built on them."""
    global _USER
    _USER = None
    shipped.forget()
    _MEMO.clear()
    _WARNED.clear()
    _RETUNED.clear()
    for fn in ON_RESET:
        fn()


# ---- the shipped database --------------------------------------------------------------------------

databases, database_for, slug, holds = shipped.databases, shipped.database_for, shipped.slug, shipped.holds


def _dims(b: str) -> tuple[float, ...]:
    """log2 of a bucket's M, N, K (and batch)."""
    body, _, batch = b.partition("b")
    dims = [math.log2(int(x)) for x in body.split("x")]
    return (*dims, math.log2(int(batch)) if batch else 0.0)


def distance(b1: str, b2: str) -> float:
    """How far two buckets are apart: log2 steps, M weighted twice (it sets the regime: decode,
    split-K, one wave, many), and a crossing of M = 128 (decode against the rest) costs 8 more."""
    (m1, n1, k1, z1), (m2, n2, k2, z2) = _dims(b1), _dims(b2)
    regime = 8.0 if (m1 <= 7) != (m2 <= 7) else 0.0
    return 2 * abs(m1 - m2) + abs(n1 - n2) + abs(k1 - k2) + 2 * abs(z1 - z2) + regime


LAYOUT_STEP = 2.0  # another layout's entry counts as one step of M farther (a doubling of M): the
# MMA form is refitted, and the layout's own tuning of a nearby bucket should win; its decode
# buckets must not stand in for prefill (docs/perf-notes.md, 42)


FAST_STEP = 1000.0  # a promoted FP8 problem takes the fast class's entry only where none of its own class
# fits (a database tuned before promoted entries, or none near): farther than any two buckets are apart
# (`distance` of 64-bit sides and batch is at most 2·64 + 64 + 64 + 2·64 + 8 = 392)


WAVE_WINDOW = 2.0  # pick weighs every entry this far (`distance`) beyond the nearest that fits ...
WAVE_GAIN = 0.8  # ... and takes one whose waves cost at most this fraction of the nearest's (space.wave_cost)
WAVE_MIN_SIDE = 256  # ... where M and N both exceed this. A guard from one miss: BF16 138×8192×28672, which
# streams B at M FLOPs a byte (the H200's HBM ridge is 206), fell 0.48 -> 0.42 on a tile of fuller waves;
# set at the bucket grid's power of two above the ridge (docs/perf-notes.md, 115)


def weighs_waves(p) -> bool:
    """Does pick weigh the waves of p's nearest entries (M and N both over WAVE_MIN_SIDE)?"""
    return min(p.m, p.n) > WAVE_MIN_SIDE


def nearest(entries: dict, cls: str, b: str) -> list[tuple[str, dict]]:
    """The database's entries of class cls, nearest bucket first (exact first of all)."""
    mine = [(key.rsplit("|", 1)[1], e) for key, e in entries.items() if key.rsplit("|", 1)[0] == cls]
    return sorted(mine, key=lambda t: (distance(t[0], b), t[0]))


_SIBLINGS = {"fp16|float16|float16": "bf16|bfloat16|bfloat16", "bf16|bfloat16|bfloat16": "fp16|float16|float16"}


def sibling_class(cls: str) -> str | None:
    """The class whose configurations stand in for cls where cls has none: FP16 and BF16 (inputs
    and output of the same width, the same tensor-core rate); None for the others."""
    parts = cls.split("|")
    other = _SIBLINGS.get("|".join(parts[:3]))
    return "|".join([other, *parts[3:]]) if other else None


def fast_class(cls: str) -> str | None:
    """The FP8 class with fast accumulation, for a promoted one (whose configurations run, if slower,
    where it has none of its own); None for the others."""
    parts = cls.split("|")
    return "|".join(["fp8", *parts[1:]]) if parts[0] == PROMOTED else None


def other_layouts(cls: str) -> list[str]:
    """cls in the other layouts of A and B (the MMA form a configuration takes is refitted by
    space.adapt), row-major B first."""
    parts = cls.split("|")
    return ["|".join([*parts[:3], lay, *parts[4:]]) for lay in ("nn", "nt", "tn", "tt") if lay != parts[3]]


def db_entry_key(p) -> str:
    return f"{problem_class(p)}|{bucket(p)}"


def record(p, decision: Decision, **extra) -> dict:
    """A decision as a database entry."""
    return dict(rung=decision.rung, config=decision.config, ms=decision.ms,
                shape=list(decision.shape or (p.m, p.n, p.k)), when=time.strftime("%Y-%m-%dT%H:%M:%S"), **extra)
