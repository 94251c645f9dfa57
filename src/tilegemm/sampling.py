"""The sampling rule every comparison in the package shares, the benchmarks' and the tuner's.

Two or more things are timed in alternating batches, the order reversed every round (A B, B A,
A B, …), so that a slow drift of the GPU's state (clocks under a power cap, temperature) falls on
all of them alike instead of on whichever was timed last (docs/perf-notes.md, 22 and 31).
Sampling stops when every series' median is known to `target_rse`, or the budget is spent (once
every series has a few samples), or every series has `max_reps` samples. How one sample is taken
(events, hold, flush) is the caller's: this module imports nothing but the standard library, so
the kernels' tuner and `bench.timing` can both use it.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable


def median_rse(samples) -> float:
    """Relative standard error of the sample median: 1.2533·σ/√n/median, σ from the IQR (robust
    to the occasional slow outlier that a standard deviation would let dominate)."""
    n = len(samples)
    if n < 2:
        return math.inf
    med = statistics.median(samples)
    if n >= 4:
        q = statistics.quantiles(samples, n=4, method="inclusive")
        sigma = (q[2] - q[0]) / 1.349
    else:
        sigma = statistics.stdev(samples)
    if sigma == 0:
        sigma = statistics.pstdev(samples)
    return 1.2533 * sigma / math.sqrt(n) / med if med > 0 else math.inf


def paired_ratio(ours_runs, ref_runs) -> float | None:
    """The reference's time over ours run by run, and the median of those: each figure's reference
    from its own run (a ratio of the two sides' medians can pair one run's reference with another
    run's ours). Runs where either side has no time (None) are left out; None where none is left."""
    pairs = [r / o for o, r in zip(ours_runs, ref_runs) if r is not None and o is not None]
    return statistics.median(pairs) if pairs else None


def alternate(takers: list[Callable[[int], list[float]]], *, budget_s: float, min_reps: int, max_reps: int,
              target_rse: float, batch: int = 5, floor: int | None = None) -> tuple[list[list[float]], str]:
    """Samples of each series, taken in alternating batches: takers[i](n) returns n samples of
    series i. The precision rule needs min_reps samples each; the budget stops sampling only once
    every series has `floor` (default: min(min_reps, 3)). Returns (samples per series, what
    stopped it: "rse", "budget" or "max_reps"); every series gets the same number of samples, over
    the same stretch of time."""
    if not takers:
        return [], "max_reps"
    floor = min(min_reps, 3) if floor is None else floor
    samples: list[list[float]] = [[] for _ in takers]
    order = list(range(len(takers)))
    start = time.perf_counter()
    rnd = 0
    while len(samples[0]) < max_reps:
        n = min(batch, max_reps - len(samples[0]))
        for i in (order if rnd % 2 == 0 else order[::-1]):
            samples[i] += takers[i](n)
        rnd += 1
        reps = len(samples[0])
        if reps >= min_reps and all(median_rse(s) < target_rse for s in samples):
            return samples, "rse"
        if time.perf_counter() - start > budget_s and reps >= floor:
            return samples, "budget"
    return samples, "max_reps"
