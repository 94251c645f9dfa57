"""The engines: SUMMA on a pr × pc process grid, and the 1-D algorithm on A's and B's rows.

SUMMA: the rank at grid place (i, j) (place i·pc + j) holds block (i, j) of A (M_i × KA_j), of B
(KB_i × N_j) and of C (M_i × N_j). K is cut into panels at the union of A's and B's K boundaries
(and again to at most `panel` wide, so that there are panels to overlap); for panel p the rank of
grid row i that owns A's columns broadcasts them along grid row i, the rank of grid column j that
owns B's rows broadcasts them down grid column j, and each rank adds A_panel @ B_panel into its C
block (kept in FP32 for 16-bit inputs, written by the first panel). Panel p + 1's broadcasts are
issued before panel p's product (two buffers each), so they travel while it computes; a broadcast
within a group of one is no broadcast.

On GPUs of one host (16-bit operands, or transport="peer"), SUMMA's broadcasts become the copy
engines' reads (`_run_summa_peer`): the rank gathers all of A's row block i (M_i × K) and B's
column block j (K × N_j), each in a mapped buffer, from the ranks of its grid row and column, and
C_ij = A_i @ B_j is multiplied over all of K in growing steps while the rest lands: no FP32
partial sums, no SM taken from the GEMMs.

1-D: the rank at place r holds A's rows r (all of K) and B's rows r (its slice of K, in place
order). N is cut into column panels; panel p of B is all-gathered (every rank's rows of those
columns), and C_r[:, panel] = A_r @ B_panel is one GEMM over all of K, written once in the output
dtype: no partial sums, no accumulator. Panel p + 1's all-gather travels while panel p is
multiplied. (SUMMA on a P × 1 grid computes the same product with K panels and an FP32
accumulator that every panel reads and writes again: more memory traffic and twice C's memory.)

Places and ranks: a `Team` says which groups the ranks of a product share and where each rank
sits. By default the places are the ranks of one process group in its order; a DeviceMesh gives
its own coordinates and groups (its order need not be the ranks' order). Every rank learns every
place's global rank from the one metadata all-gather, and all communication names ranks
globally, so no ordering of a group is assumed.

Before any data moves, that all-gather shares every rank's blocks' shapes, dtypes, device, whether
its local GEMM runs that dtype there, the engine it called (SUMMA, or 1-D with B's rows or all of
B) and the arguments it was called with (grid, panel, transport), and every rank checks all of
them: a layout that does not form one product, an argument out of range (a grid entry or a panel
that is not positive), or ranks that disagree, are refused on every rank together, naming the
rank. A collective that breaks afterwards raises DistributedError where the backend reports it:
gloo does on every surviving rank; NCCL's own watchdog ends the processes when the group's
timeout passes (PyTorch's default TORCH_NCCL_ASYNC_ERROR_HANDLING), so a failed product is never
a hang past that timeout and never a partial C presented as whole.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import operator
import os
import warnings
import weakref
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .. import dispatch, env, multigpu
from ..errors import ConfigError, DeviceError, DistributedError
from ._steps import peer_cuts, summa_blocks, summa_steps

_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.13
_GROUPS: dict = {}  # (parent's name, member lists) -> this rank's process group, made once (a collective)
_GROUPS_WORLD: list = [None]  # the default group _GROUPS' groups belong to


@atexit.register
def _release_groups() -> None:
    """Drop tilegemm's references to its groups while the interpreter is whole: a gloo group that
    torch has shut down is otherwise destroyed during finalization, where its threads can abort."""
    _GROUPS.clear()
    _GROUPS_WORLD[0] = None
    _PEER.clear()


def _collective(what: str, fn):
    try:
        return fn()
    except DistributedError:
        raise
    except Exception as e:  # noqa: BLE001  (gloo/NCCL raise RuntimeError, DistBackendError, …)
        raise DistributedError(f"{what} failed on rank {dist.get_rank()}: {type(e).__name__}: "
                               f"{str(e).splitlines()[0][:300]}; the product is incomplete and no part of C "
                               "is returned") from e


# ---- who is where -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Team:
    """The ranks of one product. stages: the groups the metadata is all-gathered through, in
    turn (one group, or a 2-D mesh's row groups then its column groups; together, every rank of
    the product); pos: this rank's place; parent: the group grid rows and columns are split from
    when no mesh gives them (None: the default group); axes: a 2-D mesh's (row group, column group)."""

    stages: tuple
    pos: int
    parent: object = None
    axes: tuple | None = None


def team(group=None) -> Team:
    """The ranks of `group` (None: the default group), placed in the group's rank order."""
    return group if isinstance(group, Team) else Team((group,), dist.get_rank(group), group)


def mesh_team(mesh) -> Team:
    """A DeviceMesh's ranks, placed by their mesh coordinates (row-major, as DTensor places its
    shards), with the mesh's groups."""
    if mesh.ndim == 1:
        g = mesh.get_group(0)
        return Team((g,), mesh.get_coordinate()[0], g)
    i, j = mesh.get_coordinate()
    rows, cols = mesh.get_group(1), mesh.get_group(0)  # same i (a grid row), same j (a grid column)
    return Team((rows, cols), i * mesh.shape[1] + j, None, (rows, cols))


def _meta_device(group):
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else torch.device("cpu")


# the metadata every rank shares: its global rank, then these, by place
G, DA, DB, DEV, AR, AC, BR, BC, PR, PC, PANEL, LOCAL, FREE, PEER, TRANSPORT, HOST, HELD = range(17)
ALGO, RUNS, PANEL_SET = range(17, 20)  # the engine called (ALGOS), whether its GEMM runs, _panel_code's kind
GRAD = 20  # 1: A or B requires grad (with grad mode on): the engines' out= GEMMs record no gradient; 2: A or B is
# a forward-mode AD dual tensor or a torch.func transform's (dispatch.transformed): no tangent is carried
DT = 21  # 1: A or B is a DTensor: its shape is the global one, not the block's (the engines take local blocks)
LAYOUT = 22  # bits (_layout_code): A not dense (1), B not dense (2), A with no memory (the meta device: 4), B on
# another device than A (8); refused in the shared check, where each rank's own refusal left the others waiting
SPARSE_A, SPARSE_B, META_A, B_ELSEWHERE = 1, 2, 4, 8
NOT_A_GRID = -(2**62)  # PR and PC of a grid argument that is not two integers (_grid_ints)
# what a rank was called as (ALGO): ranks that call different engines would wait in different collectives
ALGOS = ("summa", "matmul_1d with b_sharded=True", "matmul_1d with b_sharded=False")
SUMMA, ROWS_1D, REPLICATED_1D = range(3)


META_WIDTH = 48  # integers a place's metadata row takes, whatever call made it (CALLS): one size on every rank
CALLS = ("matmul_1d or summa", "tilegemm.distributed.matmul", "tilegemm.distributed.matmul's row counts")
ENGINE_CALL, AGREE_CALL, ROWS_CALL = range(3)


def gather_meta(values: list[int], who: Team, call: int = ENGINE_CALL) -> list[list[int]]:
    """Every place's [global rank, *values] (the same number of values on every rank that made the
    same call), in place order. Rows are META_WIDTH long and say which call made them (CALLS): ranks
    that made different ones (one rank's distributed.matmul beside another's matmul_1d) would gather
    rows of different lengths, which gloo takes without a word and each rank reads as something
    else; they are refused on every rank instead."""
    row = [who.pos, dist.get_rank(), call, *values]
    assert len(row) <= META_WIDTH, len(row)  # (a row that grew past the width: widen it)
    rows = torch.tensor([row + [0] * (META_WIDTH - len(row))], dtype=torch.int64, device=_meta_device(who.stages[0]))
    for g in who.stages:
        out = torch.empty((dist.get_world_size(g) * rows.shape[0], rows.shape[1]), dtype=rows.dtype, device=rows.device)
        _collective("sharing the shards' shapes", lambda: _ALL_GATHER(out, rows, group=g))  # noqa: B023 (run at once)
        rows = out
    got = sorted(rows.tolist())
    calls = _by([[r[1], r[2]] for r in got], lambda r: r[1], lambda r: True)
    if len(calls) > 1:
        raise DistributedError("the ranks made different calls: " + "; ".join(
            f"{_ranks(rs)} called {CALLS[c] if 0 <= c < len(CALLS) else 'another'}" for c, rs in sorted(calls.items())))
    if [r[0] for r in got] != list(range(len(got))):
        raise DistributedError(f"the ranks' places are not 0 … {len(got) - 1}: {[r[0] for r in got]}")
    return [[r[1], *r[3:3 + len(values)]] for r in got]


def _describe_meta(a: torch.Tensor, b: torch.Tensor, grid=(0, 0), panel: int | None = None,
                   transport: str = "auto", held: int = 0, *, algo: int) -> list[int]:
    """held: bytes of the peer transport's mapped buffers this rank keeps for the call's group and
    dtype (a product reuses them, or frees them before it maps larger ones); algo: what the rank
    was called as (ALGOS). Nothing here raises on a bad grid or panel: a rank that refused alone
    would leave the others waiting in this all-gather, so they are shared and checked there."""
    shape = lambda x: list(x.shape) if x.dim() == 2 else [-1, -1]  # noqa: E731
    free = torch.cuda.mem_get_info(a.device)[0] >> 20 if a.is_cuda else 0  # MiB: what buffers may take
    width, given = _panel_code(panel)
    if dispatch.transformed(a) or dispatch.transformed(b):  # (the 1-D loop gathers B's values into plain buffers:
        grad = 2  # a dual B's tangent would be dropped without a word)
    else:
        grad = int(torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))
    return [_code(a), _code(b), int(a.is_cuda), *shape(a), *shape(b), *_grid_ints(grid), width,
            env.local_world_size(0, bad=-1), int(free), int(a.is_cuda and _has_symm_mem()),
            TRANSPORTS.index(transport) if transport is not None else -1, _host_id(), held >> 20, algo,
            int(_code(a) < 0 or _local_product_runs(a.dtype, a.device)), given, grad, int(_dtensor(a) or _dtensor(b)),
            _layout_code(a, b)]


def _layout_code(a: torch.Tensor, b: torch.Tensor) -> int:
    """LAYOUT's bits for a rank's blocks (each a tensor, or _blocks' stand-in for what is not one)."""
    return ((a.layout != torch.strided) * SPARSE_A | (b.layout != torch.strided) * SPARSE_B
            | (a.device.type == "meta") * META_A | (b.device != a.device) * B_ELSEWHERE)


