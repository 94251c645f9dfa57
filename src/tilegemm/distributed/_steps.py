"""The peer transport's schedule: which rows and columns each step of the copy engines' products
moves and multiplies (tilegemm.distributed._core runs it, costmodel predicts it). Plain integers:
no torch, so that the model and the tests read the same steps the engines take."""

from __future__ import annotations

# the copy engines take no SM from the GEMMs, so nothing but the first step's transfer is exposed;
# the cost model (its rates measured on cubes) would then want the narrowest panels, whose GEMMs fill
# the GPU worse than it sees: PEER_PANELS panels, none narrower than 1024
PEER_PANELS = 8
PEER_FIRST = 4  # the first panel is this many times narrower (none narrower than 1024): the one whose copies wait


def summa_steps(mi: int, nj: int, a_moves: bool, b_moves: bool, panel: int | None) -> tuple[tuple, tuple, int]:
    """(bands over M_i, column panels over N_j, width) of the peer transport's steps. Only what
    moves is cut: where B_j is local (one grid row) A_i's bands stream past all of B_j, as the 1-D
    engine's panels do (peer_cuts: a narrow first one, whose copies alone are waited for); where
    A_i is local, B_j's panels stream past all of A_i; where both move, both grow by one band and
    one panel a step (summa_blocks), in up to PEER_PANELS steps of at least 2048 (the first
    step's GEMM fills the GPU; its copies are the ones waited for). Every rank cuts its own: a
    peer's pieces are read whole from its buffer after the barrier, so no edge need agree."""
    if a_moves and b_moves:
        steps = max(1, -(-max(mi, nj) // panel) if panel else min(PEER_PANELS, min(mi, nj) // 2048))
        bands, cols = even_edges(mi, steps, 128), even_edges(nj, steps, 256)
        return bands, cols, max(cols[1], bands[1])
    if a_moves:
        bands, width = peer_cuts(mi, panel)
        return bands, (0,) + (nj,) * (len(bands) - 1), width
    if b_moves:
        cols, width = peer_cuts(nj, panel)
        return (0,) + (mi,) * (len(cols) - 1), cols, width
    return (0, mi), (0, nj), max(mi, nj)


def even_edges(total: int, parts: int, unit: int) -> tuple:
    """`parts` near-equal pieces of `total`, each edge a multiple of `unit` where every piece can
    be (else of 8, else of 1; the last edge: total)."""
    unit = next(u for u in (unit, 8, 1) if total >= parts * u) if total >= parts else 1
    return tuple(min(total, -(-total * t // parts) // unit * unit if t < parts else total) for t in range(parts + 1))


def peer_cuts(n: int, panel: int | None) -> tuple[tuple, int]:
    """(edges over n, width) of the peer transport's panels: `panel` wide, or PEER_PANELS panels
    of at least 1024 rounded to 1024, and (unless a panel is named) a first one PEER_FIRST times
    narrower, of at least 1024: the panel whose copies are waited for."""
    width = panel or max(1024, -(-n // (PEER_PANELS * 1024)) * 1024)
    width += -width % 8 if width > 8 else 0  # starts that keep 16-byte alignment
    first = width if panel or n <= width else max(1024, width // PEER_FIRST // 8 * 8)
    return tuple([0] + [min(n, e) for e in range(first, n, width)] + [n]) if n else (0,), width


def summa_blocks(bands: tuple, cols: tuple, s: int) -> list[tuple[int, int, int, int]]:
    """The blocks (r0, r1, c0, c1) of C_ij multiplied at step s, once band s and column panel s
    have landed: band s against every column landed so far, and every earlier band against panel
    s. Over the steps they tile C_ij once."""
    out = [(bands[s], bands[s + 1], 0, cols[s + 1]), (0, bands[s], cols[s], cols[s + 1])]
    return [x for x in out if x[1] > x[0] and x[3] > x[2]]
