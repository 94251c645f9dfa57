"""Did it get faster? OLD vs NEW results, per kernel and shape, decided by the measured spread.

For each (kernel, M, N, K, dtype) present in both documents the verdict is
    FASTER   NEW's median time is lower, and the difference is larger than the noise
    SLOWER   NEW's median time is higher, and the difference is larger than the noise
    SAME     the difference is within the noise AND the noise is small enough to say so:
             the whole confidence interval of the ratio lies within ±`equivalence`
    UNCLEAR  the data cannot tell (interval includes 1 but is wider than ±`equivalence`,
             too few samples, or one side failed its correctness check)
"Larger than the noise" is decided from the stored samples: a bootstrap 95% confidence
interval of ratio = median(NEW) / median(OLD) (resampling each side's samples independently,
seeded, so the verdict is reproducible) that excludes 1. When a record has no stored samples,
the interquartile ranges are used instead: disjoint IQRs → FASTER/SLOWER, else UNCLEAR.
Either way a median is known no better than the harness's REPRODUCIBILITY_FLOOR (bench.timing: a
second series of the same kernel in the same run differed by up to 0.46% while its IQR was under
0.1%): the interval is never narrower than that of two medians each ±the floor (each IQR at least
±the floor of its median), as the bench's own repeat check (`table.agreement`) has it, so that a
difference the harness says a repeat reproduces is neither FASTER nor SLOWER.
No fixed percentage beyond that decides FASTER or SLOWER; `equivalence` only separates SAME from UNCLEAR.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass

import numpy as np

from .timing import REPRODUCIBILITY_FLOOR

FASTER, SLOWER, SAME, UNCLEAR = "FASTER", "SLOWER", "SAME", "UNCLEAR"


@dataclass
class Verdict:
    kernel: str
    m: int
    n: int
    k: int
    dtype: str
    verdict: str
    ratio: float | None  # median(new) / median(old): < 1 is faster
    lo: float | None  # confidence interval of the ratio
    hi: float | None
    old_ms: float | None
    new_ms: float | None
    method: str  # 'bootstrap', 'iqr' or why neither applied
    note: str = ""
    repeat: int = 1  # which timing of this kernel, shape and dtype in its file (a run may time one twice)

    @property
    def shape(self) -> str:
        return f"{self.m}×{self.n}×{self.k}"


def bootstrap_ratio_ci(old, new, *, n_boot: int = 4000, level: float = 0.95, seed: int = 0):
    """Percentile-bootstrap CI of median(new)/median(old)."""
    old = np.asarray(old, dtype=float)
    new = np.asarray(new, dtype=float)
    rng = np.random.default_rng(seed)
    mo = np.median(old[rng.integers(0, old.size, size=(n_boot, old.size))], axis=1)
    mn = np.median(new[rng.integers(0, new.size, size=(n_boot, new.size))], axis=1)
    ratios = mn / mo
    a = (1 - level) / 2
    return float(np.median(new) / np.median(old)), float(np.quantile(ratios, a)), float(np.quantile(ratios, 1 - a))


EQUIVALENCE_MEANS = ("the fraction by which NEW may differ from OLD and still be SAME "
                     "(0.02: the whole interval within ±2%)")
LEVEL_MEANS = "the confidence level of the interval (0.95: a 95% interval)"


def check_settings(equivalence: float, level: float) -> None:
    """A negative `equivalence` makes SAME's band empty (at -1, a division by zero); a `level`
    of 0 is an interval of one point, of 1 or more no interval at all."""
    if not (math.isfinite(equivalence) and equivalence >= 0):
        raise ValueError(f"equivalence {equivalence}: must be a finite number ≥ 0, {EQUIVALENCE_MEANS}")
    if not 0 < level < 1:
        raise ValueError(f"level {level}: must be strictly between 0 and 1, {LEVEL_MEANS}")


def decide(old_t: dict | None, new_t: dict | None, *, equivalence: float = 0.02, min_samples: int = 3,
           level: float = 0.95, seed: int = 0) -> tuple[str, float | None, float | None, float | None, str]:
    """Verdict from two Timing.to_dict() dicts: (verdict, ratio, lo, hi, method)."""
    check_settings(equivalence, level)
    if not old_t or not new_t or not old_t.get("median_ms") or not new_t.get("median_ms"):
        return UNCLEAR, None, None, None, "no time on one side"
    so, sn = old_t.get("samples_ms") or [], new_t.get("samples_ms") or []
    ratio = new_t["median_ms"] / old_t["median_ms"]
    f = REPRODUCIBILITY_FLOOR
    if len(so) >= min_samples and len(sn) >= min_samples:
        ratio, lo, hi = bootstrap_ratio_ci(so, sn, level=level, seed=seed)
        # never narrower than the floor: each median ±f (the bench's spread, max(IQR/2, f·median))
        lo, hi = min(lo, ratio * (1 - f) / (1 + f)), max(hi, ratio * (1 + f) / (1 - f))
        method = "bootstrap"
    elif all(t.get(q) is not None for t in (old_t, new_t) for q in ("q1_ms", "q3_ms")) \
            and old_t.get("reps", 0) >= min_samples and new_t.get("reps", 0) >= min_samples:
        (o1, o3), (n1, n3) = ((min(t["q1_ms"], t["median_ms"] * (1 - f)), max(t["q3_ms"], t["median_ms"] * (1 + f)))
                              for t in (old_t, new_t))
        if n3 < o1:
            return FASTER, ratio, n1 / o3, n3 / o1, "iqr"
        if n1 > o3:
            return SLOWER, ratio, n1 / o3, n3 / o1, "iqr"
        return UNCLEAR, ratio, n1 / o3, n3 / o1, "iqr"
    else:
        return UNCLEAR, ratio, None, None, f"fewer than {min_samples} samples"
    if hi < 1.0:
        return FASTER, ratio, lo, hi, method
    if lo > 1.0:
        return SLOWER, ratio, lo, hi, method
    if lo >= 1.0 / (1.0 + equivalence) and hi <= 1.0 + equivalence:
        return SAME, ratio, lo, hi, method
    return UNCLEAR, ratio, lo, hi, method


def _key(r: dict):
    return (r["kernel"], int(r["m"]), int(r["n"]), int(r["k"]), r.get("dtype", ""))


def _keyed(records: list[dict]) -> list[tuple[tuple, dict]]:
    """(key and which timing of that key it is, 1 for the first), record: a run that times a kernel
    twice at one shape (`repeat` 1 and 2) has two records of one key, each matched to its own."""
    seen: dict = {}
    out = []
    for r in records:
        key = _key(r)
        seen[key] = seen.get(key, 0) + 1
        out.append(((*key, seen[key]), r))
    return out


def unmatched(old: dict, new: dict) -> tuple[list[tuple], list[tuple]]:
    """The (kernel, M, N, K, dtype, repeat) keys only OLD has, and those only NEW has."""
    ko, kn = [k for k, _ in _keyed(old["records"])], [k for k, _ in _keyed(new["records"])]
    so, sn = set(ko), set(kn)
    return [k for k in ko if k not in sn], [k for k in kn if k not in so]


def compare(old: dict, new: dict, *, equivalence: float = 0.02, level: float = 0.95, seed: int = 0) -> list[Verdict]:
    """Verdicts for every (kernel, shape, dtype) in both documents, in NEW's order; a kernel timed
    twice at one shape in a file: its first timing against OLD's first, its second against OLD's second."""
    check_settings(equivalence, level)
    old_by = dict(_keyed(old["records"]))
    out = []
    for full, r in _keyed(new["records"]):
        key, repeat = full[:5], full[5]
        o = old_by.get(full)
        if o is None:
            continue
        note = ""
        if o.get("ok") is False or r.get("ok") is False:
            note = "failed its check in " + " and ".join(w for w, x in (("OLD", o), ("NEW", r)) if x.get("ok") is False)
            v = Verdict(*key, UNCLEAR, None, None, None, o.get("median_ms"), r.get("median_ms"), "check", note,
                        repeat)
        else:
            verdict, ratio, lo, hi, method = decide(o.get("time"), r.get("time"), equivalence=equivalence,
                                                    level=level, seed=seed)
            v = Verdict(*key, verdict, ratio, lo, hi, o.get("median_ms"), r.get("median_ms"), method, "", repeat)
        out.append(v)
    return out


def summary(verdicts: list[Verdict]) -> dict[str, int]:
    counts = {FASTER: 0, SLOWER: 0, SAME: 0, UNCLEAR: 0}
    for v in verdicts:
        counts[v.verdict] += 1
    return counts


def to_dicts(verdicts: list[Verdict]) -> list[dict]:
    return [asdict(v) for v in verdicts]


# ---- CLI ----------------------------------------------------------------------------------------

def _setting(name: str):
    """An argparse type for --equivalence or --level: a number that check_settings() takes, or
    one line saying what the option means."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        try:
            check_settings(v, 0.95) if name == "equivalence" else check_settings(0.0, v)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r}: {str(e).split(': ', 1)[1]}") from None
        return v
    return parse


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("compare", help="OLD.json vs NEW.json: FASTER / SLOWER / SAME / UNCLEAR per kernel and shape")
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--equivalence", type=_setting("equivalence"), default=0.02,
                   help="SAME needs the whole confidence interval within ±this fraction, ≥ 0 (default 0.02)")
    p.add_argument("--level", type=_setting("level"), default=0.95,
                   help="confidence level of the interval, strictly between 0 and 1 (default 0.95)")
    p.add_argument("--fail-on-slower", action="store_true", help="exit 1 when any verdict is SLOWER")
    p.set_defaults(func=cli_compare)