def _dtensor(x) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(x, DTensor)


def _grid_ints(grid) -> tuple[int, int]:
    """(PR, PC) of a grid argument: its two integers, or (NOT_A_GRID, NOT_A_GRID) for anything else
    (a float, one entry or three, None), which the shared check refuses by name."""
    try:
        pr, pc = grid
        if isinstance(pr, bool) or isinstance(pc, bool):
            raise TypeError
        return tuple(max(NOT_A_GRID, min(2**62, operator.index(x))) for x in (pr, pc))  # (in an int64)
    except (TypeError, ValueError):
        return NOT_A_GRID, NOT_A_GRID


def _asked(transport) -> tuple[str | None, Exception | None]:
    """(the transport asked for, None) or (None, the error this rank raises once every rank has shared
    its metadata): a rank that refused alone would leave the others waiting in the all-gather."""
    try:
        return _transport(transport), None
    except ValueError as e:  # (ConfigError is one)
        return None, e


def _panel_code(panel) -> tuple[int, int]:
    """(PANEL, PANEL_SET) of a panel argument: (0, 0) for None (the default width), (its value, 1)
    for an integer (0 and negative ones too: the shared check refuses them by value), (0, 2) for
    anything else (a float, a bool)."""
    if panel is None:
        return 0, 0
    if isinstance(panel, bool):
        return 0, 2
    try:
        return max(-2**62, min(2**62, operator.index(panel))), 1  # (in an int64 whatever its size)
    except TypeError:
        return 0, 2


_RUNS: set = set()  # (dtype, device) whose local product a plan has been found for (a refusal is asked again)


def _local_product_runs(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether tilegemm has a kernel for this dtype's local products on this device (float16 and
    bfloat16 run on CUDA GPUs only). Shared in the metadata, so that a dtype no rank can multiply
    is refused on every rank before any data moves: a rank whose first GEMM raised would leave the
    others (those with no rows of A, which multiply nothing) waiting in the next collective."""
    import tilegemm

    if (dtype, device) in _RUNS:
        return True
    probe = torch.empty((1, 1), dtype=dtype, device=device)  # (a plan only: nothing is multiplied)
    try:
        tilegemm.plan(probe, probe)
    except Exception:  # noqa: BLE001  (DTypeError, DeviceError; anything else raised here alone would
        return False  # leave the other ranks in the all-gather: refused on all of them instead)
    _RUNS.add((dtype, device))
    return True


@functools.cache
def _host_id() -> int:
    """This machine, as a number every rank can compare: the kernel's boot id (the host name where
    there is none), hashed to 62 bits."""
    import socket
    import zlib

    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            ident = f.read().strip()
    except OSError:
        ident = b""
    ident = ident or socket.gethostname().encode()
    return (zlib.crc32(ident) << 30 ^ zlib.adler32(ident)) & (2**62 - 1)


@functools.cache
def _has_symm_mem() -> bool:
    """Whether this torch maps other processes' device memory (symmetric memory, torch ≥ 2.5)."""
    try:
        from torch.distributed import _symmetric_memory as symm
    except ImportError:
        return False
    return hasattr(symm, "empty") and hasattr(symm, "rendezvous")


NOT_A_TENSOR = -2  # the dtype code of an argument that is no torch tensor (_blocks' stand-in)


def _code(t: torch.Tensor) -> int:
    if type(t) is _NotATensor:
        return NOT_A_TENSOR
    return _DTYPES.index(t.dtype) if t.dtype in _DTYPES else -1


def _describe(dt_code: int) -> str:
    return str(_DTYPES[dt_code]).removeprefix("torch.") if dt_code >= 0 else "an unsupported dtype"


class _NotATensor(torch.Tensor):
    """The stand-in of an argument that is no torch tensor (a NumPy array, a list): an empty 1-D
    tensor whose dtype code says so, so that its rank shares its metadata like the others and
    every rank refuses it together (its AttributeError was raised on that rank alone, and the
    others waited out the group's timeout in the all-gather)."""


