"""The control for racecheck on t05: Triton's warp-specialize dispatch with no data of its own.

`gl.warp_specialize` is lowered by Triton into a dispatch: the worker warps wait in a loop at
named barrier 1, and the default warps write each worker warp's partition number into a small
table in shared memory and meet them at that barrier; the workers read their entry and branch
(and at the end read an "exit" entry written the same way). compute-sanitizer's racecheck reports
hazards between those table writes and reads in a kernel whose default warps initialise mbarriers
before the dispatch, as every producer/consumer kernel must (Triton then puts a barrier among the
default warps alone, barrier 0 with a thread count, ahead of the table writes); without that
prologue it reports none.

This kernel is t05's prologue and dispatch without t05: it initialises two mbarriers, then runs a
default partition of `num_warps` warps and one worker warp, each storing its thread indices to
global memory. No shared memory is read or written but Triton's own, so every hazard racecheck
reports here is the dispatch's (`tilegemm sanitize` runs it beside t05 and attributes t05's
hazards by it; docs/perf-notes.md, 45). `check()` runs it and says whether its output is right.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

WORKER_BASE = gl.constexpr(1024)  # where the worker warp's stores start, in each program's 2·WORKER_BASE
PROGRAMS = 4


@gluon.jit
def _store_ids(out_ptr, BASE: gl.constexpr, WARPS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    offs = gl.arange(0, 32 * WARPS, layout=layout)
    gl.store(out_ptr + gl.program_id(0) * 2 * WORKER_BASE + BASE + offs, offs + BASE)


@gluon.jit
def ws_control(out_ptr, num_warps: gl.constexpr):
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(2):
        mbarrier.init(bars.index(s), count=1)
    gl.warp_specialize([(_store_ids, (out_ptr, 0, num_warps)), (_store_ids, (out_ptr, WORKER_BASE, 1))], [1], [24])


def expected(num_warps: int = 8) -> torch.Tensor:
    base = WORKER_BASE.value
    one = torch.zeros(2 * base, dtype=torch.int32)
    one[:32 * num_warps] = torch.arange(32 * num_warps)
    one[base:base + 32] = base + torch.arange(32)
    return one.repeat(PROGRAMS)


def check(num_warps: int = 8) -> bool:
    """Run the control on the GPU; True where every program's stores are right."""
    out = torch.zeros(PROGRAMS * 2 * WORKER_BASE.value, dtype=torch.int32, device="cuda")
    ws_control[(PROGRAMS,)](out, num_warps=num_warps)
    torch.cuda.synchronize()
    return torch.equal(out.cpu(), expected(num_warps))


def compile_for_sm90(num_warps: int = 8):
    """The control compiled for sm_90 without a GPU (Triton's bundled ptxas), as t05's
    `compile_for_sm90`: the CompiledKernel."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    src = GluonASTSource(fn=ws_control, signature={"out_ptr": "*i32", "num_warps": "constexpr"},
                         constexprs={"num_warps": num_warps})
    return triton_compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps, maxnreg=168))