def cli_compare(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .results import gpu_name, load

    old, new = load(args.old), load(args.new)
    verdicts = compare(old, new, equivalence=args.equivalence, level=args.level)
    where = [gpu_name(d) or ("the simulator" if (d.get("environment") or {}).get("simulator") else "no GPU")
             for d in (old, new)]
    if verdicts and where[0] != where[1]:  # said, not refused: comparing two GPUs may be the point
        print(f"tilegemm compare: warning: OLD ran on {where[0]}, NEW on {where[1]}: the verdicts compare the "
              "machines as well as the code", file=sys.stderr)
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 150)
    if not verdicts:  # (a user's mistake, exit 2: 1 is --fail-on-slower's)
        print(f"tilegemm compare: no kernel × shape appears in both {args.old} and {args.new}", file=sys.stderr)
        return 2
    colour = {FASTER: "green", SLOWER: "red", SAME: "white", UNCLEAR: "yellow"}
    t = Table(title=f"{args.old} → {args.new}", header_style="bold")
    for col in ("kernel", "shape", "dtype", "old ms", "new ms", "new/old", f"{args.level * 100:g}% interval",
                "verdict", "method"):
        t.add_column(col, justify="left" if col in ("kernel", "dtype", "verdict", "method") else "right")
    for v in verdicts:
        fmt = lambda x: "—" if x is None else f"{x:.4g}"  # noqa: E731
        t.add_row(v.kernel + (f" (timing #{v.repeat})" if v.repeat > 1 else ""), v.shape, v.dtype, fmt(v.old_ms),
                  fmt(v.new_ms), fmt(v.ratio),
                  "—" if v.lo is None else f"{v.lo:.3f}–{v.hi:.3f}",
                  f"[{colour[v.verdict]}]{v.verdict}[/]", v.note or v.method)
    console.print(t)
    s = summary(verdicts)
    console.print(", ".join(f"{n} {k}" for k, n in s.items()))
    only_old, only_new = unmatched(old, new)
    for who, keys in (("OLD", only_old), ("NEW", only_new)):
        if keys:  # not compared: said, so that a kernel that vanished from a run is not missed
            shown = ", ".join(f"{k[0]} {k[1]}×{k[2]}×{k[3]} {k[4]}" + (f" (timing #{k[5]})" if k[5] > 1 else "")
                              for k in keys[:5])
            console.print(f"only in {who} (not compared): {len(keys)}: {shown}{', …' if len(keys) > 5 else ''}")
    return 1 if args.fail_on_slower and s[SLOWER] else 0