def _blocks(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    """a and b, each that is no torch tensor replaced by a stand-in on the other's device."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a, b
    on = next((x.device for x in (a, b) if isinstance(x, torch.Tensor)), "cpu")
    stand_in = lambda x: x if isinstance(x, torch.Tensor) else torch.empty(0, device=on).as_subclass(_NotATensor)  # noqa: E731
    return stand_in(a), stand_in(b)


def _ranks(rs: list[int]) -> str:
    return f"rank {rs[0]}" if len(rs) == 1 else f"ranks {', '.join(map(str, rs))}"


def _panel_text(m: list[int]) -> str:
    return ("default", str(m[PANEL]), "(not an integer)")[m[PANEL_SET]]


def _grid_text(m: list[int]) -> str:
    return "(not two integers)" if m[PR] == NOT_A_GRID else f"{m[PR]}×{m[PC]}"


def _by(meta: list[list[int]], key, keep) -> dict:
    """{key(m): [global ranks]} over the places m for which keep(m): one error for all the ranks
    that share a fault, not one a rank."""
    out: dict = {}
    for m in meta:
        if keep(m):
            out.setdefault(key(m), []).append(m[G])
    return out


def _common_errors(meta: list[list[int]]) -> list[str]:
    """What every product refuses: blocks not 2-D, dtypes not served, mixed or that no local
    product runs on the ranks' devices, devices of different kinds, a panel that is not a positive
    integer, and ranks called as different engines or with different arguments."""
    errs = []
    if len({m[DEV] for m in meta}) > 1:
        errs.append("ranks hold their blocks on different kinds of device")
    for bit, text in ((SPARSE_A, "A is not a dense (strided) tensor: the products take each rank's dense blocks "
                                 "(x.to_dense())"),
                      (SPARSE_B, "B is not a dense (strided) tensor: the products take each rank's dense blocks "
                                 "(x.to_dense())"),
                      (META_A, "A is on the meta device, with no values to multiply"),
                      (B_ELSEWHERE, "B is on another device than A (each rank's A and B on one device)")):
        for rs in _by(meta, lambda m: 0, lambda m: m[LAYOUT] & bit).values():  # noqa: B023 (run at once)
            errs.append(f"{_ranks(rs)}: {text}")
    for (code, dev), rs in _by(meta, lambda m: (m[DA], m[DEV]),
                               lambda m: m[DA] >= 0 and not m[RUNS] and not m[LAYOUT]).items():
        dt = _describe(code)
        errs.append(f"{_ranks(rs)}: tilegemm has no kernel for {dt} on " + (
            f"the CPU (its {dt} products run on CUDA GPUs): cast every rank's blocks to float32" if not dev else
            "their CUDA device (tilegemm.explain on one of the blocks says why)"))
    for text, rs in _by(meta, _panel_text, lambda m: m[PANEL_SET] == 2 or m[PANEL_SET] == 1 and m[PANEL] < 1).items():
        errs.append(f"{_ranks(rs)} {'was' if len(rs) == 1 else 'were'} called with panel {text}: a panel is a "
                    "positive number of columns (None: the cost model's width)")
    for rs in _by(meta, lambda m: 0, lambda m: m[GRAD] == 2).values():
        errs.append(f"{_ranks(rs)}: A or B is a forward-mode AD dual tensor or a torch.func transform's tensor, and "
                    "the distributed products carry no tangent: call them outside the transform or dual level")
    for rs in _by(meta, lambda m: 0, lambda m: m[GRAD] == 1 and m[ALGO] != REPLICATED_1D).values():
        errs.append(f"{_ranks(rs)}: A or B requires grad, and the distributed products record no gradient: pass "
                    "them detached (.detach()), or call under torch.no_grad()")
    for rs in _by(meta, lambda m: 0, lambda m: m[DT]).values():
        errs.append(f"{_ranks(rs)}: A or B is a DTensor: matmul_1d and summa take each rank's local blocks "
                    "(x.to_local()); tilegemm.distributed.matmul takes DTensors")
    for rs in _by(meta, lambda m: 0, lambda m: m[LOCAL] < 0).values():
        errs.append(f"{_ranks(rs)}: LOCAL_WORLD_SIZE is not a whole number above 0 (torchrun's processes on this "
                    "host: set it as torchrun does, or unset it)")
    for rs in _by(meta, lambda m: 0, lambda m: m[TRANSPORT] < 0).values():
        errs.append(f"{_ranks(rs)} asked for a transport that is not one of {', '.join(TRANSPORTS)} (the argument, "
                    "or TILEGEMM_DIST_TRANSPORT)")
    first = next((m for m in meta if m[DA] >= 0), meta[0])  # (the dtypes compared: the first rank's A of one)
    for m in meta:
        r = m[G]
        if (m[AR] < 0 or m[BR] < 0) and NOT_A_TENSOR not in (m[DA], m[DB]):
            errs.append(f"rank {r}: its blocks are not 2-D")
        for which, code in (("A", m[DA]), ("B", m[DB])):
            if code == NOT_A_TENSOR:
                errs.append(f"rank {r}: {which} is not a torch tensor (the products take each rank's blocks as torch "
                            "tensors: torch.as_tensor(x))")
            elif code < 0:
                errs.append(f"rank {r}: {which} is of a dtype this product does not take (float16, bfloat16, "
                            "float32, float64)")
            elif code != first[DA] and first[DA] >= 0:
                errs.append(f"rank {r}: {which} is {_describe(code)}, rank {first[G]}'s A is {_describe(first[DA])}")
        if m[ALGO] != meta[0][ALGO]:  # (their other arguments mean different things: not compared)
            errs.append(f"rank {r} called {ALGOS[m[ALGO]]}, rank {meta[0][G]} {ALGOS[meta[0][ALGO]]}")
            continue
        if m[PR:PANEL + 1] != meta[0][PR:PANEL + 1] or m[PANEL_SET] != meta[0][PANEL_SET]:
            errs.append(f"rank {r} was called with grid {_grid_text(m)} and panel {_panel_text(m)}, rank "
                        f"{meta[0][G]} with {_grid_text(meta[0])} and {_panel_text(meta[0])}")
        if m[TRANSPORT] != meta[0][TRANSPORT] and min(m[TRANSPORT], meta[0][TRANSPORT]) >= 0:
            errs.append(f"rank {r} asked for transport {TRANSPORTS[m[TRANSPORT]]!r}, rank {meta[0][G]} for "
                        f"{TRANSPORTS[meta[0][TRANSPORT]]!r}")
    return errs


def _comparable(meta: list[list[int]]) -> bool:
    """Whether the ranks' shapes can be checked against each other: every block 2-D, and every
    rank called as the same engine (a B's rows and all of B are not compared), and no DTensor (its
    shape is not its block's)."""
    return all(m[AR] >= 0 and m[BR] >= 0 and not m[DT] for m in meta) and len({m[ALGO] for m in meta}) == 1


def _refuse(errs: list[str]) -> None:
    if errs:
        raise DistributedError("the shards do not form one product: " + "; ".join(errs[:6])
                               + (f" (and {len(errs) - 6} more)" if len(errs) > 6 else ""))


def check_grid(meta: list[list[int]], pr: int, pc: int) -> tuple[list, list, list, list]:
    """Every rank checks the same gathered layout (meta by place: global rank, dtype A, dtype B,
    device, A rows, A cols, B rows, B cols, grid, panel, …), so all refuse it together or none
    does. Returns (M_i per grid row, N_j per grid column, A's K sizes per grid column, B's K
    sizes per grid row)."""
    errs = _common_errors(meta)
    bad = _by(meta, lambda m: (m[PR], m[PC]), lambda m: m[ALGO] == SUMMA and (m[PR] < 1 or m[PC] < 1))
    errs += [f"{_ranks(rs)} {'was' if len(rs) == 1 else 'were'} called with "
             + ("a grid that is not two integers" if g[0] == NOT_A_GRID else f"grid {g[0]}×{g[1]}")
             + ": a grid is a positive number of grid rows × grid columns" for g, rs in bad.items()]
    if len(meta) != pr * pc and not bad:  # (a product of negative entries can equal the world's size)
        errs.append(f"grid {pr}×{pc} has {pr * pc} places for {len(meta)} ranks")
    if bad or len(meta) != pr * pc or not _comparable(meta):
        _refuse(errs)  # no shapes to compare
    at = lambda i, j: meta[i * pc + j]  # noqa: E731
    rows = [at(i, 0)[AR] for i in range(pr)]
    ncols = [at(0, j)[BC] for j in range(pc)]
    ka = [at(0, j)[AC] for j in range(pc)]
    kb = [at(i, 0)[BR] for i in range(pr)]
    for i, j in itertools.product(range(pr), range(pc)):
        m = at(i, j)
        where = f"rank {m[G]} (grid {i},{j})"
        if m[AR] != rows[i]:
            errs.append(f"{where}: A has {m[AR]} rows, rank {at(i, 0)[G]} of the same grid row {rows[i]}")
        if m[AC] != ka[j]:
            errs.append(f"{where}: A has {m[AC]} columns, rank {at(0, j)[G]} of the same grid column {ka[j]}")
        if m[BR] != kb[i]:
            errs.append(f"{where}: B has {m[BR]} rows, rank {at(i, 0)[G]} of the same grid row {kb[i]}")
        if m[BC] != ncols[j]:
            errs.append(f"{where}: B has {m[BC]} columns, rank {at(0, j)[G]} of the same grid column {ncols[j]}")
    if sum(ka) != sum(kb):
        errs.append(f"A's blocks span K = {sum(ka)} (columns {ka} over the grid's columns) but B's span K = {sum(kb)} "
                    f"(rows {kb} over the grid's rows)")
    _refuse(errs)
    return rows, ncols, ka, kb


def _same_world() -> None:
    """Forget the groups and mapped buffers of a default group that was destroyed and made again
    (its groups and rendezvous went with it)."""
    if _GROUPS_WORLD[0] is not dist.group.WORLD:
        _GROUPS.clear()
        _PEER.clear()
        _GROUPS_WORLD[0] = dist.group.WORLD


def _split(parent, lists: list[list[int]]):
    """This rank's group among `lists` (global ranks), made once. From the default group every
    rank makes every group (new_group is collective over all ranks); from another group, its
    ranks split it (an NCCL group bound to a device)."""
    mine = next((lst for lst in lists if dist.get_rank() in lst), None)
    if mine is None or len(mine) == 1:
        return None
    if parent is not None and parent is not dist.group.WORLD and len(mine) == dist.get_world_size(parent):
        # every rank of the group in one grid row or column (a 1 × P or P × 1 grid): the group itself, nothing
        # split (gloo, or a group bound to no device, cannot split one: such grids were refused on it)
        return parent
    _same_world()
    name = getattr(parent, "group_name", "") if parent is not None else ""
    key = (name, tuple(tuple(x) for x in lists))
    if key not in _GROUPS:
        if parent is None or parent is dist.group.WORLD:
            made = {tuple(lst): dist.new_group(lst) for lst in lists if len(lst) > 1}
            _GROUPS[key] = made[tuple(mine)]
        else:
            try:  # (split_group names the ranks by their place in the parent group, not globally)
                ranks = [[dist.get_group_rank(parent, r) for r in lst] for lst in lists]
                _GROUPS[key] = dist.split_group(parent_pg=parent, split_ranks=ranks)
            except Exception as e:  # noqa: BLE001  (gloo, or a group bound to no device)
                raise DistributedError(f"SUMMA on a group other than the default one splits it into grid rows and "
                                       f"columns, which this group cannot do ({type(e).__name__}: "
                                       f"{str(e).splitlines()[0][:200]}); use the default group, or a 2-D DeviceMesh "
                                       "(tilegemm.distributed.matmul on DTensors), whose groups are used") from e
    return _GROUPS[key]


def _grid_groups(who: Team, pr: int, pc: int, granks: list[int]):
    """(this rank's grid-row group, its grid-column group); None for a group of one."""
    if who.axes is not None:
        rows, cols = who.axes
        return (rows if pc > 1 else None), (cols if pr > 1 else None)
    rows = [[granks[i * pc + j] for j in range(pc)] for i in range(pr)]
    cols = [[granks[i * pc + j] for i in range(pr)] for j in range(pc)]
    return _split(who.parent, rows), _split(who.parent, cols)


# ---- SUMMA ----------------------------------------------------------------------------------------


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


def _model_panel(m: int, n: int, k: int, grid, itemsize: int, per_host: int, max_panel: int | None = None,
                 panel: int | None = None) -> tuple[int, bool]:
    """The panel width the cost model predicts fastest for this product (`panel` where the caller
    named one), none wider than max_panel, and whether the 1-D loop's collectives go ahead, beside
    the GEMMs (costmodel.default_panel, with the shipped H200 rates whatever this rank's GPU and
    rank 0's GPUs per host, so that every rank, computing from the same gathered metadata, cuts
    the same panels)."""
    from .costmodel import default_panel

    width, ahead = default_panel(m, n, k, grid, itemsize, per_host or None, max_panel, panel)
    return max(1, width), ahead


def _widest_1d(meta: list[list[int]], n: int, world: int, itemsize: int) -> int | None:
    """The widest 1-D panel whose buffers (two gathered panels and two packed pieces, each K_max
    rows, and the reordered copy a gathered panel may need) fit beside C's rows in 90% of the least
    free device memory over the ranks (None on CPUs)."""
    free = min(m[FREE] for m in meta)
    if free <= 0:
        return None
    kmax, rows = max(m[BR] for m in meta), max(m[AR] for m in meta)
    room = 0.9 * free * 2**20 - rows * n * itemsize
    return max(1024, int(room / ((3 * world + 2) * max(kmax, 1) * itemsize)) // 1024 * 1024)


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
    blocks' sizes, the K panels and every place's global rank."""

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
    granks: list  # global rank of each place
    peer: bool = False  # A_i and B_j gathered whole by the copy engines (_run_summa_peer), not K panels
    bands: tuple = ()  # peer: step s multiplies A_i's rows bands[s]:bands[s + 1] (this rank's)
    cols: tuple = ()  # and B_j's columns cols[s]:cols[s + 1] (summa_blocks)


_SUMMA_KEYS: dict = {}  # (team's groups, grid, device, dtype) -> the mapped pairs' keys its last product used


def _summa_key(who: Team, grid, device, dtype) -> tuple:
    return (tuple(getattr(g, "group_name", "") for g in who.stages), tuple(grid), str(device), dtype)


def layout(a: torch.Tensor, b: torch.Tensor, grid: tuple[int, int], group=None, panel: int | None = None,
           transport: str | None = None) -> Layout:
    """Share every rank's blocks' shapes, dtypes and arguments (one all-gather), check them on
    every rank, and choose how the blocks travel: "peer" (the copy engines gather A_i and B_j
    whole from the grid row's and column's mapped buffers: _run_summa_peer) where every rank is a
    CUDA device of one host with symmetric memory, its buffers fit and (for "auto", the default)
    the operands are 16-bit with 16-byte rows; else K panels broadcast by NCCL or gloo (default
    width: the cost model's fastest; all of K alone). panel: the K panels' width, or with the peer
    transport the steps' bands and column panels. group: a process group (places in its rank
    order) or a Team."""
    want, bad = _asked(transport)
    a, b = _blocks(a, b)
    who = team(group)
    pr, pc = _grid_ints(grid)
    keys = _SUMMA_KEYS.get(_summa_key(who, (pr, pc), a.device, a.dtype), ()) if a.is_cuda else ()
    kept = [_PEER.get(x) for x in keys]
    held = sum(2 * x.bufs[0].numel() * a.element_size() for x in kept if x is not None)
    meta = gather_meta(_describe_meta(a, b, (pr, pc), panel, want, held, algo=SUMMA), who)
    if bad is not None:
        raise bad  # (the others refuse it, naming this rank)
    rows, ncols, ka, kb = check_grid(meta, pr, pc)
    k_total, size = sum(ka), a.element_size()
    can_peer = _can_peer(meta, who, want)
    need = 2 * ((pc > 1) * max(rows) * k_total + (pr > 1) * k_total * max(ncols)) + max(rows) * max(ncols)
    # the pairs a rank keeps are room for new ones (reused, or freed first), never for C's block
    fits = (need * size <= 0.9 * min(m[FREE] + m[HELD] for m in meta) * 2**20
            and max(rows) * max(ncols) * size <= 0.9 * min(m[FREE] for m in meta) * 2**20)
    if want == "peer" and not fits:
        raise DistributedError("transport 'peer': its mapped buffers (two of A's row block and two of B's column "
                               f"block, {need * size / 2**30:.2f} GiB with C's block) do not fit in the least free "
                               "device memory over the ranks")
    aligned = size == 2 and all(x % 8 == 0 for x in [*ka, *kb, *ncols])  # every piece's rows start 16-byte aligned
    peer = can_peer and fits and (want == "peer" or aligned)
    i, j = divmod(who.pos, pc)
    if peer:
        bands, cols, width = summa_steps(rows[i], ncols[j], pc > 1, pr > 1, panel)
        return Layout(pr, pc, i, j, rows, ncols, list(itertools.accumulate([0] + ka)),
                      list(itertools.accumulate([0] + kb)), [], width, [m[G] for m in meta], True, bands, cols)
    if panel:  # (no wider than K: the receive buffers are `width` wide, whatever the panel asked for)
        width = min(operator.index(panel), max(k_total, 1))
    elif pr * pc > 1:
        width = _model_panel(sum(rows), sum(ncols), k_total, (pr, pc), size, meta[0][LOCAL])[0]
    else:
        width = k_total
    return Layout(pr, pc, i, j, rows, ncols, list(itertools.accumulate([0] + ka)),
                  list(itertools.accumulate([0] + kb)), _panels(ka, kb, width), width, [m[G] for m in meta])


def summa(a: torch.Tensor, b: torch.Tensor, grid: tuple[int, int], group=None, panel: int | None = None,
          transport: str | None = None) -> torch.Tensor:
    """C block (i, j) = sum over K of A (row block i) @ B (column block j), on the pr × pc grid of
    `group`'s ranks (place r = i·pc + j in the group's rank order). a: this rank's block of A, b:
    its block of B (see the module docstring); returns its block of C. panel: the widest K panel
    (default: the width the cost model predicts fastest; all of K on a group of one), or with the
    peer transport the steps' width. transport: "auto" (the default, or TILEGEMM_DIST_TRANSPORT:
    the copy engines on GPUs of one host, for 16-bit operands), "peer" or "nccl" (layout)."""
    return run(a, b, layout(a, b, grid, group, panel, transport), group)


def run(a: torch.Tensor, b: torch.Tensor, lay: Layout, group=None, communicate: bool = True) -> torch.Tensor:
    """The panel loop on an agreed layout. communicate=False runs the same local products with
    nothing sent, on normal values in place of the receive buffers (made once: _normal_values):
    what `tilegemm dist-bench` times as the products alone (its efficiency's numerator). Memory
    never written could hold NaN, Inf or denormals, on which a CPU GEMM warns and runs slower."""
    a, b = a.resolve_neg(), b.resolve_neg()  # (a lazy negation's values, made real: peers copy memory)
    if lay.peer:
        with _on_device(a.device):  # the copies and barriers go to the operands' device
            return _run_summa_peer(a, b, lay, team(group), communicate)
    i, j, rows, ncols, panels, width = lay.i, lay.j, lay.rows, lay.ncols, lay.panels, lay.width
    pr, pc, granks = lay.pr, lay.pc, lay.granks
    row_g, col_g = _grid_groups(team(group), pr, pc, granks) if communicate else (None, None)
    acc_dtype = torch.float32 if a.dtype in (torch.float16, torch.bfloat16) else a.dtype
    acc = (torch.empty if panels and rows[i] and ncols[j] else torch.zeros)(
        (rows[i], ncols[j]), dtype=acc_dtype, device=a.device)
    # two buffers a direction (panel p + 1 arrives while panel p is used), flat so that a narrower
    # last panel is still one contiguous block; a direction with nothing to send has none
    a_moves, b_moves = (row_g is not None or not communicate) and pc > 1, (col_g is not None or not communicate) and pr > 1
    if communicate:
        bufs_a = [torch.empty(rows[i] * width, dtype=a.dtype, device=a.device) for _ in range(2 * a_moves)]
        bufs_b = [torch.empty(width * ncols[j], dtype=b.dtype, device=b.device) for _ in range(2 * b_moves)]
    else:  # the products alone read normal values, made once (no fill timed), as the 1-D loop's do
        na, nb = rows[i] * width, width * ncols[j]
        vals = _normal_values(2 * (a_moves * na + b_moves * nb), a.dtype, a.device)
        bufs_a = [vals[x * na:(x + 1) * na] for x in range(2 * a_moves)]
        bufs_b = [vals[2 * a_moves * na + x * nb:2 * a_moves * na + (x + 1) * nb] for x in range(2 * b_moves)]

    def post(p: int):
        """Issue panel p's two broadcasts; (A panel, B panel, works) on this rank."""
        k0, k1, ja, ib = panels[p]
        w = k1 - k0
        works = []
        mine_a = a[:, k0 - lay.a_off[ja]:k1 - lay.a_off[ja]] if ja == j else None
        if a_moves:
            pa = bufs_a[p % 2][:rows[i] * w].view(rows[i], w)
            if mine_a is not None and communicate:
                pa.copy_(mine_a)  # what is sent must be contiguous: the owner's own buffer
            if row_g is not None and rows[i]:
                works.append(_collective(f"panel {p}: the broadcast of A's columns {k0}:{k1} along grid row {i}",
                                         lambda: dist.broadcast(pa, src=granks[i * pc + ja], group=row_g, async_op=True)))
        else:
            pa = mine_a  # pc = 1: every rank owns all of its rows' K
        mine_b = b[k0 - lay.b_off[ib]:k1 - lay.b_off[ib], :] if ib == i else None
        if b_moves:
            pb = bufs_b[p % 2][:w * ncols[j]].view(w, ncols[j])
            if mine_b is not None and communicate:
                # gloo and NCCL send a tensor's memory as it lies, whatever its strides: the rows of a
                # contiguous B are sent where they are (no copy: on a GPU it would take memory
                # bandwidth from the GEMM it runs beside), those of any other (column-major, a slice
                # of a wider tensor) are packed into the send buffer first, as A's columns always are
                if mine_b.is_contiguous():
                    pb = mine_b
                else:
                    pb.copy_(mine_b)
            if col_g is not None and ncols[j]:
                works.append(_collective(f"panel {p}: the broadcast of B's rows {k0}:{k1} down grid column {j}",
                                         lambda: dist.broadcast(pb, src=granks[ib * pc + j], group=col_g, async_op=True)))
        else:
            pb = mine_b
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


# ---- moving blocks ----------------------------------------------------------------------------


def relayout(x: torch.Tensor, have: list[tuple[int, int, int, int]], want: list[tuple[int, int, int, int]],
             group=None, granks: list[int] | None = None) -> torch.Tensor:
    """Move a matrix from one block layout to another: the rank at place r holds block have[r] =
    (row0, row1, col0, col1) of it as x, and gets back block want[r]. Each rank sends each other
    rank the part of its block that the other wants (point-to-point, all posted at once, one
    message per overlapping pair); nothing else is held whole anywhere. granks: each place's
    global rank (default: the group's ranks in order)."""
    who = team(group)
    me = who.pos
    g = who.stages[0] if len(who.stages) == 1 else None
    if granks is None:
        granks = [dist.get_global_rank(g, r) if g is not None else r for r in range(len(want))]
    r0, r1, c0, c1 = want[me]
    out = torch.empty((r1 - r0, c1 - c0), dtype=x.dtype, device=x.device)

    def overlap(p, q):
        rr0, rr1, cc0, cc1 = max(p[0], q[0]), min(p[1], q[1]), max(p[2], q[2]), min(p[3], q[3])
        return (rr0, rr1, cc0, cc1) if rr0 < rr1 and cc0 < cc1 else None

    h = have[me]
    ops, landed = [], []
    for peer in range(len(want)):
        sent, got = overlap(have[me], want[peer]), overlap(have[peer], want[me])
        if peer == me:
            if sent:
                out[sent[0] - r0:sent[1] - r0, sent[2] - c0:sent[3] - c0] = \
                    x[sent[0] - h[0]:sent[1] - h[0], sent[2] - h[2]:sent[3] - h[2]]
            continue
        if sent:
            piece = x[sent[0] - h[0]:sent[1] - h[0], sent[2] - h[2]:sent[3] - h[2]].contiguous()
            ops.append(dist.P2POp(dist.isend, piece, granks[peer], g))
        if got:
            piece = torch.empty((got[1] - got[0], got[3] - got[2]), dtype=x.dtype, device=x.device)
            landed.append((piece, got))
            ops.append(dist.P2POp(dist.irecv, piece, granks[peer], g))
    if ops:
        works = _collective("moving blocks between ranks", lambda: dist.batch_isend_irecv(ops))
        for w in works:
            _collective("moving blocks between ranks", w.wait)
    for piece, (g0, g1, h0, h1) in landed:
        out[g0 - r0:g1 - r0, h0 - c0:h1 - c0] = piece
    return out


def blocks(total: int, parts: int) -> list[int]:
    """Offsets of `parts` near-equal pieces of `total` (the first total % parts one larger)."""
    q, r = divmod(total, parts)
    return list(itertools.accumulate([0] + [q + (i < r) for i in range(parts)]))


# ---- 1-D --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowsLayout:
    """The 1-D algorithm's agreed layout: every place's rows of A and of B, N's column panels,
    and where each place's rows land in an all-gather (its rank in the gathering group)."""

    rows: list  # M_r per place
    kb: list  # K_r per place (B's rows, in place order)
    n: int
    panels: list  # (n0, n1) over N
    width: int
    slots: list  # place -> its rank in the gathering group
    peer: bool = False  # panels gathered by copy engines from the peers' mapped memory, not NCCL's all-gather
    ahead: bool = True  # NCCL's loop: panel p + 1's all-gather issued before panel p's GEMM (beside it), or after


TRANSPORTS = ("auto", "peer", "nccl")
# a device barrier that waits longer than this traps: a CUDA error on that rank at its next
# synchronize, after which the process must end (no hang); NCCL's own default timeout
_PEER: dict = {}  # (group name, device, dtype) -> _Mapped: this rank's mapped buffer, grown as products need
_NORMAL: dict = {}  # (device, dtype) -> normal values the products alone read (_normal_values)


def _transport(transport: str | None) -> str:
    """The 1-D all-gather's transport asked for: the argument, else TILEGEMM_DIST_TRANSPORT, else auto."""
    t = transport or os.environ.get("TILEGEMM_DIST_TRANSPORT", "auto") or "auto"
    if t not in TRANSPORTS and not transport:
        raise ConfigError(f"TILEGEMM_DIST_TRANSPORT={t!r}: use one of {', '.join(TRANSPORTS)}")
    if t not in TRANSPORTS:
        raise ValueError(f"transport {t!r}: one of {', '.join(TRANSPORTS)} (TILEGEMM_DIST_TRANSPORT too)")
    return t


def _can_peer(meta: list[list[int]], who: Team, want: str) -> bool:
    """Whether the copy engines can carry this product's blocks (both engines): more than one rank,
    every one a CUDA device of one host with symmetric memory, under NCCL, and "nccl" not asked
    for; raises where "peer" was asked for and they cannot."""
    can = (len(meta) > 1 and want != "nccl" and all(m[PEER] for m in meta) and len({m[HOST] for m in meta}) == 1
           and "nccl" in str(dist.get_backend(who.stages[0])))
    if want == "peer" and not can:
        raise DistributedError("transport 'peer' needs every rank on a CUDA device of one host, NCCL and a torch "
                               "with symmetric memory")
    return can


def _peer_fits(meta: list[list[int]], n: int, itemsize: int) -> bool:
    """Whether every rank has room for the peer transport's two mapped buffers (all of B, K × N,
    each: the gathered panels are made in them) beside C's rows, in 90% of the least device memory
    over the ranks that is free or held in the pair it keeps from an earlier product (reused, or
    freed before larger ones are mapped), C's rows in free memory alone (a pair reused stays)."""
    free, room = (min(m[FREE] for m in meta) * 2**20, min(m[FREE] + m[HELD] for m in meta) * 2**20)
    k, rows = sum(m[BR] for m in meta), max(m[AR] for m in meta)
    return (2 * k * n + rows * n) * itemsize <= 0.9 * room and rows * n * itemsize <= 0.9 * free


def layout_1d(a: torch.Tensor, b: torch.Tensor, group=None, panel: int | None = None,
              transport: str | None = None, ahead: bool | None = None) -> RowsLayout:
    """Share and check every rank's A rows (M_r × K, all of K) and B rows (K_r × N); cut N into
    panels (default width: the cost model's fastest, rounded up to a multiple of 8; all of N alone)
    and choose how panels travel: "peer" (the copy engines read each panel from the other ranks'
    mapped memory: no SM is taken from the GEMMs) where every rank is a CUDA device of one host
    with symmetric memory and its buffers fit, else "nccl" (NCCL's or gloo's all-gather); "auto"
    (the default, or TILEGEMM_DIST_TRANSPORT) takes peer where it can. The choice is made from the
    gathered metadata, the same on every rank. ahead (NCCL's loop): each panel's all-gather issued
    before the GEMM of the panel before it, to run beside it, or (False) after it; default: the
    cost model's faster (docs/perf-notes.md, 72: beside our persistent GEMMs NCCL's kernels wait
    for SMs, and a rank's GEMM can wait for its peer's). Not checked across the ranks: ranks that
    force different orders issue the same collectives in the same order, at different speeds."""
    want, bad = _asked(transport)
    a, b = _blocks(a, b)
    who = team(group)
    if len(who.stages) != 1:
        raise DistributedError("the 1-D algorithm runs on one group (a 1-D mesh), not on a 2-D mesh's rows and columns")
    have = _PEER.get(_peer_key(who.stages[0], b.device, b.dtype)) if b.is_cuda else None
    held = 2 * have.bufs[0].numel() * b.element_size() if have is not None else 0
    meta = gather_meta(_describe_meta(a, b, (0, 0), panel, want, held, algo=ROWS_1D), who)
    if bad is not None:
        raise bad  # (the others refuse it, naming this rank)
    errs = _common_errors(meta)
    if not _comparable(meta):
        _refuse(errs)  # no shapes to compare
    k = sum(m[BR] for m in meta)
    errs += [f"rank {m[G]}: A has {m[AC]} columns, but B's rows over the ranks sum to K = {k}"
             for m in meta if m[AC] != k]
    errs += [f"rank {m[G]}: B has {m[BC]} columns, rank {meta[0][G]}'s {meta[0][BC]}" for m in meta if m[BC] != meta[0][BC]]
    _refuse(errs)
    n, world = meta[0][BC], len(meta)
    if panel:  # (no wider than N: the packed and gathered buffers are a panel wide, whatever was asked for)
        panel = min(operator.index(panel), max(n, 1))
    can_peer = _can_peer(meta, who, want)
    peer = can_peer and _peer_fits(meta, n, a.element_size())
    g = who.stages[0]
    slots = [dist.get_group_rank(g, m[G]) if g is not None else m[G] for m in meta]
    if want == "peer" and not peer:
        raise DistributedError("transport 'peer': its two mapped buffers of all of B do not fit beside C's rows in the "
                               "least free device memory over the ranks")
    if peer:  # only the first panel's copies are exposed: a narrow one (peer_cuts)
        edges, width = peer_cuts(n, panel)
        return RowsLayout([m[AR] for m in meta], [m[BR] for m in meta], n, list(zip(edges, edges[1:])), width,
                          slots, True)
    if world > 1:
        width, model_ahead = _model_panel(sum(m[AR] for m in meta), n, k, (world, 1), a.element_size(),
                                          meta[0][LOCAL], _widest_1d(meta, n, world, a.element_size()), panel or None)
        ahead = model_ahead if ahead is None else ahead
    else:
        width = panel or max(n, 1)
    width += -width % 8 if width > 8 else 0  # column panels whose starts keep 16-byte alignment
    return RowsLayout([m[AR] for m in meta], [m[BR] for m in meta], n,
                      [(n0, min(n, n0 + width)) for n0 in range(0, n, width)], width, slots, False, ahead is not False)


@dataclass
class _Mapped:
    """A rank's two buffers in symmetric memory (products take them in turn), their handles (the
    peers' mappings) and the peers' buffers mapped here, each made once (_peer_view).

    Two buffers, so that no barrier closes a product: product i writes buffer i mod 2, after
    product i − 1's opening barrier, which every rank passed only once it had finished product
    i − 2, whose GEMMs waited for every read of that buffer. Each product's streams first wait
    for the last product's end (`done`), so that this holds whatever stream each product runs on."""

    bufs: list
    hdls: list
    turn: int = 0
    views: dict = None
    done: object = None  # the event after the last product's GEMMs, on whatever stream it ran
    plans: dict = field(default_factory=dict)  # the loops' plans (_PeerPlan, _SummaPlan) per buffer and layout


def enable_symm_mem(group_name: str) -> None:
    """Symmetric memory for the group, where this torch still asks for it (enabling is deprecated,
    and done for every group, in newer torch)."""
    import warnings

    from torch.distributed import _symmetric_memory as symm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if hasattr(symm, "is_symm_mem_enabled_for_group") and not symm.is_symm_mem_enabled_for_group(group_name):
            symm.enable_symm_mem_for_group(group_name)


def _peer_key(g, device, dtype) -> tuple:
    return ((g or dist.group.WORLD).group_name, str(device), dtype)


def _peer_buffer(g, numel: int, dtype, device) -> _Mapped:
    """This rank's two buffers of at least `numel` elements each in symmetric memory (mapped into
    every peer of group g), one pair per group, device and dtype, made again larger when a product
    needs more. Every rank of g asks with the same numel (from the gathered layout), so all make
    them at the same call; an allocation that fails on one rank fails on all (the outcome is
    agreed first), never leaving the others in the rendezvous."""
    from torch.distributed import _symmetric_memory as symm

    _same_world()
    name = (g or dist.group.WORLD).group_name
    key = _peer_key(g, device, dtype)
    have = _PEER.get(key)
    if have is not None and have.bufs[0].numel() >= numel:
        return have
    if have is not None:  # too small: freed once every rank is past its last product (and so its reads)
        if have.done is not None:
            torch.cuda.current_stream(device).wait_event(have.done)
        _barrier(have.hdls[have.turn ^ 1], "the barrier before the mapped buffers are made larger")
        torch.cuda.synchronize(device)
        del _PEER[key]
        have = None
    enable_symm_mem(name)
    try:
        bufs, err = [symm.empty(numel, dtype=dtype, device=device) for _ in range(2)], None
    except Exception as e:  # noqa: BLE001  (out of memory, or no mapping on this device)
        bufs, err = None, e
    ok = torch.tensor([int(bufs is not None)], dtype=torch.int32, device=device)
    _collective("agreeing on the mapped buffers", lambda: dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=g))
    if not ok.item():
        why = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}" if err is not None else "on another rank"
        raise DistributedError(f"the peer transport's mapped buffers (2 × {numel * dtype.itemsize / 2**30:.2f} GiB) "
                               f"could not be made on rank {dist.get_rank()} ({why}); transport='nccl' needs none")
    hdls = [_collective("mapping the ranks' rows of B (symmetric memory)", lambda x=x: symm.rendezvous(x, name))
            for x in bufs]
    _PEER[key] = _Mapped(bufs, hdls, 0, {})
    return _PEER[key]


