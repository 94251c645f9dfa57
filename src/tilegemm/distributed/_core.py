"""The engine: SUMMA on a pr × pc process grid, of which the 1-D algorithm is the pr = P, pc = 1 case.

Rank r = i·pc + j of the group holds block (i, j) of A (M_i × KA_j), of B (KB_i × N_j) and of C
(M_i × N_j). K is cut into panels at the union of A's and B's K boundaries (and again to at most
`panel` wide, so that there are panels to overlap); for panel p the rank of grid row i that owns
A's columns broadcasts them along grid row i, the rank of grid column j that owns B's rows
broadcasts them down grid column j, and each rank adds A_panel @ B_panel into its C block. Panel
p + 1's broadcasts are issued before panel p's product (two buffers each), so they travel while it
computes; a broadcast within a group of one is no broadcast. With pc = 1, A's K is whole on every
rank and only B's panels move: the 1-D algorithm.
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist

from ..errors import TileGemmError

_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
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


def check_grid(meta: list[list[int]], pr: int, pc: int) -> tuple[list, list, list, list]:
    """Every rank checks the same gathered layout, so all refuse it together or none does.
    meta[r] = [dtype A, dtype B, device type, A rows, A cols, B rows, B cols]. Returns (M_i per grid
    row, N_j per grid column, A's K sizes per grid column, B's K sizes per grid row)."""
    errs = []
    dev = {m[2] for m in meta}
    if len(dev) > 1:
        errs.append("ranks hold their blocks on different kinds of device")
    r0 = meta[0]
    for r, m in enumerate(meta):
        for which, code in (("A", m[0]), ("B", m[1])):
            if code < 0:
                errs.append(f"rank {r}: {which} is of a dtype this product does not take (float16, bfloat16, "
                            "float32, float64)")
            elif code != r0[0]:
                errs.append(f"rank {r}: {which} is {_describe(code)}, rank 0's A is {_describe(r0[0])}")
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
    if errs:
        raise DistributedError("the shards do not form one product: " + "; ".join(errs[:6])
                               + (f" (and {len(errs) - 6} more)" if len(errs) > 6 else ""))
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


def _accumulate(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """acc += a @ b on tilegemm's kernel (FP32 accumulation of 16-bit inputs on the tensor cores)."""
    import tilegemm

    if a.shape[0] == 0 or b.shape[1] == 0 or a.shape[1] == 0:
        return
    if acc.is_cuda and a.dtype in (torch.float16, torch.bfloat16):
        tilegemm.gemm(a, b, out_dtype=torch.float32, beta=1.0, c=acc)
    else:
        acc += tilegemm.matmul(a, b)


def summa(a: torch.Tensor, b: torch.Tensor, grid: tuple[int, int], group=None, panel: int | None = None) -> torch.Tensor:
    """C block (i, j) = sum over K of A (row block i) @ B (column block j), on the pr × pc grid of
    `group`'s ranks (rank r = i·pc + j). a: this rank's block of A, b: its block of B (see the
    module docstring); returns its block of C. panel: the widest K panel (default: K / (4·max(pr, pc)),
    at least 256)."""
    pr, pc = int(grid[0]), int(grid[1])
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if pr * pc != world:
        raise DistributedError(f"grid {pr}×{pc} has {pr * pc} places for a group of {world} ranks")
    if a.dim() != 2 or b.dim() != 2:
        raise DistributedError(f"rank {dist.get_rank()}: blocks must be 2-D; got A {tuple(a.shape)}, B {tuple(b.shape)}")
    meta = gather_meta([_code(a), _code(b), int(a.is_cuda), a.shape[0], a.shape[1], b.shape[0], b.shape[1]], group)
    rows, ncols, ka, kb = check_grid(meta, pr, pc)
    i, j = divmod(rank, pc)
    k_total = sum(ka)
    width = panel or (max(256, -(-k_total // (4 * max(pr, pc)))) if world > 1 else k_total)  # alone: one panel
    row_groups, col_groups = _grid_groups(group, pr, pc)
    acc_dtype = torch.float32 if a.dtype in (torch.float16, torch.bfloat16) else a.dtype
    acc = torch.zeros((rows[i], ncols[j]), dtype=acc_dtype, device=a.device)
    a_off = list(itertools.accumulate([0] + ka))
    b_off = list(itertools.accumulate([0] + kb))
    panels = _panels(ka, kb, width)
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
            pa = a[:, k0 - a_off[ja]:k1 - a_off[ja]]
            if row_groups[i] is not None:
                pa = pa.contiguous()  # what is sent must be contiguous
        else:
            pa = bufs_a[p % 2][:rows[i] * w].view(rows[i], w)
        if row_groups[i] is not None and rows[i]:
            works.append(_collective(f"panel {p}: the broadcast of A's columns {k0}:{k1} along grid row {i}",
                                     lambda: dist.broadcast(pa, group=row_groups[i], group_src=ja, async_op=True)))
        if ib == i:
            pb = b[k0 - b_off[ib]:k1 - b_off[ib], :]
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
        _accumulate(acc, pa, pb)
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


def matmul_1d(a: torch.Tensor, b: torch.Tensor, group=None, b_sharded: bool = True,
              panel: int | None = None) -> torch.Tensor:
    """C's rows of this rank = A's rows of this rank @ B. a: this rank's rows of A (all of K);
    b: this rank's rows of B (its slice of K, in rank order) when b_sharded, else all of B. The
    1-D algorithm: SUMMA on a P × 1 grid (only B's panels move)."""
    world = dist.get_world_size(group)
    if b_sharded:
        return summa(a, b, (world, 1), group, panel)
    import tilegemm

    meta = gather_meta([_code(a), _code(b), int(a.is_cuda), a.shape[0], a.shape[1], b.shape[0], b.shape[1]], group)
    errs = [f"rank {r}: B is {m[5]}×{m[6]}, rank 0's {meta[0][5]}×{meta[0][6]} (a replicated B is the same everywhere)"
            for r, m in enumerate(meta) if m[5:7] != meta[0][5:7]]
    errs += [f"rank {r}: A has {m[4]} columns, B has {m[5]} rows" for r, m in enumerate(meta) if m[4] != m[5]]
    errs += [f"rank {r}: A is {_describe(m[0])}, B {_describe(m[1])}" for r, m in enumerate(meta) if m[0] != m[1]]
    if errs:
        raise DistributedError("the shards do not form one product: " + "; ".join(errs[:6]))
    if a.shape[0] == 0:
        return torch.empty((0, b.shape[1]), dtype=a.dtype, device=a.device)
    return tilegemm.matmul(a, b)
