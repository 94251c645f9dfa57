"""The engines: SUMMA on a pr × pc process grid, and the 1-D algorithm on A's and B's rows.

SUMMA: rank r = i·pc + j of the group holds block (i, j) of A (M_i × KA_j), of B (KB_i × N_j) and
of C (M_i × N_j). K is cut into panels at the union of A's and B's K boundaries (and again to at
most `panel` wide, so that there are panels to overlap); for panel p the rank of grid row i that
owns A's columns broadcasts them along grid row i, the rank of grid column j that owns B's rows
broadcasts them down grid column j, and each rank adds A_panel @ B_panel into its C block (kept in
FP32 for 16-bit inputs). Panel p + 1's broadcasts are issued before panel p's product (two buffers
each), so they travel while it computes; a broadcast within a group of one is no broadcast.

1-D: rank r holds A's rows r (all of K) and B's rows r (its slice of K). N is cut into column
panels; panel p of B is all-gathered (every rank's rows of those columns), and C_r[:, panel] =
A_r @ B_panel is one GEMM over all of K, written once in the output dtype: no partial sums, no
accumulator. Panel p + 1's all-gather travels while panel p is multiplied. (SUMMA on a P × 1 grid
computes the same product with K panels and an FP32 accumulator that every panel reads and writes
again: more memory traffic and P times C's memory in FP32; the 1-D engine is what runs for P × 1.)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..errors import TileGemmError

_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.13
_GROUPS: dict = {}  # (parent group, rank tuple) -> process group, made once (new_group is a collective)


class DistributedError(TileGemmError, RuntimeError):
    """A distributed product that cannot run (shards that disagree, named by rank) or that failed
    (a collective broke: a rank died or the group's timeout passed). Raised on every rank."""


def _collective(what: str, fn):
    try:
        return fn()
    except DistributedError:
        raise
    except Exception as e:  # noqa: BLE001  (gloo/NCCL raise RuntimeError, DistBackendError, …)
        raise DistributedError(f"{what} failed on rank {dist.get_rank()}: {type(e).__name__}: "
                               f"{str(e).splitlines()[0][:300]}; the product is incomplete and no part of C "
                               "is returned") from e


def _meta_device(group):
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else torch.device("cpu")


def gather_meta(values: list[int], group) -> list[list[int]]:
    """Every rank's list of integers (the same length on every rank), in group rank order."""
    t = torch.tensor(values, dtype=torch.int64, device=_meta_device(group))
    out = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    _collective("sharing the shards' shapes", lambda: dist.all_gather(out, t, group=group))
    return [x.tolist() for x in out]


def _code(t: torch.Tensor) -> int:
    return _DTYPES.index(t.dtype) if t.dtype in _DTYPES else -1


def _describe(dt_code: int) -> str:
    return str(_DTYPES[dt_code]).removeprefix("torch.") if dt_code >= 0 else "an unsupported dtype"


def _common_errors(meta: list[list[int]]) -> list[str]:
    errs = []
    if len({m[2] for m in meta}) > 1:
        errs.append("ranks hold their blocks on different kinds of device")
    for r, m in enumerate(meta):
        for which, code in (("A", m[0]), ("B", m[1])):
            if code < 0:
                errs.append(f"rank {r}: {which} is of a dtype this product does not take (float16, bfloat16, "
                            "float32, float64)")
            elif code != meta[0][0]:
                errs.append(f"rank {r}: {which} is {_describe(code)}, rank 0's A is {_describe(meta[0][0])}")
    return errs


def _refuse(errs: list[str]) -> None:
    if errs:
        raise DistributedError("the shards do not form one product: " + "; ".join(errs[:6])
                               + (f" (and {len(errs) - 6} more)" if len(errs) > 6 else ""))


def check_grid(meta: list[list[int]], pr: int, pc: int) -> tuple[list, list, list, list]:
    """Every rank checks the same gathered layout, so all refuse it together or none does.
    meta[r] = [dtype A, dtype B, device type, A rows, A cols, B rows, B cols]. Returns (M_i per grid
    row, N_j per grid column, A's K sizes per grid column, B's K sizes per grid row)."""
    errs = _common_errors(meta)
    at = lambda i, j: meta[i * pc + j]  # noqa: E731
    rows = [at(i, 0)[3] for i in range(pr)]
    ncols = [at(0, j)[6] for j in range(pc)]
    ka = [at(0, j)[4] for j in range(pc)]
    kb = [at(i, 0)[5] for i in range(pr)]
    for i, j in itertools.product(range(pr), range(pc)):
        r, m = i * pc + j, at(i, j)
        if m[3] != rows[i]:
            errs.append(f"rank {r} (grid {i},{j}): A has {m[3]} rows, rank {i * pc} of the same grid row {rows[i]}")
        if m[4] != ka[j]:
            errs.append(f"rank {r} (grid {i},{j}): A has {m[4]} columns, rank {j} of the same grid column {ka[j]}")
        if m[5] != kb[i]:
            errs.append(f"rank {r} (grid {i},{j}): B has {m[5]} rows, rank {i * pc} of the same grid row {kb[i]}")
        if m[6] != ncols[j]:
            errs.append(f"rank {r} (grid {i},{j}): B has {m[6]} columns, rank {j} of the same grid column {ncols[j]}")
    if sum(ka) != sum(kb):
        errs.append(f"A's blocks span K = {sum(ka)} (columns {ka} over the grid's columns) but B's span K = {sum(kb)} "
                    f"(rows {kb} over the grid's rows)")
    _refuse(errs)
    return rows, ncols, ka, kb


def _subgroup(group, ranks: list[int]):
    """The process group of these ranks (ranks of `group`); None for a group of one (no broadcast)."""
    if len(ranks) == 1:
        return None
    if len(ranks) == dist.get_world_size(group):
        return group if group is not None else dist.group.WORLD  # None would read as "a group of one"
    glob = tuple(dist.get_global_rank(group, r) if group is not None else r for r in ranks)
    key = (id(group), glob)
    if key not in _GROUPS:
        _GROUPS[key] = dist.new_group(list(glob))
    return _GROUPS[key]


def _grid_groups(group, pr: int, pc: int):
    """(row groups, column groups), made on every rank in the same order (new_group is collective)."""
    rows = [_subgroup(group, [i * pc + j for j in range(pc)]) for i in range(pr)]
    cols = [_subgroup(group, [i * pc + j for i in range(pr)]) for j in range(pc)]
    return rows, cols


def _panels(ka: list[int], kb: list[int], width: int | None) -> list[tuple[int, int, int, int]]:
    """(k0, k1, grid column owning A's piece, grid row owning B's piece) over K, cut at both sets of
    boundaries and to at most `width`."""
    a_off = list(itertools.accumulate([0] + ka))
    b_off = list(itertools.accumulate([0] + kb))
    cuts = sorted(set(a_off) | set(b_off))
    out = []
    for k0, k1 in zip(cuts, cuts[1:]):
        step = width or (k1 - k0)
        for s in range(k0, k1, step):
            e = min(s + step, k1)
            ja = max(j for j in range(len(ka)) if a_off[j] <= s and a_off[j + 1] > s)
            ib = max(i for i in range(len(kb)) if b_off[i] <= s and b_off[i + 1] > s)
            out.append((s, e, ja, ib))
    return out


def _model_panel(m: int, n: int, k: int, grid, a: torch.Tensor) -> int:
    """The panel width the cost model predicts fastest for this product (costmodel.default_panel,
    with the shipped H200 rates whatever this rank's GPU, so that every rank, computing from the
    same gathered shapes, cuts the same panels)."""
    from .costmodel import default_panel

    return max(1, default_panel(m, n, k, grid, a.element_size(), None))


def _accumulate(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor, first: bool) -> None:
    """acc (+)= a @ b on tilegemm's kernel: written by the first panel, added to by the others
    (FP32 accumulation of 16-bit inputs on the tensor cores)."""
    import tilegemm

    if acc.is_cuda and a.dtype in (torch.float16, torch.bfloat16):
        tilegemm.gemm(a, b, out_dtype=torch.float32, beta=0.0 if first else 1.0, c=acc)
    elif first and acc.dtype == a.dtype:
        tilegemm.matmul(a, b, out=acc)
    elif first:
        acc.copy_(tilegemm.matmul(a, b))
    else:
        acc += tilegemm.matmul(a, b)


@dataclass(frozen=True)
class Layout:
    """What every rank agreed on before any data moved: the grid, this rank's place in it, the
    blocks' sizes and the K panels."""

    pr: int
    pc: int
    i: int
    j: int
    rows: list  # M_i per grid row
    ncols: list  # N_j per grid column
    a_off: list  # A's K offsets per grid column
    b_off: list  # B's K offsets per grid row
    panels: list  # (k0, k1, grid column owning A's piece, grid row owning B's piece)
    width: int


def layout(a: torch.Tensor, b: torch.Tensor, grid: tuple[int, int], group=None, panel: int | None = None) -> Layout:
    """Share every rank's blocks' shapes and dtypes (one all-gather), check them on every rank,
    and cut K into panels (default width: the cost model's fastest; all of K alone)."""
    pr, pc = int(grid[0]), int(grid[1])
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if pr * pc != world:
        raise DistributedError(f"grid {pr}×{pc} has {pr * pc} places for a group of {world} ranks")
    if a.dim() != 2 or b.dim() != 2:
        raise DistributedError(f"rank {dist.get_rank()}: blocks must be 2-D; got A {tuple(a.shape)}, B {tuple(b.shape)}")
    meta = gather_meta([_code(a), _code(b), int(a.is_cuda), a.shape[0], a.shape[1], b.shape[0], b.shape[1]], group)
    rows, ncols, ka, kb = check_grid(meta, pr, pc)
    k_total = sum(ka)
    width = panel or (_model_panel(sum(rows), sum(ncols), k_total, (pr, pc), a) if world > 1 else k_total)
    return Layout(pr, pc, *divmod(rank, pc), rows, ncols, list(itertools.accumulate([0] + ka)),
                  list(itertools.accumulate([0] + kb)), _panels(ka, kb, width), width)


def summa(a: torch.Tensor, b: torch.Tensor, grid: tuple[int, int], group=None, panel: int | None = None) -> torch.Tensor:
    """C block (i, j) = sum over K of A (row block i) @ B (column block j), on the pr × pc grid of
    `group`'s ranks (rank r = i·pc + j). a: this rank's block of A, b: its block of B (see the
    module docstring); returns its block of C. panel: the widest K panel (default: the width the
    cost model predicts fastest; all of K on a group of one)."""
    return run(a, b, layout(a, b, grid, group, panel), group)


def run(a: torch.Tensor, b: torch.Tensor, lay: Layout, group=None, communicate: bool = True) -> torch.Tensor:
    """The panel loop on an agreed layout. communicate=False runs the same local products on
    whatever the receive buffers hold, with nothing sent: what `tilegemm dist-bench` times as
    the products alone (its efficiency's numerator)."""
    i, j, rows, ncols, panels, width = lay.i, lay.j, lay.rows, lay.ncols, lay.panels, lay.width
    if communicate:
        row_groups, col_groups = _grid_groups(group, lay.pr, lay.pc)
    else:
        row_groups, col_groups = [None] * lay.pr, [None] * lay.pc
    acc_dtype = torch.float32 if a.dtype in (torch.float16, torch.bfloat16) else a.dtype
    acc = (torch.empty if panels and rows[i] and ncols[j] else torch.zeros)(
        (rows[i], ncols[j]), dtype=acc_dtype, device=a.device)
    # receive buffers, two of each (panel p + 1 arrives while panel p is used), flat so that a
    # narrower last panel is still one contiguous block
    bufs_a = [torch.empty(rows[i] * width, dtype=a.dtype, device=a.device) for _ in range(2)]
    bufs_b = [torch.empty(width * ncols[j], dtype=b.dtype, device=b.device) for _ in range(2)]

    def post(p: int):
        """Issue panel p's two broadcasts; (A panel, B panel, works) on this rank."""
        k0, k1, ja, ib = panels[p]
        w = k1 - k0
        works = []
        if ja == j:  # this rank owns A's piece of the panel (always, when pc = 1)
            pa = a[:, k0 - lay.a_off[ja]:k1 - lay.a_off[ja]]
            if row_groups[i] is not None:
                pa = pa.contiguous()  # what is sent must be contiguous
        else:
            pa = bufs_a[p % 2][:rows[i] * w].view(rows[i], w)
        if row_groups[i] is not None and rows[i]:
            works.append(_collective(f"panel {p}: the broadcast of A's columns {k0}:{k1} along grid row {i}",
                                     lambda: dist.broadcast(pa, group=row_groups[i], group_src=ja, async_op=True)))
        if ib == i:
            pb = b[k0 - lay.b_off[ib]:k1 - lay.b_off[ib], :]
            if col_groups[j] is not None:
                pb = pb.contiguous()
        else:
            pb = bufs_b[p % 2][:w * ncols[j]].view(w, ncols[j])
        if col_groups[j] is not None and ncols[j]:
            works.append(_collective(f"panel {p}: the broadcast of B's rows {k0}:{k1} down grid column {j}",
                                     lambda: dist.broadcast(pb, group=col_groups[j], group_src=ib, async_op=True)))
        return pa, pb, works

    pending = post(0) if panels else None
    for p in range(len(panels)):
        pa, pb, works = pending
        if p + 1 < len(panels):
            pending = post(p + 1)  # in flight while panel p is multiplied
        for w in works:
            _collective(f"panel {p}: waiting for its broadcasts", w.wait)
        if rows[i] and ncols[j]:
            _accumulate(acc, pa, pb, first=p == 0)
    return acc if acc.dtype == a.dtype else acc.to(a.dtype)


def relayout(x: torch.Tensor, have: list[tuple[int, int, int, int]], want: list[tuple[int, int, int, int]],
             group=None) -> torch.Tensor:
    """Move a matrix from one block layout to another: group rank r holds block have[r] =
    (row0, row1, col0, col1) of it as x, and gets back block want[r]. Each rank sends each other
    rank the part of its block that the other wants (point-to-point, all posted at once, one
    message per overlapping pair); nothing else is held whole anywhere."""
    rank = dist.get_rank(group)
    r0, r1, c0, c1 = want[rank]
    out = torch.empty((r1 - r0, c1 - c0), dtype=x.dtype, device=x.device)

    def overlap(p, q):
        rr0, rr1, cc0, cc1 = max(p[0], q[0]), min(p[1], q[1]), max(p[2], q[2]), min(p[3], q[3])
        return (rr0, rr1, cc0, cc1) if rr0 < rr1 and cc0 < cc1 else None

    ops, keep = [], []
    for peer in range(len(want)):
        glob = dist.get_global_rank(group, peer) if group is not None else peer
        sent = overlap(have[rank], want[peer])
        got = overlap(have[peer], want[rank])
        if peer == rank:
            if sent:
                h = have[rank]
                out[sent[0] - r0:sent[1] - r0, sent[2] - c0:sent[3] - c0] = \
                    x[sent[0] - h[0]:sent[1] - h[0], sent[2] - h[2]:sent[3] - h[2]]
            continue
        if sent:
            h = have[rank]
            piece = x[sent[0] - h[0]:sent[1] - h[0], sent[2] - h[2]:sent[3] - h[2]].contiguous()
            keep.append(piece)
            ops.append(dist.P2POp(dist.isend, piece, glob, group))
        if got:
            piece = torch.empty((got[1] - got[0], got[3] - got[2]), dtype=x.dtype, device=x.device)
            keep.append((piece, got))
            ops.append(dist.P2POp(dist.irecv, piece, glob, group))
    if ops:
        works = _collective("moving blocks between ranks", lambda: dist.batch_isend_irecv(ops))
        for w in works:
            _collective("moving blocks between ranks", w.wait)
    for item in keep:
        if isinstance(item, tuple):
            piece, (g0, g1, h0, h1) = item
            out[g0 - r0:g1 - r0, h0 - c0:h1 - c0] = piece
    return out


def blocks(total: int, parts: int) -> list[int]:
    """Offsets of `parts` near-equal pieces of `total` (the first total % parts one larger)."""
    q, r = divmod(total, parts)
    return list(itertools.accumulate([0] + [q + (i < r) for i in range(parts)]))


@dataclass(frozen=True)
class RowsLayout:
    """The 1-D algorithm's agreed layout: every rank's rows of A and of B, and N's column panels."""

    rows: list  # M_r per rank
    kb: list  # K_r per rank (B's rows, in rank order)
    n: int
    panels: list  # (n0, n1) over N
    width: int


def layout_1d(a: torch.Tensor, b: torch.Tensor, group=None, panel: int | None = None) -> RowsLayout:
    """Share and check every rank's A rows (M_r × K, all of K) and B rows (K_r × N); cut N into
    panels (default width: the cost model's fastest, rounded up to a multiple of 8; all of N alone)."""
    world = dist.get_world_size(group)
    if a.dim() != 2 or b.dim() != 2:
        raise DistributedError(f"rank {dist.get_rank()}: blocks must be 2-D; got A {tuple(a.shape)}, B {tuple(b.shape)}")
    meta = gather_meta([_code(a), _code(b), int(a.is_cuda), a.shape[0], a.shape[1], b.shape[0], b.shape[1]], group)
    errs = _common_errors(meta)
    k = sum(m[5] for m in meta)
    errs += [f"rank {r}: A has {m[4]} columns, but B's rows over the ranks sum to K = {k}"
             for r, m in enumerate(meta) if m[4] != k]
    errs += [f"rank {r}: B has {m[6]} columns, rank 0's {meta[0][6]}" for r, m in enumerate(meta) if m[6] != meta[0][6]]
    _refuse(errs)
    n = meta[0][6]
    width = panel or (_model_panel(sum(m[3] for m in meta), n, k, (world, 1), a) if world > 1 else max(n, 1))
    width += -width % 8 if width > 8 else 0  # column panels whose starts keep 16-byte alignment
    panels = [(n0, min(n, n0 + width)) for n0 in range(0, n, width)]
    return RowsLayout([m[3] for m in meta], [m[5] for m in meta], n, panels, width)


def run_1d(a: torch.Tensor, b: torch.Tensor, lay: RowsLayout, group=None, communicate: bool = True) -> torch.Tensor:
    """C's rows of this rank, a column panel at a time: panel p of B (all of K, the panel's
    columns) is all-gathered from every rank's rows of it, and C[:, panel] = A_r @ B_panel is one
    GEMM over all of K, written once in the output dtype (no partial sums to keep). Panel p + 1's
    all-gather travels while panel p is multiplied (two buffers); on a GPU the ranks' own pieces
    are packed on a side stream, off the GEMMs' way. communicate=False: the same packing and
    products with nothing sent (what dist-bench times as the products alone)."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    k, kmax, n = sum(lay.kb), max(lay.kb), lay.n
    c = torch.empty((a.shape[0], n), dtype=a.dtype, device=a.device)
    if k == 0 or not lay.panels:
        return c.zero_()
    even = all(x == kmax for x in lay.kb)
    w = lay.width
    # two of each: panel p + 1's own piece (padded to kmax rows) and gathered panel, while p is used
    packed = [torch.zeros(kmax * w, dtype=b.dtype, device=b.device) for _ in range(2)]
    gathered = [torch.empty(world * kmax * w, dtype=b.dtype, device=b.device) for _ in range(2)]
    keep = None if even else torch.cat([torch.arange(j * kmax, j * kmax + lay.kb[j], device=b.device)
                                        for j in range(world)])
    compute = torch.cuda.current_stream(b.device) if b.is_cuda else None
    side = torch.cuda.Stream(device=b.device) if b.is_cuda and communicate and world > 1 else None
    if side is not None:
        for x in packed + gathered:
            x.record_stream(side)

    def post(p: int):
        """Pack panel p's own piece and issue its all-gather; (gathered panel, work)."""
        n0, n1 = lay.panels[p]
        pw = n1 - n0
        mine = packed[p % 2][:kmax * pw].view(kmax, pw)
        out = gathered[p % 2][:world * kmax * pw].view(world * kmax, pw)
        if side is None:
            mine[:lay.kb[rank]].copy_(b[:, n0:n1])
            if not (communicate and world > 1):
                return out, None
            return out, _collective(f"panel {p}: the all-gather of B's columns {n0}:{n1}",
                                    lambda: _ALL_GATHER(out, mine, group=group, async_op=True))
        # the buffers were last used by panel p - 2's all-gather and panel p - 2's GEMM, both
        # ordered before what the compute stream holds now
        side.wait_stream(compute)
        with torch.cuda.stream(side):
            mine[:lay.kb[rank]].copy_(b[:, n0:n1])
            return out, _collective(f"panel {p}: the all-gather of B's columns {n0}:{n1}",
                                    lambda: _ALL_GATHER(out, mine, group=group, async_op=True))

    pending = post(0)
    for p, (n0, n1) in enumerate(lay.panels):
        out, work = pending
        if p + 1 < len(lay.panels):
            pending = post(p + 1)  # in flight while panel p is multiplied
        if work is not None:
            _collective(f"panel {p}: waiting for its all-gather", work.wait)
        panel_b = out if even else out.index_select(0, keep)
        if a.shape[0]:
            _product(a, panel_b, c[:, n0:n1])
    return c


def _product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out = a @ b on tilegemm's kernel (out a column panel of C: a strided view)."""
    import tilegemm

    tilegemm.matmul(a, b, out=out)


def matmul_1d(a: torch.Tensor, b: torch.Tensor, group=None, b_sharded: bool = True,
              panel: int | None = None) -> torch.Tensor:
    """C's rows of this rank = A's rows of this rank @ B. a: this rank's rows of A (all of K);
    b: this rank's rows of B (its slice of K, in rank order) when b_sharded, else all of B. The
    1-D algorithm (run_1d): B all-gathered a column panel at a time, overlapped with the GEMMs."""
    if b_sharded:
        return run_1d(a, b, layout_1d(a, b, group, panel), group)
    import tilegemm

    meta = gather_meta([_code(a), _code(b), int(a.is_cuda), a.shape[0], a.shape[1], b.shape[0], b.shape[1]], group)
    errs = _common_errors(meta)
    errs += [f"rank {r}: B is {m[5]}×{m[6]}, rank 0's {meta[0][5]}×{meta[0][6]} (a replicated B is the same everywhere)"
             for r, m in enumerate(meta) if m[5:7] != meta[0][5:7]]
    errs += [f"rank {r}: A has {m[4]} columns, B has {m[5]} rows" for r, m in enumerate(meta) if m[4] != m[5]]
    _refuse(errs)
    if a.shape[0] == 0 or a.shape[1] == 0:
        return torch.zeros((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    return tilegemm.matmul(a, b)