def release_buffers() -> None:
    """Free this rank's mapped buffers of the peer transports (each group, device and dtype keeps
    a pair, reused by later products: all of B for the 1-D engine, a row block of A and a column
    block of B for SUMMA), and the normal values the products alone read. Collective: every rank
    of every group that made them calls it, in the same turn of its products. Each pair goes once
    every rank of its group is past its last product (a device barrier, then a synchronize: no
    peer still reads it). The products' CUDA graphs go with the pairs' plans, the products
    alone's with the normal values."""
    _NORMAL.clear()  # (the caching allocator keeps their memory for the stream that used them)
    _ALONE.graphs.clear()
    _ALONE.seen.clear()
    _ALONE.failed.clear()  # (the peer loops' graphs go with their mapped pairs)
    if not _PEER:
        return
    for _, m in sorted(_PEER.items(), key=lambda kv: (kv[0][0], kv[0][1], str(kv[0][2]))):  # one order for all ranks
        if m.done is not None:
            torch.cuda.current_stream(m.bufs[0].device).wait_event(m.done)
        _barrier(m.hdls[m.turn ^ 1], "the barrier before the mapped buffers are freed")
    torch.cuda.synchronize()
    _PEER.clear()
    _SUMMA_KEYS.clear()


def _barrier_s() -> float:
    return env.number("TILEGEMM_DIST_BARRIER_S", 600.0)


