"""Distributed GEMM on torch.distributed: NCCL between GPUs, gloo between CPU processes.

    # under torchrun, after dist.init_process_group(...)
    c_rows = tilegemm.distributed.matmul_1d(a_rows, b_rows)             # 1-D: A and B split by rows
    c_blk = tilegemm.distributed.summa(a_blk, b_blk, grid=(2, 2))       # 2-D SUMMA on a process grid
    C = tilegemm.distributed.matmul(A, B)                               # DTensors in, a DTensor out

Two algorithms, each overlapping the next panel's communication with the current local GEMM
(tilegemm's own kernel on each rank):
- 1-D: rank r holds a block of A's rows (any count, none included) and a block of B's rows (its
  slice of K, in rank order), or all of B. N is cut into column panels; each panel of B (all of
  K) is all-gathered from the ranks' rows of it, and C_r[:, panel] = A_r @ B_panel is one GEMM
  over all of K, written once (no partial sums). With a replicated B there is nothing to send.
- 2-D SUMMA on a pr × pc grid (place r = i·pc + j): rank (i, j) holds block (i, j) of A (A's K
  split over the pc grid columns), of B (B's K split over the pr grid rows) and of C. K is cut
  into panels at both sets of boundaries; for each panel its owner in grid row i broadcasts A's
  panel along the row, its owner in grid column j broadcasts B's panel down the column, and every
  rank adds the panel's product into FP32 partial sums (16-bit inputs), cast once at the end.
Panel widths, when not given, are the cost model's fastest (costmodel.py).

On the GPUs of one host both take the copy engines instead of NCCL's kernels (transport="auto",
the default; "peer" or "nccl" to choose): each rank's blocks go once into a buffer every other
rank maps (symmetric memory), and its copy stream pulls what it needs from the others' while its
GEMMs run, with no SM taken from them. The 1-D engine gathers all of B, a column panel at a time;
SUMMA gathers its grid row's block of A and its grid column's block of B, a band and a panel at a
time, and multiplies each step's blocks of C over all of K (no partial sums). A rank keeps its
mapped buffers for later products of its groups; release_buffers() frees them (every rank calls it).

DTensors: on a 1-D mesh, A Shard(0) with B Replicate() is a local product on each rank; otherwise
A's and B's rows run on the grid that `grid=` names or the cost model (costmodel.py) predicts
fastest for the shape: P × 1 is the 1-D algorithm, another grid has each rank's blocks cut out of
the rows first (point-to-point) and C's blocks sent back to A's rows. On a 2-D mesh, A and B
Shard(0), Shard(1) run SUMMA on the mesh's grid. Other placements are redistributed first. The
result is a DTensor: Shard(0) on a 1-D mesh, Shard(0), Shard(1) on a 2-D one.

Before any data moves, every rank shares its blocks' shapes, dtype, device and the arguments it
was called with (one all-gather of a few integers) and all of them check the whole layout: a shard
or an argument that disagrees is refused on every rank with an error naming that rank (no rank
waits on a collective the others skipped); matmul first shares its grid, panel and the DTensors'
placements, shapes and dtypes the same way, so that every rank takes the same route. A collective that
fails later raises DistributedError on every surviving rank under gloo; under NCCL, PyTorch's
watchdog ends the processes when the group's timeout passes. A partial C is never returned.
"""

from __future__ import annotations

from ._core import DistributedError, matmul_1d, release_buffers, summa
from .api import matmul
from .costmodel import Hardware, choose, predict

__all__ = ["matmul", "matmul_1d", "summa", "release_buffers", "choose", "predict", "Hardware", "DistributedError"]
