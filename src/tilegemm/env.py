"""What tilegemm reads from its environment: its variables, each parsed here (a value that is not
understood is a ConfigError naming the variable and what it takes, never silently taken as its
default), and its cache files (a corrupt one is ignored with a warning, then rewritten).

    TILEGEMM_SIMULATOR            1: Numba's CUDA simulator even with a GPU; 0: never (default: when no GPU)
    TILEGEMM_AUTOTUNE             1/on: tune a shape on its first call; force: retune; 0/off (default)
    TILEGEMM_AUTOTUNE_BUDGET_S    seconds for k11's search with TILEGEMM_AUTOTUNE (default 60)
    TILEGEMM_TUNE_BUDGET_S        seconds per rung and shape for `tilegemm tune` (default 30)
    TILEGEMM_TUNE_MAX_CANDIDATES  time only the first N candidates of a rung (default, or 0: all)
    TILEGEMM_FAST_LAUNCH          0: no launch plans (every call takes the slow path); 1 (default). Read where
                                  a plan would be built: a plan built before it was set serves until
                                  dispatch.reset()
    TILEGEMM_CACHE_DIR            the tuning cache's folder (default ~/.cache/tilegemm)
    TILEGEMM_DEBUG                1 (or on, true, yes): a CLI error shows its traceback (read by the
                                  CLI, which must report errors, so never itself an error)

Read where they are used, with the same rule:
    TILEGEMM_DIST_TRANSPORT       the distributed products' transport (1-D and SUMMA): auto (default), peer or nccl
    TILEGEMM_DIST_GRAPHS          0: the peer transport's products queued call by call, not graphed; 1 (default)
    TILEGEMM_DIST_BARRIER_S       seconds before the peer transport's device barrier traps (default 600)
    TILEGEMM_PTXAS, TILEGEMM_NVDISASM   the CUDA tools `tilegemm resources` runs (else found in the CUDA
                                  wheels, CUDA_HOME, the PATH or Triton's wheel)
and by the tests alone: TILEGEMM_TEST_SHARDS (scripts/test.sh), TILEGEMM_PROPERTY_* (tests/test_properties.py).
"""

from __future__ import annotations

import json
import math
import os
import warnings

from .errors import ConfigError

_TRUE, _FALSE = ("1", "on", "true", "yes"), ("0", "off", "false", "no", "")


def flag(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in _TRUE or v in _FALSE:
        return v in _TRUE
    raise ConfigError(f"{name}={raw!r}: use 1 (on) or 0 (off)")


def debug() -> bool:
    """TILEGEMM_DEBUG: flag's words (1, on, true, yes); any other value is off, never an error (the
    CLI reads it while it reports an error)."""
    return os.environ.get("TILEGEMM_DEBUG", "").strip().lower() in _TRUE


def autotune() -> str:
    """TILEGEMM_AUTOTUNE: "off", "on" or "force"."""
    raw = os.environ.get("TILEGEMM_AUTOTUNE")
    if raw is not None and raw.strip().lower() == "force":
        return "force"
    try:
        return "on" if flag("TILEGEMM_AUTOTUNE") else "off"
    except ConfigError:
        raise ConfigError(f"TILEGEMM_AUTOTUNE={raw!r}: use 1 (tune on first call), force (retune) or 0") from None


def number(name: str, default: float, *, integer: bool = False, positive: bool = True) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        v = int(raw) if integer else float(raw)
    except ValueError:
        v = None
    if v is None or not math.isfinite(v) or v < 0 or (positive and v == 0):  # (positive=False: 0 or more)
        kind = "a whole number" if integer else "a finite number"
        raise ConfigError(f"{name}={raw!r}: use {kind}{' above 0' if positive else ' of 0 or more'}")
    return v


def local_world_size(default: int, *, bad: int | None = None) -> int:
    """torchrun's LOCAL_WORLD_SIZE (processes, one a GPU, on this host); `default` where unset.
    bad: returned for a value that is not a whole number above 0, where ConfigError is raised
    otherwise (the distributed products share it, and every rank refuses together: one rank
    raising alone left the others waiting in their all-gather)."""
    try:
        return int(number("LOCAL_WORLD_SIZE", default, integer=True))
    except ConfigError:
        if bad is None:
            raise
        return bad


def check(overridden=frozenset()) -> None:
    """The variables above that a command's work reads, parsed now: a ConfigError for the first not
    understood, before the work rather than inside it (bench ran its sweep, then failed one column
    on TILEGEMM_AUTOTUNE=maybe and exited 1, a wrong kernel's code). overridden: those the command
    sets itself (tune's --budget-s), not read. The defaults given here are not used: only whether
    each value parses."""
    if "TILEGEMM_AUTOTUNE" not in overridden:
        autotune()
    for name in ("TILEGEMM_SIMULATOR", "TILEGEMM_FAST_LAUNCH", "TILEGEMM_DIST_GRAPHS"):
        if name not in overridden:
            flag(name)
    for name in ("TILEGEMM_AUTOTUNE_BUDGET_S", "TILEGEMM_TUNE_BUDGET_S", "TILEGEMM_DIST_BARRIER_S"):
        if name not in overridden:
            number(name, 1.0)
    if "TILEGEMM_TUNE_MAX_CANDIDATES" not in overridden:
        number("TILEGEMM_TUNE_MAX_CANDIDATES", 0, integer=True, positive=False)


def cache_dir() -> str:
    """TILEGEMM_CACHE_DIR, else ~/.cache/tilegemm (XDG_CACHE_HOME's tilegemm where that is set); a
    leading ~ is the home folder (a quoted "~/x", which no shell expands, made a folder named ~ in
    the current one)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.expanduser(os.environ.get("TILEGEMM_CACHE_DIR") or os.path.join(base, "tilegemm"))


def read_cache(path: str, what: str) -> dict:
    """The JSON object in cache file `path`; {} where there is none, and {} with a warning where it
    cannot be read (`what` names it: the next write replaces it)."""
    try:
        with open(path) as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except FileNotFoundError:
        return {}
    except ValueError as e:
        warnings.warn(f"tilegemm: ignoring {what} {path} ({type(e).__name__}: {e}); it is rewritten on the next "
                      "tuning", RuntimeWarning, stacklevel=3)
        return {}
    except OSError as e:  # (its folder is a file, or it may not be read: no tuning can write it either)
        warnings.warn(f"tilegemm: cannot read {what} {path} ({type(e).__name__}: {e}); tunings made now are kept "
                      "for this process only", RuntimeWarning, stacklevel=3)
        return {}