def _graphs_on() -> bool:
    return env.flag("TILEGEMM_DIST_GRAPHS", True)


def check_settings() -> None:
    """Read every TILEGEMM_DIST_* setting as the ranks will, so that a caller about to start them
    (dist-bench) says a bad one once (ConfigError) rather than each rank as a traceback."""
    _transport(None)
    _graphs_on()
    _barrier_s()


def _barrier(hdl, what: str) -> None:
    """A device barrier over the mapped buffers' ranks, on the current stream; it traps after
    TILEGEMM_DIST_BARRIER_S (default 600) where this torch takes a timeout."""
    def go():
        try:
            hdl.barrier(channel=0, timeout_ms=int(_barrier_s() * 1e3))
        except TypeError:  # a torch whose barrier takes no timeout
            hdl.barrier(channel=0)

    _collective(what, go)


def _run_1d_peer(a: torch.Tensor, b: torch.Tensor, lay: RowsLayout, g, me: int, c: torch.Tensor,
                 communicate: bool = True) -> torch.Tensor:
    """run_1d's loop with the copy engines as the all-gather, in a mapped buffer (of two, taken in
    turn: _Mapped) that holds all of B panel-major: panel p (columns n0:n1) is the contiguous
    K × w_p block at K · n0, its rows in place order. This rank writes its own rows of every
    panel there (one strided copy of its B, on the compute stream), then a device barrier; then
    its copy stream pulls each panel's other rows from the peers' buffers, each piece one
    contiguous block (cuMemcpyAsync: the copy engines, no SM), each panel's queued right behind
    the GEMM it runs beside, while the compute stream multiplies each panel where it lies once its
    pieces are in. No copy waits for a GEMM, no GEMM for the SMs a local copy would take, and no
    barrier closes the product. What a layout does with each buffer (its views, the pieces'
    addresses) is worked out at its first product (_PeerPlan): a call's host time is the GPUs'
    idle time before its first GEMM.
    communicate=False: the same GEMMs on the buffer the last product filled, nothing copied (the
    products alone; where no product ran yet, on normal values)."""
    k, n = sum(lay.kb), lay.n
    if tuple(b.shape) != (lay.kb[me], n):  # (else the pack would broadcast or cut it)
        raise ValueError(f"rank {dist.get_rank()}: B's rows here are {tuple(b.shape)}, the layout's {(lay.kb[me], n)}")
    if not communicate:
        buf = _last_filled(g, k * n, b.dtype, b.device)

        def alone():
            for n0, n1 in lay.panels:
                _product(a, buf[k * n0:k * n1].view(k, n1 - n0), c[:, n0:n1])

        if a.shape[0]:
            _ALONE.run(("1d", tuple(lay.panels)) + _operands_key(a, buf, c), alone, b.device)
        return c
    mapped = _peer_buffer(g, k * n, b.dtype, b.device)
    mine = _take_turn(mapped)
    key = (mine, me, n, tuple(lay.kb), tuple(lay.panels), tuple(lay.slots))
    plan = _used(mapped.plans, key)
    if plan is None:
        plan = _keep(mapped.plans, key, _PeerPlan(mapped, mine, lay, me, b.dtype))
    compute = torch.cuda.current_stream(b.device)
    if mapped.done is not None:
        compute.wait_event(mapped.done)  # the last product's end, whatever stream it ran on
    what = "panel {} of B's from the peers' mapped buffers"
    last = len(plan.views) - 1

    def product():
        here, copies = torch.cuda.current_stream(b.device), _copy_stream(b.device)
        plan.pack(b)  # this rank's rows of each panel, in place
        _barrier(mapped.hdls[mine], "the barrier before the peers' rows are read")
        copies.wait_stream(here)  # every rank's rows are in its buffer (the barrier ran on this stream)
        _post(plan, 0, copies, what)
        for p, view in enumerate(plan.views):
            here.wait_event(plan.ready[p])  # also where nothing is multiplied: the next barrier follows the reads
            if a.shape[0]:
                n0, n1 = lay.panels[p]
                _product(a, view, c[:, n0:n1])
            if p < last:
                _post(plan, p + 1, copies, what)  # queued right behind the GEMM it will run beside

    plan.graphs.run(_operands_key(a, b, c), product, b.device)
    mapped.done = compute.record_event()
    return c


