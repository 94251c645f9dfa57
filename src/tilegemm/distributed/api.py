"""DTensors in and out: the placements and the mesh say which algorithm runs (tilegemm.distributed's docstring)."""

from __future__ import annotations

import functools

import torch

from ._core import (AGREE_CALL, ROWS_CALL, DistributedError, G, Team, blocks, gather_meta, matmul_1d, mesh_team,
                    relayout, summa)


def _chosen_grid(m: int, n: int, k: int, p: int, dtype, cuda: bool = False) -> tuple[int, int]:
    from .. import env
    from ._core import _has_symm_mem, _transport
    from .costmodel import choose, shipped

    # the shipped H200 rates and 8 GPUs a host on every rank, whatever its GPU: all ranks must
    # choose the same grid (layout's metadata check refuses, on every rank, ranks that did not);
    # on GPUs of one host the 1-D engine's panels take the copy engines (layout_1d's peer transport)
    one_host = env.local_world_size(0, bad=0) >= p  # (not a number: refused on every rank in the blocks' metadata)
    peer = cuda and one_host and _transport(None) != "nccl" and _has_symm_mem()
    return tuple(choose(m, n, k, p, shipped(8), dtype.itemsize, peer=peer)["grid"])


def _grid_on_rows(a_rows: torch.Tensor, b_rows: torch.Tensor, m: int, n: int, k: int, grid, who: Team, panel):
    """SUMMA for operands held by rows (A's rows and B's rows, in place order): each rank's block
    of A and B is cut out by `relayout`, the product runs on the grid, and C's blocks go back to
    the rows A had (so that C is Shard(0) exactly where A was)."""
    pr, pc = grid
    meta = gather_meta([a_rows.shape[0], b_rows.shape[0]], who, ROWS_CALL)
    granks = [x[G] for x in meta]
    a_off, b_off = [0], [0]
    for x in meta:
        a_off.append(a_off[-1] + x[1])
        b_off.append(b_off[-1] + x[2])
    p = pr * pc
    mo, no, ka, kb = blocks(m, pr), blocks(n, pc), blocks(k, pc), blocks(k, pr)
    at = [divmod(r, pc) for r in range(p)]
    a_blk = relayout(a_rows, [(a_off[r], a_off[r + 1], 0, k) for r in range(p)],
                     [(mo[i], mo[i + 1], ka[j], ka[j + 1]) for i, j in at], who, granks)
    b_blk = relayout(b_rows, [(b_off[r], b_off[r + 1], 0, n) for r in range(p)],
                     [(kb[i], kb[i + 1], no[j], no[j + 1]) for i, j in at], who, granks)
    c_blk = summa(a_blk, b_blk, grid, who, panel)
    return relayout(c_blk, [(mo[i], mo[i + 1], no[j], no[j + 1]) for i, j in at],
                    [(a_off[r], a_off[r + 1], 0, n) for r in range(p)], who, granks)


_PLACED = {-1: "Replicate()", -2: "Partial()", -3: "another placement"}


def _placements(x) -> list[int]:
    """x's placement on each mesh dimension as an integer: Shard(d) d, Replicate() -1, Partial() -2,
    any other (_StridedShard, …) -3."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    return [p.dim if type(p) is Shard else -1 if isinstance(p, Replicate) else -2 if isinstance(p, Partial) else -3
            for p in x.placements]


def _shape_text(dims: int, rows: int, cols: int) -> str:
    return f"{rows}×{cols}" if dims == 2 else f"{dims}-D"


# _agree's metadata of a rank, after its global rank (G): whether a grid was named and the grid, the cost
# model's grid, the panel (_panel_code), the product's shape, why A and B cannot be multiplied (NOT_ONE_MESH,
# NOT_A_PRODUCT, NOT_DTENSORS; 0: they can), A's and B's dimensions and first two sizes, A's and B's dtypes
# (_dtype_code); then A's and B's placements, a mesh dimension each (_placements)
ASKED, GRID_R, GRID_C, CHOSEN_R, CHOSEN_C, PANEL, PANEL_SET, M, N, K, BAD = range(1, 12)
A_DIMS, B_DIMS, DTYPES, PLACED_AT = 12, 15, 18, 20  # (A's and B's three values each; A's and B's dtypes)
NOT_ONE_MESH, NOT_A_PRODUCT, NOT_DTENSORS = 1, 2, 3


@functools.cache
def _dtype_names() -> list[str]:
    return sorted({str(v) for v in vars(torch).values() if isinstance(v, torch.dtype)})


def _dtype_code(x) -> int:
    """x's dtype as an integer every rank reads alike (the same torch on every rank)."""
    names = _dtype_names()
    return names.index(str(x.dtype)) if isinstance(x, torch.Tensor) and str(x.dtype) in names else -1


