"""The one way tilegemm holds the GPU busy before a timed sample (the bench's and the tuner's).

A timed sample is start event, call, end event. Enqueued on an idle GPU, the start event fires at
once and the events then bracket the host's launch of the call too, which for a small product
takes longer than the product. A one-thread kernel that sleeps for `us` microseconds, enqueued
first, keeps the GPU busy while the host enqueues the rest, so the events bracket device time
only. It is a Numba kernel (numba-cuda is a core dependency, torch is not), launched on the raw
stream handle it is given: torch's, CuPy's or Numba's default (0).
"""

from __future__ import annotations

from . import _cuda

_KERNEL: list = []
_STREAMS: dict = {}


def _kernel():
    if not _KERNEL:
        cuda = _cuda.cuda

        @cuda.jit
        def hold(n):
            for _ in range(n):
                cuda.nanosleep(1000)

        _KERNEL.append(hold)
    return _KERNEL[0]


def hold(us: int, stream: int = 0) -> None:
    """Keep the GPU busy for about `us` µs on the stream with raw handle `stream` (0: the default)."""
    kernel = _kernel()
    if not stream:
        kernel[1, 1](us)
        return
    s = _STREAMS.get(stream)
    if s is None:
        s = _STREAMS[stream] = _cuda.cuda.external_stream(stream)
    kernel[1, 1, s](us)