class _PeerPlan:
    """What the 1-D peer loop does with buffer `turn` of a mapped pair for one layout, worked out
    once: each panel's K × w view of the buffer (views: what the GEMMs read), where this rank's
    rows of each panel go (pack: a _PackPlan, up to three strided copies), each panel's pieces
    from the peers as (destination, source, bytes) addresses (pieces: the peers' mapped buffers
    stay mapped while the pair lives), and an event a panel (ready: recorded again each product; a
    wait takes the event as it is when it is queued)."""

    def __init__(self, mapped: "_Mapped", turn: int, lay: RowsLayout, me: int, dtype):
        buf = mapped.bufs[turn]
        k, s = sum(lay.kb), buf.element_size()
        offs = list(itertools.accumulate([0] + lay.kb))
        self.views = [buf[k * n0:k * n1].view(k, n1 - n0) for n0, n1 in lay.panels]
        self.pack = _PackPlan(buf, k, offs[me], lay.kb[me], lay.panels, lay.n)
        peers = [(_peer_view(mapped, turn, lay.slots[q], dtype).data_ptr(), offs[q], offs[q + 1])
                 for q in range(len(lay.kb)) if q != me and lay.kb[q]]
        base = buf.data_ptr()
        self.pieces = [[(base + (k * n0 + r0 * (n1 - n0)) * s, src + (k * n0 + r0 * (n1 - n0)) * s, (r1 - r0) * (n1 - n0) * s)
                        for src, r0, r1 in peers] for n0, n1 in lay.panels]
        self.ready = [torch.cuda.Event() for _ in lay.panels]
        self.graphs = _Graphs()