def _dtype_text(code: int) -> str:
    return _dtype_names()[code].removeprefix("torch.") if code >= 0 else "a dtype torch does not name"


def _agree(a, b, grid, panel, who: Team) -> tuple[int, int] | None:
    """The grid every rank runs (the one named, else the cost model's choice where the product needs
    one, of place 0: None for a 1-D mesh's replicated B), once one all-gather has shown that every
    rank was called with A and B that multiply on one mesh, and with the same grid, panel,
    placements and shapes. The routes below differ in their collectives (a redistribution, the
    blocks' moves, the engines' own metadata of other lengths): a rank that refused alone, or took
    another route, would leave the others waiting in a collective it never entered, or meet them
    in all-gathers of different lengths. Every rank refuses together instead, naming the rank."""
    from torch.distributed.tensor import DTensor, Replicate

    from ._core import NOT_A_GRID, _grid_ints, _panel_code

    both = isinstance(a, DTensor) and isinstance(b, DTensor)
    mesh = (a if isinstance(a, DTensor) else b).device_mesh
    nd = mesh.ndim
    dims = lambda x: ([x.dim(), *(x.shape[:2] if x.dim() == 2 else (0, 0))]  # noqa: E731
                      if isinstance(x, torch.Tensor) else [-1, 0, 0])
    bad = (NOT_DTENSORS if not both else NOT_ONE_MESH if b.device_mesh != mesh else
           0 if a.dim() == b.dim() == 2 and a.shape[1] == b.shape[0] else NOT_A_PRODUCT)
    m, n, k = (a.shape[0], b.shape[1], a.shape[1]) if not bad else (0, 0, 0)
    named = _grid_ints(grid) if grid is not None else (0, 0)
    chosen = (0, 0)
    if not bad and grid is None and nd == 1 and tuple(b.placements) != (Replicate(),):
        chosen = _chosen_grid(m, n, k, mesh.size(), a.dtype, mesh.device_type == "cuda")
    # (a plain tensor, or B on another mesh: of A's mesh's length)
    pa = _placements(a) if isinstance(a, DTensor) else [-3] * nd
    pb = _placements(b) if not bad else [-3] * nd
    meta = gather_meta([int(grid is not None), *named, *chosen, *_panel_code(panel), m, n, k, bad, *dims(a), *dims(b),
                        _dtype_code(a), _dtype_code(b), *pa, *pb], who, AGREE_CALL)
    refusing = [x for x in meta if x[BAD]]
    if refusing:
        shapes = lambda x: f"A {_shape_text(*x[A_DIMS:A_DIMS + 3])} and B {_shape_text(*x[B_DIMS:B_DIMS + 3])}"  # noqa: E731
        said = [f"rank {x[G]}: " + ("A and B are on different device meshes" if x[BAD] == NOT_ONE_MESH else
                                     "A or B is not a DTensor (tilegemm.distributed.matmul takes two DTensors; for "
                                     "plain local shards use matmul_1d or summa)" if x[BAD] == NOT_DTENSORS else
                                     shapes(x) + " do not multiply (2-D, A's columns = B's rows)") for x in refusing]
        text = "; ".join(said[:6]) + (f" (and {len(said) - 6} more)" if len(said) > 6 else "")
        raise (TypeError if all(x[BAD] == NOT_DTENSORS for x in refusing) else DistributedError)(text)
    grid_text = lambda x: ("no grid" if not x[ASKED] else "a grid that is not two integers"  # noqa: E731
                           if x[GRID_R] == NOT_A_GRID else f"grid {x[GRID_R]}×{x[GRID_C]}")
    panel_text = lambda x: ("default", str(x[PANEL]), "(not an integer)")[x[PANEL_SET]]  # noqa: E731
    placed = lambda codes: ", ".join(f"Shard(dim={c})" if c >= 0 else _PLACED[c] for c in codes)  # noqa: E731
    first, errs = meta[0], []
    for x in meta[1:]:
        r, r0 = x[G], first[G]
        if x[ASKED:GRID_C + 1] != first[ASKED:GRID_C + 1]:
            errs.append(f"rank {r} was called with {grid_text(x)}, rank {r0} with {grid_text(first)}")
        if x[PANEL:PANEL_SET + 1] != first[PANEL:PANEL_SET + 1]:
            errs.append(f"rank {r} was called with panel {panel_text(x)}, rank {r0} with panel {panel_text(first)}")
        if x[M:K + 1] != first[M:K + 1]:
            errs.append(f"rank {r}: A is {x[M]}×{x[K]} and B {x[K]}×{x[N]}, rank {r0}'s {first[M]}×{first[K]} "
                        f"and {first[K]}×{first[N]}")
        for which, at in (("A", DTYPES), ("B", DTYPES + 1)):  # (DTensor's redistribution of them aborted a rank)
            if x[at] != first[at]:
                errs.append(f"rank {r}: {which} is {_dtype_text(x[at])}, rank {r0}'s {_dtype_text(first[at])}")
        for which, at in (("A", PLACED_AT), ("B", PLACED_AT + nd)):
            if x[at:at + nd] != first[at:at + nd]:
                errs.append(f"rank {r}: {which} is {placed(x[at:at + nd])}, rank {r0}'s {placed(first[at:at + nd])}")
    if errs:
        raise DistributedError("the ranks called tilegemm.distributed.matmul differently: " + "; ".join(errs[:6])
                               + (f" (and {len(errs) - 6} more)" if len(errs) > 6 else ""))
    if grid is not None:
        return named
    chosen = first[CHOSEN_R:CHOSEN_C + 1]
    return tuple(chosen) if chosen != [0, 0] else None


