"""One way to time anything: warm up by time, flush L2, device events, repeat to a stopping rule.

    t = measure(lambda: kern.launch(a, b, c), clock=DeviceClock(), flush=L2Flush())
    t.median_ms, t.iqr_ms, t.rse

- Warm-up runs for at least `warmup_s` seconds (and at least once), so JIT compilation,
  autotuning, module loading and clock ramp-up stay out of the samples.
- Each sample is bracketed by two device events recorded on the stream the work runs on
  (`DeviceClock`), or by the host clock after a device synchronisation for CPU code and the
  simulator (`HostClock`).
- Before each sample `flush` evicts the L2 cache by writing a buffer ≥ 2× its size, so a sample
  sees operands in DRAM, as a first call in an application would; the mode is recorded.
- Samples are taken until the relative standard error of the median falls below `target_rse`
  (estimated robustly from the IQR), or the time budget or `max_reps` runs out.
- Two or more things to compare are timed with `interleave`: in alternating batches, ABBA
  order, so that a slow drift of the GPU's state (clocks under a power cap, temperature) falls
  on all of them alike instead of on whichever was timed last (docs/perf-notes.md, 22).
- The stated spread (`spread_ms`) is the larger of half the IQR and REPRODUCIBILITY_FLOOR of the
  median. Samples of one series share their buffers and GPU state; a second series of the same
  kernel in the same run (fresh buffers) differed by up to 0.46% on the H200 while its IQR was
  under 0.1% (results/archive/h200/repeat-before-floor.json). A spread below what a repeat reproduces
  would be a false claim, so none is stated.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from .. import _cuda
from ..sampling import alternate, median_rse  # noqa: F401  (median_rse: part of this module's interface)


REPRODUCIBILITY_FLOOR = 0.005  # fraction of the median; see the module docstring


@dataclass
class Timing:
    samples_ms: list[float]
    clock: str
    flush: str
    warmup_ms: float
    reps: int = 0
    median_ms: float = math.nan
    q1_ms: float = math.nan
    q3_ms: float = math.nan
    min_ms: float = math.nan
    max_ms: float = math.nan
    rse: float = math.nan  # relative standard error of the median
    stopped_by: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        s = sorted(self.samples_ms)
        self.reps = len(s)
        if not s:
            return
        self.median_ms = statistics.median(s)
        self.min_ms, self.max_ms = s[0], s[-1]
        if len(s) >= 4:
            q = statistics.quantiles(s, n=4, method="inclusive")
            self.q1_ms, self.q3_ms = q[0], q[2]
        else:
            self.q1_ms, self.q3_ms = s[0], s[-1]
        self.rse = median_rse(s)

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @property
    def spread_ms(self) -> float:
        """± this much is claimed for the median: half the IQR, never below the reproducibility floor."""
        return max(self.iqr_ms / 2, REPRODUCIBILITY_FLOOR * self.median_ms)

    def to_dict(self, samples: bool = True) -> dict:
        d = asdict(self)
        d["iqr_ms"] = self.iqr_ms
        d["spread_ms"] = self.spread_ms
        d["reproducibility_floor"] = REPRODUCIBILITY_FLOOR
        if not samples:
            d.pop("samples_ms")
        return d


class HostClock:
    """perf_counter around the work, after a synchronisation (CPU code, the simulator)."""

    name = "host"

    def __init__(self, sync: Callable[[], None] | None = None):
        self.sync = sync or (lambda: None)

    def batch(self, run: Callable[[], None], flush, n: int) -> list[float]:
        out = []
        for _ in range(n):
            if flush:
                flush()
            self.sync()
            t0 = time.perf_counter()
            run()
            self.sync()
            out.append((time.perf_counter() - t0) * 1e3)
        return out


class DeviceClock:
    """CUDA events around each sample. `framework` 'numba' records on Numba's default stream
    (which orders with torch's default stream); 'torch' uses torch.cuda.Event on torch's current
    stream.

    Before each sample's start event a one-thread kernel holds the GPU for `hold_us` µs
    (`tilegemm.hold`, the tuner's too), so that the host enqueues the start event, the work and
    the end event while the GPU is still busy: the events then bracket device time only, not
    Python's launch latency, which otherwise dominates kernels shorter than a launch (tens of
    µs). hold_us=0 turns it off."""

    name = "cuda-events"

    def __init__(self, framework: str = "numba", hold_us: int = 200):
        self.framework = framework
        self.hold_us = hold_us
        if hold_us:
            self.name = f"cuda-events, {hold_us} µs hold before each sample"

    def _stream(self) -> int:
        """The raw handle of the stream the samples are taken on (0: the default stream)."""
        if self.framework != "torch":
            return 0
        import torch

        return torch.cuda.current_stream().cuda_stream

    def _events(self, n):
        if self.framework == "torch":
            import torch

            return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        cuda = _cuda.cuda
        return [(cuda.event(timing=True), cuda.event(timing=True)) for _ in range(n)]

    def batch(self, run, flush, n: int) -> list[float]:
        from .. import hold

        pairs = self._events(n)
        stream = self._stream() if self.hold_us else 0
        for start, end in pairs:
            if flush:
                flush()
            if self.hold_us:
                hold.hold(self.hold_us, stream)
            start.record()
            run()
            end.record()
        if self.framework == "torch":
            import torch

            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in pairs]
        pairs[-1][1].synchronize()
        return [_cuda.cuda.event_elapsed_time(s, e) for s, e in pairs]


class L2Flush:
    """Evict L2 by touching a device buffer of `factor`× the L2 size, device-side.

    kind 'write': overwrite it (a memset), as triton.testing.do_bench does. L2 is write-back, so
    this leaves up to an L2 of dirty lines, and the next kernel pays for writing them back when
    its own reads evict them: 8 µs of a memory-bound product's 39 on the H200 (BF16 1×14336×4096;
    docs/perf-notes.md, 67). kind 'read' (torch only): sum it, so that L2 holds clean lines, as a
    model's layer finds it after the last layer's weights were read; a timed call then pays for
    its own traffic only.

    framework 'numba': Numba's memset, which returns to the host only when it is done, so a
    sample starts with an idle GPU. 'torch': on the current stream, asynchronous as
    triton.testing.do_bench's flush is: the host enqueues the sample while the GPU still
    flushes, so a call's host overhead shows only where it exceeds the flush (eager timing)."""

    def __init__(self, factor: float = 2.0, framework: str = "numba", kind: str = "write"):
        if kind not in ("write", "read") or (kind == "read" and framework != "torch"):
            raise ValueError(f"L2Flush: kind {kind!r} with framework {framework!r}; 'read' is for torch only")
        if framework == "torch":
            import torch

            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 64 * 2**20
        else:
            dev = _cuda.cuda.get_current_device()
            l2 = int(getattr(dev, "L2_CACHE_SIZE", 0) or 0) or 64 * 2**20
        self.l2_bytes = l2
        self.nbytes = int(max(factor * l2, 32 * 2**20)) // 4 * 4
        if framework == "torch" and kind == "read":
            words = torch.zeros(self.nbytes // 4, dtype=torch.float32, device="cuda")
            total = torch.empty((), dtype=torch.float32, device="cuda")
            self.buf = words
            self._run = lambda: torch.sum(words, 0, out=total)
        elif framework == "torch":
            self.buf = torch.empty(self.nbytes, dtype=torch.uint8, device="cuda")
            self._run = self.buf.zero_
        else:
            from numba.cuda.cudadrv import driver

            self.buf = _cuda.cuda.device_array(self.nbytes, dtype=np.uint8)
            self._run = lambda: driver.device_memset(self.buf, 0, self.nbytes)
        how = " by reading" if kind == "read" else ""
        self.kind = kind
        self.mode = f"l2-flush{how} {self.nbytes // 2**20} MiB (L2 {l2 // 2**20} MiB, {framework})"

    def __call__(self):
        self._run()


def measure(run: Callable[[], None], *, clock, flush: Callable | None = None, warmup_s: float = 0.05,
            budget_s: float = 1.0, min_reps: int = 5, max_reps: int = 200, target_rse: float = 0.01,
            batch: int = 5, warmup_runs: int = 1) -> Timing:
    """Warm up for `warmup_s` (and at least `warmup_runs` calls), then take samples in batches
    until the median's relative standard error is below `target_rse`, `budget_s` is spent, or
    `max_reps` samples exist."""
    t0 = time.perf_counter()
    for _ in range(warmup_runs):
        clock.batch(run, None, 1)  # compile/tune/load happen here, untimed
    while warmup_runs and time.perf_counter() - t0 < warmup_s:
        clock.batch(run, None, 1)
    warm_ms = (time.perf_counter() - t0) * 1e3
    (samples,), stopped = alternate([lambda n: clock.batch(run, flush, n)], budget_s=budget_s, min_reps=min_reps,
                                    max_reps=max_reps, target_rse=target_rse, batch=batch)
    mode = getattr(flush, "mode", "none") if flush else "none"
    return Timing(samples, clock.name, mode, warm_ms, stopped_by=stopped)


def interleave(runs: dict[str, Callable[[], None]], *, clock, flush: Callable | None = None,
               warmup_s: float = 0.05, budget_s: float = 1.0, min_reps: int = 10, max_reps: int = 200,
               target_rse: float = 0.005, batch: int = 5) -> dict[str, Timing]:
    """Time several runs against each other: warm each up (alternately, `warmup_s` in all), then
    take `batch` samples of each in turn, the order reversed every round (A B, B A, A B, …), until
    every series' median is within `target_rse`, or `budget_s` is spent, or `max_reps` samples each.
    Every series gets the same number of samples, taken over the same stretch of time."""
    names = list(runs)
    t0 = time.perf_counter()
    for name in names:  # compile/tune/load, untimed
        clock.batch(runs[name], None, 1)
    while time.perf_counter() - t0 < warmup_s:
        for name in names:
            clock.batch(runs[name], None, 1)
    warm_ms = (time.perf_counter() - t0) * 1e3
    series, stopped = alternate([lambda n, r=runs[name]: clock.batch(r, flush, n) for name in names],
                                budget_s=budget_s, min_reps=min_reps, max_reps=max_reps, target_rse=target_rse,
                                batch=batch)
    samples = dict(zip(names, series))
    mode = getattr(flush, "mode", "none") if flush else "none"
    return {name: Timing(samples[name], clock.name, mode, warm_ms, stopped_by=stopped,
                         extra=dict(interleaved_with=[x for x in names if x != name], order="ABBA"))
            for name in names}