class _PackPlan:
    """This rank's rows of B (K_r × N, contiguous) into their places in a panel-major buffer (panel
    (n0, n1) the K × (n1 − n0) block at K · n0, these rows at row0): for each run of panels of one
    width (the first, the middle ones, the last: up to three strided copies, not one a panel), the
    destination view and the source's (size, stride, offset) in B, worked out once, in elements
    and, where the layout allows, in 8-byte words (a 16-bit copy of short rows moves a third as
    fast): a call makes one source view a copy, not four."""

    def __init__(self, buf: torch.Tensor, k: int, row0: int, kr: int, panels: list, n: int):
        size = buf.element_size()
        self.unit = 8 // size if size < 8 else 1
        runs, self.words = [], []
        for w, group in itertools.groupby(panels if kr else (), key=lambda x: x[1] - x[0]):
            n0, count = next(group)[0], 1 + sum(1 for _ in group)
            runs.append((buf[k * n0:k * (n0 + count * w)].view(count, k, w)[:, row0:row0 + kr], n0, count, w))
        self.plain = [(dst, (count, kr, w), (w, n, 1), n0) for dst, n0, count, w in runs]
        u = self.unit
        if u > 1 and n % u == 0 and all(w % u == 0 and n0 % u == 0 for _, n0, _, w in runs) \
                and buf.storage_offset() % u == 0 and buf.data_ptr() % 8 == 0:
            self.words = [(dst.view(torch.int64), (count, kr, w // u), (w // u, n // u, 1), n0 // u)
                          for dst, n0, count, w in runs]

    def __call__(self, b: torch.Tensor) -> None:
        """Write b (this rank's K_r × N rows, contiguous: of one row, its row stride may be any) to
        its places."""
        u = self.unit
        if self.words and b.storage_offset() % u == 0 and b.data_ptr() % 8 == 0 and b.stride(0) % u == 0:
            src, runs = b.view(torch.int64), self.words
        else:
            src, runs = b, self.plain
        base = src.storage_offset()
        for dst, size, stride, off in runs:
            dst.copy_(src.as_strided(size, stride, base + off))


def _run_summa_peer(a: torch.Tensor, b: torch.Tensor, lay: Layout, who: Team, communicate: bool = True) -> torch.Tensor:
    """run's loop with the copy engines as the broadcasts. The rank at grid place (i, j) keeps all
    of A's row block i (M_i × K) in a mapped buffer of its grid row's group and all of B's column
    block j (K × N_j) in one of its grid column's (two of each, taken in turn: _Mapped), and
    writes its own blocks there (on the compute stream) before each group's device barrier. Its
    copy stream then pulls the other ranks' blocks a step at a time (band s of A_i from each rank
    of the grid row, panel s of B_j from each of the grid column: one copy each, by the copy
    engines, no SM), each step's copies queued right behind the GEMMs they run beside (so that
    the first GEMM's launch follows the first step's copies alone), while the compute stream
    multiplies each step's blocks of C_ij (summa_blocks) where the operands lie once they are in:
    each block one GEMM over all of K, written once in the output dtype. What does not move (B_j
    on one grid row, A_i on one grid column) is read where it is. communicate=False: the same
    GEMMs on the buffers the last product filled (_last_filled), nothing copied (the products
    alone)."""
    i, j, pr, pc = lay.i, lay.j, lay.pr, lay.pc
    mi, nj, k = lay.rows[i], lay.ncols[j], lay.a_off[-1]
    c = torch.empty((mi, nj), dtype=a.dtype, device=a.device)
    if k == 0 or max(lay.rows) == 0 or max(lay.ncols) == 0:  # gathered sizes: every rank returns here together
        return c.zero_()
    a, b = a.contiguous(), b.contiguous()
    row_g, col_g = _grid_groups(who, pr, pc, lay.granks)
    moving = [(row_g, max(lay.rows) * k) if pc > 1 else None, (col_g, k * max(lay.ncols)) if pr > 1 else None]
    _SUMMA_KEYS[_summa_key(who, (pr, pc), a.device, a.dtype)] = tuple(
        _peer_key(x[0], a.device, a.dtype) for x in moving if x is not None)
    compute = torch.cuda.current_stream(a.device)
    steps = range(len(lay.bands) - 1)

    def multiply(whole_a, whole_b, s):
        for r0, r1, c0, c1 in summa_blocks(lay.bands, lay.cols, s):
            _product(whole_a[r0:r1], whole_b[:, c0:c1], c[r0:r1, c0:c1])

    if not communicate:
        flat = [_last_filled(x[0], x[1], a.dtype, a.device) if x is not None else None for x in moving]
        whole_a = flat[0][:mi * k].view(mi, k) if flat[0] is not None else a
        whole_b = flat[1][:k * nj].view(k, nj) if flat[1] is not None else b

        def alone():
            for s in steps:
                multiply(whole_a, whole_b, s)

        if c.numel():
            _ALONE.run(("summa", tuple(lay.bands), tuple(lay.cols)) + _operands_key(whole_a, whole_b, c), alone,
                       a.device)
        return c
    ma, mb = (_peer_buffer(x[0], x[1], a.dtype, a.device) if x is not None else None for x in moving)
    for m in (ma, mb):
        if m is not None and m.done is not None:
            compute.wait_event(m.done)  # the last product's end, whatever stream it ran on
    ta, tb = (_take_turn(m) for m in (ma, mb))
    whole_a = ma.bufs[ta][:mi * k].view(mi, k) if ma is not None else a
    whole_b = mb.bufs[tb][:k * nj].view(k, nj) if mb is not None else b
    plan = _SummaPlan.of(lay, ma, ta, mb, tb, row_g, col_g, whole_a, whole_b)
    what = "step {} of A's and B's blocks from the peers' mapped buffers"
    last = len(plan.blocks) - 1

    def product():
        here, copies = torch.cuda.current_stream(a.device), _copy_stream(a.device)
        if ma is not None and a.numel():
            _pack(whole_a[:, lay.a_off[j]:lay.a_off[j + 1]], a)
        if mb is not None and b.numel():
            _pack(whole_b[lay.b_off[i]:lay.b_off[i + 1]], b)
        if ma is not None:
            _barrier(ma.hdls[ta], "the barrier before the grid row's blocks of A are read")
        if mb is not None:
            _barrier(mb.hdls[tb], "the barrier before the grid column's blocks of B are read")
        if plan.blocks:  # (no step: this rank's C block is empty; its blocks were still read)
            copies.wait_stream(here)  # every rank's own blocks are in its buffers (the barriers ran on this stream)
            _post(plan, 0, copies, what)
        for s, blocks in enumerate(plan.blocks):
            here.wait_event(plan.ready[s])  # also where nothing is multiplied: the next barrier follows the reads
            for r0, r1, c0, c1 in blocks:
                _product(whole_a[r0:r1], whole_b[:, c0:c1], c[r0:r1, c0:c1])
            if s < last:
                _post(plan, s + 1, copies, what)  # queued right behind the GEMMs it will run beside

    plan.graphs.run(_operands_key(a, b, c), product, a.device)
    done = compute.record_event()
    for m in (ma, mb):
        if m is not None:
            m.done = done
    return c


class _SummaPlan:
    """What SUMMA's peer loop does with buffers (ta, tb) of its mapped pairs for one layout, worked
    out once (as the 1-D loop's _PeerPlan): each step's blocks of C (blocks), its pieces from the
    other ranks as the copy engines' parameters (pieces: a (destination, source, bytes) tuple for
    whole rows of B, else a 2-D copy's parameters; addresses only, so that a plan holds no view of
    another pair's buffer), and an event a step (ready). Kept with the pair of A's row group (else
    B's), checked against the other pair it was made with (a weak reference: a pair made again
    is another)."""

    def __init__(self, lay: Layout, ma, ta: int, mb, tb: int, row_g, col_g, whole_a, whole_b):
        i, j, pr, pc = lay.i, lay.j, lay.pr, lay.pc
        mi, nj, k = lay.rows[i], lay.ncols[j], lay.a_off[-1]
        self.other = weakref.ref(mb) if ma is not None and mb is not None else None
        # the other ranks' buffers: A_i's from the grid row (places i·pc + q), B_j's from the grid column
        a_from = [(q, _peer_view(ma, ta, dist.get_group_rank(row_g, lay.granks[i * pc + q]), whole_a.dtype)[:mi * k]
                   .view(mi, k)) for q in range(pc) if q != j] if ma is not None else []
        b_from = [(r, _peer_view(mb, tb, dist.get_group_rank(col_g, lay.granks[r * pc + j]), whole_b.dtype)[:k * nj]
                   .view(k, nj)) for r in range(pr) if r != i] if mb is not None else []
        steps = range(len(lay.bands) - 1)
        self.blocks = [list(summa_blocks(lay.bands, lay.cols, s)) for s in steps]
        self.pieces = []
        for s in steps:
            pieces = []
            r0, r1 = lay.bands[s], lay.bands[s + 1]
            for q, src in a_from if r1 > r0 else ():
                k0, k1 = lay.a_off[q], lay.a_off[q + 1]
                pieces.append(multigpu.params_2d(whole_a[r0:r1, k0:k1], src[r0:r1, k0:k1]))
            c0, c1 = lay.cols[s], lay.cols[s + 1]
            for r, src in b_from if c1 > c0 else ():
                k0, k1 = lay.b_off[r], lay.b_off[r + 1]
                if c1 - c0 == nj:  # whole rows: one contiguous block
                    dst, frm = whole_b[k0:k1], src[k0:k1]
                    pieces.append((dst.data_ptr(), frm.data_ptr(), dst.numel() * dst.element_size()))
                else:
                    pieces.append(multigpu.params_2d(whole_b[k0:k1, c0:c1], src[k0:k1, c0:c1]))
            self.pieces.append([x for x in pieces if x is not None])
        self.ready = [torch.cuda.Event() for _ in steps]
        self.graphs = _Graphs()

    @classmethod
    def of(cls, lay: Layout, ma, ta: int, mb, tb: int, row_g, col_g, whole_a, whole_b) -> "_SummaPlan":
        """The plan for this product, made where there is none yet (or the other pair is new)."""
        home = ma if ma is not None else mb
        key = ("summa", ta, tb, lay.i, lay.j, lay.pr, lay.pc, tuple(lay.rows), tuple(lay.ncols), tuple(lay.a_off),
               tuple(lay.b_off), tuple(lay.bands), tuple(lay.cols), tuple(lay.granks))
        plan = _used(home.plans, key) if home is not None else None
        if plan is None or plan.other is not None and plan.other() is not mb:
            plan = cls(lay, ma, ta, mb, tb, row_g, col_g, whole_a, whole_b)
            if home is not None:
                _keep(home.plans, key, plan)
        return plan


PLANS_KEPT = 8  # plans a mapped pair keeps (the oldest goes first): a layout's two turns, a few shapes


def _keep(plans: dict, key, plan):
    """plans[key] = plan as the newest, dropping the least recently used where PLANS_KEPT are kept
    already (a process that multiplies many shapes keeps a plan, and an event a panel, for its last
    few only; _used marks a plan taken again)."""
    plans.pop(key, None)
    if len(plans) >= PLANS_KEPT:
        plans.pop(next(iter(plans)))
    plans[key] = plan
    return plan


def _used(plans: dict, key):
    """The plan kept under key (None: none), made the most recently used."""
    plan = plans.pop(key, None)
    if plan is not None:
        plans[key] = plan
    return plan


def _post(plan, s: int, copies, what: str) -> None:
    """Step (or panel) s of a peer loop's plan onto the copy stream `copies`: its pieces, each a
    (destination, source, bytes) tuple or a 2-D copy's parameters, then its event. A failed copy
    names this rank and `what` (a format string taking s)."""
    stream = copies.cuda_stream
    try:
        for piece in plan.pieces[s]:
            if type(piece) is tuple:
                multigpu.copy_bytes(*piece, stream)
            else:
                multigpu.copy_planned(piece, stream)
    except DeviceError as e:
        raise DeviceError(f"rank {dist.get_rank()}: {what.format(s)}: {e}") from None
    plan.ready[s].record(copies)


def _last_filled(g, numel: int, dtype, device) -> torch.Tensor:
    """What the products alone multiply: the buffer of g's mapped pair that the last product
    filled, once its copies have landed (its values: a GEMM on zeros draws less power and runs
    faster), or normal values where no pair that large is kept."""
    have = _PEER.get(_peer_key(g, device, dtype))
    if have is None or have.bufs[0].numel() < numel:
        return _normal_values(numel, dtype, device)
    if have.done is not None:
        torch.cuda.current_stream(device).wait_event(have.done)
    return have.bufs[have.turn ^ 1]


def _normal_values(numel: int, dtype, device) -> torch.Tensor:
    """numel normal values, made once per device and dtype (and again only for more): what the
    products alone read where no product wrote their operands, so that their timing holds no fill
    (a fill of all of B beside one GEMM's time: 24% of it at 8192 on two GPUs). Held until
    release_buffers()."""
    key = (device, dtype)
    have = _NORMAL.get(key)
    if have is None or have.numel() < numel:
        _NORMAL[key] = have = torch.empty(numel, dtype=dtype, device=device).normal_()
    return have[:numel]


def _take_turn(m: _Mapped | None) -> int:
    """The buffer of m's pair this product writes (the other is the next product's)."""
    if m is None:
        return 0
    mine, m.turn = m.turn, m.turn ^ 1
    return mine


def _peer_view(m: _Mapped, turn: int, slot: int, dtype) -> torch.Tensor:
    """Buffer `turn` of the pair m of the rank `slot` of m's group, mapped here: flat, all of it,
    made once (a product takes the part it uses)."""
    key = (turn, slot)
    if key not in m.views:
        m.views[key] = m.hdls[turn].get_buffer(slot, (m.bufs[turn].numel(),), dtype, 0)
    return m.views[key]


def _pack(dst: torch.Tensor, src: torch.Tensor) -> None:
    """dst[...] = src for views of one shape whose rows (last dimension) are contiguous, in 8-byte
    words where the rows and their starts allow (a 16-bit copy of short rows moves a third as fast)."""
    s = src.element_size()
    unit = 8 // s
    if s < 8 and src.shape[-1] % unit == 0 and all(
            x.stride(-1) == 1 and all(st % unit == 0 for st in x.stride()[:-1]) and x.storage_offset() % unit == 0
            and x.data_ptr() % 8 == 0 for x in (dst, src)):
        dst.view(torch.int64).copy_(src.view(torch.int64))
    else:
        dst.copy_(src)


def _on_device(device):
    """torch.cuda.device(device) where another device is current, else nothing: entering one costs
    host µs at every product."""
    return torch.cuda.device(device) if device.index != torch.cuda.current_device() else contextlib.nullcontext()


@functools.cache
def _copy_stream(device) -> torch.cuda.Stream:
    """One side stream per device for the peer transport's copies, made once."""
    return torch.cuda.Stream(device=device)


@functools.cache
def _capture_stream(device) -> torch.cuda.Stream:
    """One side stream per device that the peer loops' graphs are captured on (nothing is run on it)."""
    return torch.cuda.Stream(device=device)


GRAPHS = [_graphs_on()]  # "0": every peer product queued call by call;
# set False after a failed capture (one such failure is all this process pays for)
GRAPHS_KEPT = 4  # graphs a _Graphs keeps (the oldest goes first)
SEEN = 4  # calls a _Graphs remembers: a key that comes back among them is captured


class _Graphs:
    """A peer loop's device work for one plan, as CUDA graphs: one for each set of operands (their
    addresses, shapes and strides: `key`) that comes back within the plan's last SEEN calls,
    captured at that call and replayed at every later one. The host then queues a product in one
    launch, not each pack, barrier, copy and GEMM one after another while the GPUs wait for the
    first GEMM (docs/perf-notes.md, 84). Operands at new addresses at every call are never
    captured; after a failed capture no product is captured (GRAPHS), with a warning."""

    def __init__(self):
        self.graphs: dict = {}
        self.seen: list = []
        self.failed: list = []

    def run(self, key, body, device) -> None:
        """body() (the product's device work, queued on the current stream, and on the copy
        stream joined from it), replayed from its graph where key has one. Inside a capture of
        the caller's own, body() is queued as it is (the caller's graph takes it)."""
        graph = _used(self.graphs, key)
        if graph is None and GRAPHS[0] and key in self.seen and key not in self.failed \
                and not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()):
            graph = self._capture(key, body, device)
        if graph is None:
            self.seen = (self.seen + [key])[-SEEN:]
            body()
        else:
            graph.replay()

    def _capture(self, key, body, device):
        try:
            graph = _record(body, device)
        except Exception as e:  # noqa: BLE001  (not capturable here: no product is captured from now on)
            self.failed = (self.failed + [key])[-SEEN:]
            GRAPHS[0] = False
            warnings.warn(f"tilegemm.distributed: a peer product could not be captured as a CUDA graph "
                          f"({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}); "
                          "products are queued call by call from now on", RuntimeWarning, stacklevel=4)
            return None
        if len(self.graphs) >= GRAPHS_KEPT:
            self.graphs.pop(next(iter(self.graphs)))
        self.graphs[key] = graph
        return graph


def _record(body, device) -> torch.cuda.CUDAGraph:
    """body's device work captured as a CUDA graph, on a side stream (nothing runs), in a memory
    pool of its own. Where body forked the copy stream into the capture, it is joined back
    whatever body did (an unjoined stream fails the capture; a stream that was never forked
    must not be waited for: its work is not the capture's). The capture is ended whatever
    happened (a capture left open fails every later one on its stream), and a failed capture
    hands its pool back to the allocator (torch's capture_end fails before it does, leaving the
    allocator holding back every block freed with record_stream). What this cannot mend: in torch
    2.11 a capture that fails at capture_end leaves the device's CUDA random generator capturing,
    and every later random op there raises (docs/perf-notes.md, 95)."""
    graph, pool = torch.cuda.CUDAGraph(), torch.cuda.graph_pool_handle()
    stream, copy = _capture_stream(device), _copy_stream(device)
    index = stream.device.index
    with torch.cuda.stream(stream):
        graph.capture_begin(pool=pool, capture_error_mode="thread_local")
        try:
            body()
        finally:
            try:
                try:
                    with torch.cuda.stream(copy):
                        forked = torch.cuda.is_current_stream_capturing()
                    if forked:
                        stream.wait_stream(copy)
                finally:
                    with torch.cuda.stream(stream):  # (capture_end ends the current stream's capture)
                        graph.capture_end()
            except Exception:
                for undo in (torch._C._cuda_endAllocateToPool, torch._C._cuda_releasePool):
                    try:
                        undo(index, pool)
                    except Exception:  # noqa: BLE001,S110  (already ended or released)
                        pass
                raise
    return graph


def _operands_key(*ts: torch.Tensor) -> tuple:
    """What a captured product reads and writes: each tensor's address, shape, strides and dtype."""
    return tuple((t.data_ptr(), tuple(t.shape), t.stride(), t.dtype) for t in ts)


_ALONE = _Graphs()  # the products alone (communicate=False), as the products are


def run_1d(a: torch.Tensor, b: torch.Tensor, lay: RowsLayout, group=None, communicate: bool = True) -> torch.Tensor:
    """C's rows of this rank, a column panel at a time: panel p of B (all of K, the panel's
    columns) is all-gathered from every rank's rows of it, and C[:, panel] = A_r @ B_panel is one
    GEMM over all of K, written once in the output dtype (no partial sums to keep). Panel p + 1's
    all-gather travels while panel p is multiplied (two buffers), or, where the layout says so
    (not lay.ahead), after it; on a GPU each rank's own piece is packed on a side stream.
    communicate=False: the same packing and products with nothing sent, on normal values (what
    dist-bench times as the products alone)."""
    a, b = a.resolve_neg(), b.resolve_neg()  # (as run's)
    who = team(group)
    g = who.stages[0]
    world, me = len(lay.rows), who.pos
    k, kmax, n = sum(lay.kb), max(lay.kb), lay.n
    c = torch.empty((a.shape[0], n), dtype=a.dtype, device=a.device)
    if k == 0 or not lay.panels:
        return c.zero_()
    if lay.peer:
        with _on_device(b.device):  # the copies and barriers go to the operands' device
            return _run_1d_peer(a, b.contiguous(), lay, g, me, c, communicate)
    w = lay.width
    # two of each: panel p + 1's own piece (padded to kmax rows) and gathered panel, while p is used
    two = min(2, len(lay.panels))  # one panel needs one buffer of each
    packed = [torch.zeros(kmax * w, dtype=b.dtype, device=b.device) for _ in range(two)]
    sending = communicate and world > 1
    if world == 1:
        gathered = []  # its own rows are all of K: each panel is its packed piece
    elif sending:
        gathered = [torch.empty(world * kmax * w, dtype=b.dtype, device=b.device) for _ in range(two)]
    else:  # the products alone multiply normal values, as the peer loop's do (on zeros a GEMM draws less power
        vals = _normal_values(two * world * kmax * w, b.dtype, b.device)  # and runs faster), made once
        gathered = [vals[i * world * kmax * w:(i + 1) * world * kmax * w] for i in range(two)]
    # the gathered rows arrive in the group's rank order, each padded to kmax: the ones in place order
    straight = lay.slots == list(range(world)) and all(x == kmax for x in lay.kb)
    keep = None if straight else torch.cat([torch.arange(lay.slots[q] * kmax, lay.slots[q] * kmax + lay.kb[q],
                                                         device=b.device) for q in range(world)])
    compute = torch.cuda.current_stream(b.device) if b.is_cuda else None
    side = torch.cuda.Stream(device=b.device) if b.is_cuda and world > 1 else None
    if side is not None:
        for x in packed + gathered:
            x.record_stream(side)

    def post(p: int):
        """Pack panel p's own piece and issue its all-gather; (gathered panel, work)."""
        n0, n1 = lay.panels[p]
        pw = n1 - n0
        mine = packed[p % two][:kmax * pw].view(kmax, pw)
        out = gathered[p % two][:world * kmax * pw].view(world * kmax, pw) if gathered else mine
        if side is not None:
            # the buffers were last used by panel p - 2's all-gather and GEMM, both ordered before
            # what the compute stream holds now
            side.wait_stream(compute)
        with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
            mine[:lay.kb[me]].copy_(b[:, n0:n1])
            if not sending:
                return out, None
            return out, _collective(f"panel {p}: the all-gather of B's columns {n0}:{n1}",
                                    lambda: _ALL_GATHER(out, mine, group=g, async_op=True))

    pending = post(0)
    for p, (n0, n1) in enumerate(lay.panels):
        out, work = pending
        if lay.ahead and p + 1 < len(lay.panels):
            pending = post(p + 1)  # in flight while panel p is multiplied
        if work is not None:
            _collective(f"panel {p}: waiting for its all-gather", work.wait)
        elif side is not None:
            compute.wait_stream(side)  # nothing sent: the product still waits for its packing
        panel_b = out if keep is None else out.index_select(0, keep)
        if a.shape[0]:
            _product(a, panel_b, c[:, n0:n1])
        if not lay.ahead and p + 1 < len(lay.panels):
            pending = post(p + 1)  # after panel p's GEMM: no collective beside it
    return c


def _product(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """out = a @ b on tilegemm's kernel (out: a column panel of C, a strided view). 16-bit CUDA
    operands go through gemm(c=out), which keeps a launch plan for the view."""
    import tilegemm

    if out.is_cuda and a.dtype in (torch.float16, torch.bfloat16):
        tilegemm.gemm(a, b, c=out)
    else:
        tilegemm.matmul(a, b, out=out)


def matmul_1d(a: torch.Tensor, b: torch.Tensor, group=None, b_sharded: bool = True,
              panel: int | None = None, transport: str | None = None) -> torch.Tensor:
    """C's rows of this rank = A's rows of this rank @ B. a: this rank's rows of A (all of K);
    b: this rank's rows of B (its slice of K, in rank order) when b_sharded, else all of B. The
    1-D algorithm (run_1d): B all-gathered a column panel at a time, beside the GEMMs or (where the
    cost model says that is faster) after each;
    transport: how the panels travel, "auto" (the default: the copy engines on GPUs of one host,
    else NCCL's or gloo's all-gather), "peer" or "nccl" (layout_1d). A replicated B moves nothing."""
    if b_sharded:
        return run_1d(a, b, layout_1d(a, b, group, panel, transport), group)
    import tilegemm

    # the same metadata as layout_1d's (one all-gather of the same length), so that ranks that
    # disagree on b_sharded, panel or transport are refused on every rank, not left in each other's
    # collectives (the panel and transport mean nothing to a replicated B, but must still agree)
    want, bad = _asked(transport)  # a wrong name is refused either way
    meta = gather_meta(_describe_meta(*_blocks(a, b), (0, 0), panel, want, algo=REPLICATED_1D), team(group))
    if bad is not None:
        raise bad  # (the others refuse it, naming this rank)
    errs = _common_errors(meta)
    if not _comparable(meta):
        _refuse(errs)  # no shapes to compare
    errs += [f"rank {m[G]}: B is {m[BR]}×{m[BC]}, rank {meta[0][G]}'s {meta[0][BR]}×{meta[0][BC]} (a replicated B "
             "is the same everywhere)" for m in meta if m[BR:BC + 1] != meta[0][BR:BC + 1]]
    errs += [f"rank {m[G]}: A has {m[AC]} columns, B has {m[BR]} rows" for m in meta if m[AC] != m[BR]]
    _refuse(errs)
    # (no rows or no K included: tilegemm.matmul's empty product keeps the graph, so that C requires
    # grad on every rank or on none: a rank whose C did not raised in its backward, the others waited)
    return tilegemm.matmul(a, b)