def matmul(a, b, *, grid: tuple[int, int] | None = None, panel: int | None = None):
    """A @ B for DTensors A (M×K) and B (K×N) on one device mesh; returns a DTensor.

    1-D mesh of P ranks: C is Shard(0). With B Replicate() (and no grid named) each rank multiplies
    its rows of A by B, with nothing to send. Otherwise the algorithm runs on a pr × pc grid of the
    mesh's ranks (placed by their mesh coordinates): `grid`, or the one the cost model
    (tilegemm.distributed.costmodel) predicts fastest for this shape. (P, 1) is the 1-D algorithm
    on A Shard(0) and B Shard(0); another grid cuts each rank's blocks out of those rows
    (point-to-point), runs SUMMA, and sends C's blocks back to A's rows.
    2-D mesh (pr × pc): SUMMA on the mesh's grid, over the mesh's own row and column groups, with
    A and B both Shard(0), Shard(1); C is Shard(0), Shard(1).
    Placements other than those are redistributed first (DTensor's collectives)."""
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

    if not isinstance(a, DTensor) and not isinstance(b, DTensor):
        raise TypeError("tilegemm.distributed.matmul takes two DTensors; for plain local shards use "
                        "matmul_1d or summa")
    # (one DTensor and one plain tensor: refused in _agree, on every rank of the DTensor's mesh together, not on
    # this rank alone while the others wait in its all-gather)
    mesh = (a if isinstance(a, DTensor) else b).device_mesh
    if mesh.ndim not in (1, 2):  # (before mesh_team, which places ranks on one or two mesh dimensions)
        raise DistributedError(f"a {mesh.ndim}-D device mesh: 1-D (rows) or 2-D (SUMMA) meshes only")
    who = mesh_team(mesh)
    asked = grid
    grid = _agree(a, b, grid, panel, who)  # (also refuses, on every rank, A and B that do not multiply)
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    if asked is not None:
        from ._core import NOT_A_GRID

        if NOT_A_GRID in grid:
            raise DistributedError(f"grid {asked!r}: two positive integers (grid rows, grid columns)")
    if mesh.ndim == 1:
        p = mesh.size()
        if asked is not None and (grid[0] * grid[1] != p or min(grid) < 1):
            raise DistributedError(f"grid {tuple(grid)} does not hold the mesh's {p} ranks (pr × pc = {p})")
        a1 = a if tuple(a.placements) == (Shard(0),) else a.redistribute(mesh, [Shard(0)])
        if asked is None and tuple(b.placements) == (Replicate(),):
            # B's gradient on a rank, A_r^T dC_r, is its part of the sum over the ranks: Partial(),
            # as DTensor's own product gives it (declared Replicate(), each rank would keep its own part)
            c = matmul_1d(a1.to_local(), b.to_local(grad_placements=[Partial()]), group=who, b_sharded=False,
                          panel=panel)
        else:
            b1 = b if tuple(b.placements) == (Shard(0),) else b.redistribute(mesh, [Shard(0)])
            if grid[1] == 1:
                c = matmul_1d(a1.to_local(), b1.to_local(), group=who, panel=panel)
            else:
                c = _grid_on_rows(a1.to_local(), b1.to_local(), m, n, k, grid, who, panel)
        return DTensor.from_local(c, mesh, [Shard(0)], shape=torch.Size((m, n)), stride=(n, 1))
    if mesh.ndim == 2:
        if asked is not None and tuple(grid) != tuple(mesh.shape):
            raise DistributedError(f"grid {tuple(grid)} is not the 2-D mesh's {tuple(mesh.shape)}: on a 2-D mesh "
                                   "the mesh is the grid")
        want = (Shard(0), Shard(1))
        a2 = a if tuple(a.placements) == want else a.redistribute(mesh, list(want))
        b2 = b if tuple(b.placements) == want else b.redistribute(mesh, list(want))
        c = summa(a2.to_local(), b2.to_local(), tuple(mesh.shape), group=who, panel=panel)
        return DTensor.from_local(c, mesh, list(want), shape=torch.Size((m, n)), stride=(n, 1))
