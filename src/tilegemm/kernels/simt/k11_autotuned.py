"""k11 autotuned: k10's kernel with its tile parameters chosen by measurement, once per GPU.

Changes against k10: nothing in the kernel; the configuration (BM, BN, BK, WM, WN, a launch
bound on registers, and how many copies of the p-loop body each trip runs) is no longer fixed.
`autotune()` compiles every candidate in CANDIDATES, rejects any that fails to compile or to
produce the right product on an awkward shape, times the rest on a 4096³ product, and stores
the fastest in a JSON file in the user's cache directory (`~/.cache/tilegemm/autotune.json`, or
$TILEGEMM_CACHE_DIR), keyed by GPU name, dtype and the version of the candidate list. Launches
take, in order: that cached winner; the winner shipped in the package for this GPU (or for the
known GPU with the same compute capability and the nearest SM count: `tilegemm.shipped`, written
by `tilegemm tune --dtypes fp32 --ship`); k10's defaults. No launch waits for a search unless asked:

    TILEGEMM_AUTOTUNE unset or 0   cached, else shipped, else k10's defaults; never search
    TILEGEMM_AUTOTUNE=1            as unset, but search once, at the first launch on a GPU with no
                                   cached winner (bounded by TILEGEMM_AUTOTUNE_BUDGET_S, 60 s)
    TILEGEMM_AUTOTUNE=force        search again at the first launch in this process

Under the simulator no search runs (its timings mean nothing) unless `autotune()` is called.

Attacks: whatever the fixed choice left on the table on this GPU: register pressure against
occupancy (the launch bound), tile shape against wave quantization and per-block overheads,
BK against barriers per FMA, loop overhead in the inner loop (Numba leaves the loop over p rolled;
`unroll=2` halves its control instructions per FFMA). Traffic and intensity are k10's with the chosen tile:
    reads  = M·K·ceil(N/BN) + K·N·ceil(M/BM) elements,  writes = M·N elements
    intensity ≈ 2/(s·(1/BM + 1/BN)) FLOP/byte
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import asdict

import numpy as np

from ... import _cuda, env
from ...registry import ceil_div
from . import k07_smem_transposed as k07
from . import k10_warptile as k10
from .k10_warptile import Config

VERSION = "k11-v1"  # bump when CANDIDATES or the kernel change: old winners are then ignored
CANDIDATES = [
    Config(128, 128, 8, 64, 32),  # k10's default (2 blocks per SM)
    Config(128, 128, 8, 64, 32, unroll=2),
    Config(128, 128, 8, 64, 32, min_blocks=0),
    Config(128, 128, 16, 64, 32),
    Config(128, 128, 16, 64, 32, unroll=2),
    Config(128, 128, 16, 64, 32, min_blocks=0),
    Config(128, 128, 8, 32, 64),
    Config(128, 64, 8, 64, 32, min_blocks=0),
    Config(64, 128, 8, 32, 64, min_blocks=0),
    Config(128, 64, 16, 64, 32, min_blocks=0),
    Config(64, 64, 8, 32, 32, min_blocks=0),
    Config(64, 64, 16, 32, 32, min_blocks=0),
]
# Left out after reading their SASS offline: 128×256 and 256×128 tiles (16×8 per thread) keep
# their accumulators partly in local memory (LDL/STL in the inner loop).
TUNE_SHAPE = (4096, 4096, 4096)
CHECK_SHAPE = (257, 260, 36)  # edges on both sides, a K tail, 16-byte path legal (K, N % 4 == 0)

_chosen: dict[str, Config] = {}  # per dtype, for this process


def cache_path() -> str:
    return os.path.join(env.cache_dir(), "autotune.json")


def gpu_name() -> str:
    if not _cuda.has_gpu():
        return "simulator"
    name = _cuda.cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def cache_key(dtype) -> str:
    return f"{gpu_name()}|{np.dtype(dtype).name}|{VERSION}"


def _read_cache() -> dict:
    return env.read_cache(cache_path(), "k11's tuning cache")


def _write_cache(key: str, entry: dict) -> None:
    """Keep a search's winner in the cache file, merged into what is there under the tuning cache's
    lock (two processes searching at once lose nothing: each wrote back what it had read before the
    other's write); a folder that cannot take it (TILEGEMM_CACHE_DIR somewhere unwritable) is a
    warning, and the winner is still used by the call that searched."""
    from ...tuning.cache import write_json

    path = cache_path()
    try:
        write_json(path, {key: entry}, what="k11's tuning cache")
    except OSError as e:
        warnings.warn(f"tilegemm: the autotune cache {path} cannot be written ({e.strerror or e}); the search's "
                      "winner is not kept for the next process (TILEGEMM_CACHE_DIR names the folder)")


def cached_config(dtype="float32") -> Config | None:
    return _winner(_read_cache().get(cache_key(dtype)))


def _winner(entry) -> Config | None:
    """The Config an entry records as its winner, or None (no entry; an entry that is not one is
    ignored with a warning, and the shape searched again)."""
    if entry is None:
        return None
    try:
        cfg = Config(**entry["winner"])
        cfg.check()
        return cfg
    except (KeyError, TypeError, ValueError, ArithmeticError) as e:
        warnings.warn(f"tilegemm: the autotune cache {cache_path()} holds an entry that is not a k11 configuration "
                      f"({type(e).__name__}: {e}); ignored")
        return None


def _time_ms(run, reps: int) -> float:
    """Median of `reps` runs: CUDA events on a GPU, host clock under the simulator."""
    cuda = _cuda.cuda
    run()
    cuda.synchronize()
    out = []
    for _ in range(reps):
        if _cuda.has_gpu():
            e0, e1 = cuda.event(timing=True), cuda.event(timing=True)
            e0.record()
            run()
            e1.record()
            e1.synchronize()
            out.append(cuda.event_elapsed_time(e0, e1))
        else:
            t0 = time.perf_counter()
            run()
            cuda.synchronize()
            out.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(out))


def autotune(dtype="float32", *, budget_s: float = 60.0, force: bool = False, candidates=None,
             shape=None, check_shape=None, reps: int = 5, save: bool = True) -> dict:
    """Search `candidates` (default CANDIDATES) on `shape` (default TUNE_SHAPE); cache the winner.
    Each candidate is first checked on `check_shape` (default CHECK_SHAPE).

    Returns {key, winner, tflops, results: [{config, ok, ms, tflops | error}], shape}.
    Candidates left when the budget runs out are recorded as skipped.
    """
    from ...validate import check, random_operands

    key = cache_key(dtype)
    if not force and candidates is None and shape is None:
        cfg = cached_config(dtype)
        if cfg is not None:
            _chosen[np.dtype(dtype).name] = cfg
            return {"key": key, "winner": asdict(cfg), "cached": True}
    cuda = _cuda.cuda
    candidates = list(candidates or CANDIDATES)
    m, n, k = shape or TUNE_SHAPE
    cm, cn, ck = check_shape or CHECK_SHAPE
    ca, cb = random_operands(cm, cn, ck, dtype=dtype, seed=11)
    dca, dcb = cuda.to_device(ca), cuda.to_device(cb)
    dcc = cuda.device_array((cm, cn), dtype=dtype)
    rng = np.random.default_rng(5)
    da = cuda.to_device(rng.uniform(-1, 1, (m, k)).astype(dtype))
    db = cuda.to_device(rng.uniform(-1, 1, (k, n)).astype(dtype))
    dc = cuda.device_array((m, n), dtype=dtype)
    t0 = time.perf_counter()
    results = []
    for cfg in candidates:
        rec = {"config": asdict(cfg)}
        if time.perf_counter() - t0 > budget_s:
            rec.update(ok=False, error="skipped: budget spent")
            results.append(rec)
            continue
        try:
            cfg.check()
            dcc.copy_to_device(np.full(dcc.shape, np.nan, dtype=dtype))
            k10.launch_config(cfg, dca, dcb, dcc)
            r = check(dcc.copy_to_host(), ca, cb, kernel=f"k11 {cfg}")
            if not r.ok:
                raise RuntimeError(str(r))
            ms = _time_ms(lambda: k10.launch_config(cfg, da, db, dc), reps)
            rec.update(ok=True, ms=ms, tflops=2.0 * m * n * k / ms / 1e9)
        except Exception as e:  # a config that cannot compile or is wrong is simply not chosen
            rec.update(ok=False, error=f"{type(e).__name__}: {str(e)[:300]}")
        results.append(rec)
    good = [r for r in results if r.get("ok")]
    if not good:
        return {"key": key, "winner": None, "results": results, "shape": [m, n, k]}
    best = min(good, key=lambda r: r["ms"])
    winner = Config(**best["config"])
    _chosen[np.dtype(dtype).name] = winner
    entry = {"winner": asdict(winner), "tflops": best["tflops"], "shape": [m, n, k], "results": results,
             "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "search_s": time.perf_counter() - t0}
    if save:
        _write_cache(key, entry)
    return {"key": key, **entry}


def shipped_config(dtype="float32") -> Config | None:
    """The winner shipped in the package for this GPU (or the known GPU most like it), or None."""
    if not _cuda.has_gpu():
        return None
    from ... import shipped

    dev = _cuda.cuda.get_current_device()
    db, _ = shipped.database_for(gpu_name(), tuple(dev.compute_capability), int(dev.MULTIPROCESSOR_COUNT))
    return _winner(((db or {}).get("simt") or {}).get(f"{np.dtype(dtype).name}|{VERSION}"))


def choice(dtype="float32") -> tuple[Config | None, str]:
    """The configuration the next launch takes and where it comes from, per TILEGEMM_AUTOTUNE
    (read as a launch reads it: a value it refuses is refused here), nothing searched or pinned;
    None where that launch searches first (`tilegemm.explain`)."""
    name = np.dtype(dtype).name
    if name in _chosen:
        return _chosen[name], "chosen earlier in this process"
    mode = env.autotune()
    cfg = None if mode == "force" else cached_config(name)
    if cfg is not None:
        return cfg, f"the tuning cache {cache_path()}"
    if mode != "off" and _cuda.has_gpu():
        budget = env.number("TILEGEMM_AUTOTUNE_BUDGET_S", 60.0)
        return None, f"a search at the first launch (TILEGEMM_AUTOTUNE={mode}, {budget:g} s at most)"
    cfg = shipped_config(name)
    if cfg is not None:
        return cfg, "the winner shipped for this GPU"
    return k10.DEFAULT, "k10's default (no cached or shipped winner)"


def current_config(dtype="float32", *, tune: bool = True) -> Config:
    """The configuration launches use, per TILEGEMM_AUTOTUNE (see the module docstring). tune=False
    (resource tables, traffic): the same without a search, pinned only where no launch would search."""
    name = np.dtype(dtype).name
    if name in _chosen:
        return _chosen[name]
    cfg, _ = choice(name)
    if cfg is None:  # a search is due
        if not tune:  # asked without permission to search: don't pin (the first launch searches)
            return shipped_config(name) or k10.DEFAULT
        res = autotune(name, budget_s=env.number("TILEGEMM_AUTOTUNE_BUDGET_S", 60.0), force=True)
        cfg = (Config(**res["winner"]) if res.get("winner") else None) or shipped_config(name) or k10.DEFAULT
    elif cfg is k10.DEFAULT and not tune:  # (a winner cached later, by another process, is still taken)
        return cfg
    _chosen[name] = cfg
    return cfg


def describe(m: int, n: int, k: int, itemsize: int, vector: bool) -> str:
    """What k11 runs for this product (`tilegemm.explain`): its configuration and where that comes from."""
    cfg, source = choice("float32")
    if cfg is None:
        return f"k11's configuration: {source}"
    if not vector:  # (launch_config's: the configuration is chosen, then k07 runs)
        return "k07's scalar kernel: rows not 16-byte vectors (k11's configuration is unused)"
    return f"k11's configuration {cfg}: {source}"


def launch(a, b, c, stream=None):
    k10.launch_config(current_config(c.dtype), a, b, c, stream)


def traffic(m, n, k, s):
    cfg = current_config("float32", tune=False)
    return (m * k * ceil_div(n, cfg.BN) + k * n * ceil_div(m, cfg.BM) + m * n) * float(s)


def threads_for(kernel) -> int:
    return current_config("float32", tune=False).threads


def jit_kernels(dt) -> list:
    """The Numba dispatchers this rung compiles for dtype dt (the SASS and resource tables read them)."""
    return [k10.kernel_for(dt, current_config(dt, tune=False)), k07.kernel_for(dt)]
