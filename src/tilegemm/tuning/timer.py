"""The tuner's clock: device time of one candidate, and of several against each other.

Every sample is taken the way the library bench takes its device-time samples: L2 flushed by
reading 256 MB (clean lines, as `bench.timing.L2Flush` kind "read" leaves them), then the GPU
held busy (`tilegemm.hold`) while the host enqueues the start event, the call and the end event,
so the events bracket the call's kernels only, however long the call takes on the host. Several
candidates are timed against each other in alternating batches (`tilegemm.sampling.alternate`,
the bench's rule).
"""

from __future__ import annotations

import math
import statistics

import torch
import triton

from .. import hold
from ..sampling import alternate

HOLD_US = 500  # the hold before each tuning sample (longer than any launch's host time)
HOLD_MS = 0.8  # a sample's time besides the call: the hold and the flush
SETTLE_MIN = 20  # samples of each candidate, at least, in settle's eager re-timing (its budget notwithstanding)
# The tuner times every product on held samples, L2 flushed (graph=False below; the host hidden by
# the hold, its launches counted by tuner.eager_score). Tuners v2–v9 timed products under 2^35 FLOPs
# on CUDA-graph replays, whose L2 keeps the operands between calls, which a decode step's weights
# never are: a 16 MB weight's t03 tile timed 14 µs there runs 26 on the device clock
# (docs/perf-notes.md, 50).


_FLOOR: list = []  # launch_floor_ms, once measured
_AT_LEAST: list = [0.0]  # floor_at_least's


def floor_at_least(ms: float) -> None:
    """Rank by a launch floor of at least ms from now on in this process (`tilegemm tune` writing
    a database: cache.SHIP_FLOOR_MS)."""
    _AT_LEAST[0] = ms


def floor_minimum() -> float:
    """What floor_at_least set (0: none): a cached ranking made at a lower floor is made again."""
    return _AT_LEAST[0]


def launch_floor_ms() -> float:
    """What the host takes to issue one launch, in ms: torch.mm's time per call on 64×64 BF16,
    called back to back (the median of 7 batches of 200 calls, after a warm-up), measured once per
    process. Back-to-back calls of a product cannot run faster than their launches are issued, so
    the tuner ranks candidates by max(device time, launches × this) (tuner.eager_score). At least
    what floor_at_least set (a database's tuning)."""
    if not _FLOOR:
        import time

        x = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
        per = []
        for i in range(8):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                torch.mm(x, x)
            torch.cuda.synchronize()
            if i:  # the first batch warms up
                per.append((time.perf_counter() - t0) / 200 * 1e3)
        _FLOOR.append(statistics.median(per))
    return max(_FLOOR[0], _AT_LEAST[0])


def _flush_buffer() -> torch.Tensor:
    """256 MB to read before each sample (over 4× the H200's L2). Read, not zeroed as
    triton.testing.do_bench does: zeroing leaves an L2 of dirty lines whose write-back the timed
    call would pay (8 µs of a decode product's 39: docs/perf-notes.md, 67)."""
    return torch.zeros(64 * 2**20, dtype=torch.float32, device="cuda")


def _held_samples(fn, n: int, flush: torch.Tensor) -> list[float]:
    """n device times of fn() in ms: before each, L2 flushed and then the GPU held busy while the
    host enqueues the start event, fn's launch and the end event."""
    stream = torch.cuda.current_stream().cuda_stream
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in pairs:
        flush.sum()
        hold.hold(HOLD_US, stream)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


def time_ms(fn, budget_ms: float = 60.0, graph: bool = False) -> float:
    """Median device time of fn() in ms.

    graph=False: one launch per sample, L2 flushed before each and the GPU held busy while fn is
    launched (_held_samples). Without the hold (triton.testing.do_bench), a launch whose Python
    side outlasts the flush is timed too: a forced configuration builds its TMA descriptors on
    every call (0.1 ms and more), which on a 0.1 ms product made t05 look 15% slower than it runs
    and lost it the t03/t05 verdict (docs/perf-notes.md, 26).
    graph=True: launches captured back to back in a CUDA graph and replayed
    (triton.testing.do_bench_cudagraph; L2 warm). For a product whose GPU time is a few µs a
    Python launch (20–100 µs) takes longer than the kernel, so eager samples time the host,
    rank configurations by launch overhead rather than by kernel speed, and pick by noise."""
    if graph:
        try:
            return float(triton.testing.do_bench_cudagraph(fn, rep=max(budget_ms / 2, 5.0), return_mode="median"))
        except Exception:  # noqa: BLE001  (a launch that cannot be captured is timed eagerly)
            torch.cuda.synchronize()
    fn()
    torch.cuda.synchronize()
    flush = _flush_buffer()
    est = max(statistics.median(_held_samples(fn, 3, flush)), 1e-3)
    for _ in range(min(100, int(max(budget_ms / 4, 2.0) / est) + 1)):  # warm-up, as do_bench's
        fn()
    per_sample = est + HOLD_MS
    return float(statistics.median(_held_samples(fn, max(5, min(500, int(budget_ms / per_sample))), flush)))


def settle(fns, budget_ms: float, graph: bool, rounds: int = 4) -> list[float]:
    """Each fn's median device time in ms, the fns timed against each other in alternating
    batches, the order reversed every round (sampling.alternate, the bench's rule). Timed once each
    in a fixed order, the later ones run on a GPU that has been working longer, whose clocks have
    dropped further under its power cap (docs/perf-notes.md, 22–23).

    Eager (graph=False): batches of five held samples (_held_samples: L2 flushed, the GPU held
    while the call is launched), until every median is known to 0.1%, or about
    budget_ms·rounds·len(fns) is spent and every fn has SETTLE_MIN samples, or 100 samples
    each. Before v8 each round timed each fn as one block (time_ms), which left whole blocks on
    either side of a drift: two such re-timings of the same four 8192³ configurations ranked
    them in opposite orders (docs/perf-notes.md, 31).
    graph=True: `rounds` rounds of one time_ms (itself a median of CUDA-graph replays) each."""
    if not fns:
        return []
    if graph:
        takers = [lambda n, f=f: [time_ms(f, budget_ms=budget_ms, graph=True) for _ in range(n)] for f in fns]
        series, _ = alternate(takers, budget_s=math.inf, min_reps=rounds, max_reps=rounds, target_rse=0.0, batch=1)
    else:
        flush = _flush_buffer()
        for f in fns:  # warm (the fns have run before: compiled, tuned)
            _held_samples(f, 1, flush)
        takers = [lambda n, f=f: _held_samples(f, n, flush) for f in fns]
        series, _ = alternate(takers, budget_s=budget_ms * rounds * len(fns) / 1e3, min_reps=SETTLE_MIN,
                              max_reps=100, target_rse=0.001, floor=SETTLE_MIN)
    return [statistics.median(t) for t in series]
