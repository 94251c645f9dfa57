"""Benchmark shapes are data: named sets in `tilegemm/data/shapes.json`, or a JSON file of your own.

    load_shapes("llm")            -> [(4096, 14336, 4096), ...]     a named set
    load_shapes("my_shapes.json") -> a file: {"shapes": [...]}, a bare list, or {"sets": {...}}
    parse_shape("4096x14336x4096") == parse_shape("4096×14336×4096") == (4096, 14336, 4096)
    parse_shape("512") == (512, 512, 512)
    load_shapes("held-out:7")     -> 30 shapes drawn from seed 7 (held_out)

A shape is M×N×K: C (M×N) = A (M×K) @ B (K×N).
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from importlib import resources
from pathlib import Path

SHAPES_SCHEMA = "tilegemm.shapes/1"
_SEP = re.compile(r"\s*[x×X*]\s*")
HELD_OUT = "held-out"


def parse_shape(spec) -> tuple[int, int, int]:
    """'M×N×K', 'MxNxK', 'N' (a cube), an int, or a sequence of 1 or 3 ints -> (m, n, k)."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        parts = [spec]
    elif isinstance(spec, str):
        text = spec.strip()
        if not text:
            raise ValueError("empty shape; expected 'M×N×K', 'MxNxK' or 'N'")
        try:
            parts = [int(p) for p in _SEP.split(text)]
        except ValueError:
            raise ValueError(f"cannot read shape {spec!r}; expected 'M×N×K', 'MxNxK' or 'N'") from None
    elif isinstance(spec, (list, tuple)):
        parts = list(spec)
        if not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise ValueError(f"shape {spec!r}: dimensions must be integers")
    else:
        raise ValueError(f"cannot read shape {spec!r}; expected 'M×N×K', 'MxNxK', 'N' or [m, n, k]")
    if len(parts) == 1:
        parts = parts * 3
    if len(parts) != 3:
        raise ValueError(f"shape {spec!r} has {len(parts)} dimensions; expected 1 (a cube) or 3 (M×N×K)")
    if any(p < 1 for p in parts):
        raise ValueError(f"shape {spec!r}: every dimension must be ≥ 1")
    return tuple(parts)  # type: ignore[return-value]


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """A comma- or space-separated list of shapes: '128 256 4096x14336x4096'."""
    items = [t for t in re.split(r"[\s,;]+", text.strip()) if t]
    return [parse_shape(t) for t in items]


def held_out(seed: int) -> list[tuple[int, int, int]]:
    """30 shapes drawn from `seed`, so that no tuning can have been fitted to them: 12 projections
    of Llama-3 8B or 70B (the `projections` set's N×K) at a token count M log-uniform in 2…8192;
    12 products whose sides are log-uniform in 256…8192 and multiples of 8 (rows 16-byte aligned
    for 2-byte types, seldom 128-byte aligned); 6 whose sides are any integers in 256…8192 (rows
    mostly unaligned). The shapes a user brings, where the named sets hold the ones the database
    was tuned at; a draw may still fall in a bucket tuned at another of its shapes (the
    projections' token counts are tuned a bucket apart on the H200), which is what users get."""
    rnd = random.Random(seed)
    widths = [(n, k) for _, n, k in load_shapes("projections")]

    def side(lo: int, hi: int, step: int = 1) -> int:
        x = math.exp(rnd.uniform(math.log(lo), math.log(hi)))
        return min(hi, max(lo, round(x / step) * step))

    return ([(side(2, 8192), *rnd.choice(widths)) for _ in range(12)]
            + [(side(256, 8192, 8), side(256, 8192, 8), side(256, 8192, 8)) for _ in range(12)]
            + [(side(256, 8192), side(256, 8192), side(256, 8192)) for _ in range(6)])


def held_out_seed(name: str) -> int | None:
    """The seed a 'held-out' set name draws from: 'held-out:SEED', or 'held-out' alone for today's
    date (UTC, as YYYYMMDD: one day's runs draw the same shapes); None for any other name."""
    if name == HELD_OUT:
        return int(time.strftime("%Y%m%d", time.gmtime()))
    if name.startswith(HELD_OUT + ":"):
        seed = name[len(HELD_OUT) + 1:]
        if not re.fullmatch(r"[0-9]+", seed):
            raise ValueError(f"shape set {name!r}: the seed after 'held-out:' must be a non-negative integer")
        return int(seed)
    return None


def resolve(name_or_path: str) -> tuple[str, list[tuple[int, int, int]]]:
    """(the set's name as a result names it, its shapes): load_shapes, with a held-out draw named
    by its seed ('held-out' alone is today's: the date is read once, for both)."""
    seed = held_out_seed(name_or_path)
    if seed is None:
        return name_or_path, load_shapes(name_or_path)
    return f"{HELD_OUT}:{seed}", held_out(seed)


def _builtin() -> dict:
    data = resources.files("tilegemm").joinpath("data/shapes.json").read_text(encoding="utf-8")
    doc = json.loads(data)
    if doc.get("schema") != SHAPES_SCHEMA:
        raise ValueError(f"built-in shapes.json has schema {doc.get('schema')!r}; expected {SHAPES_SCHEMA!r}")
    return doc["sets"]


def set_names() -> list[str]:
    return list(_builtin())


def describe_sets() -> dict[str, str]:
    return {name: s.get("doc", "") for name, s in _builtin().items()}


def _from_doc(doc, where: str) -> list[tuple[int, int, int]]:
    if isinstance(doc, list):
        items = doc
    elif isinstance(doc, dict) and "shapes" in doc:
        items = doc["shapes"]
    else:
        raise ValueError(f"{where}: expected a list of shapes or an object with a 'shapes' list")
    if not isinstance(items, list):  # ("8": "no shapes in it", of a file that names one)
        raise ValueError(f"{where}: 'shapes' must be a list of shapes (\"MxNxK\", N or [M, N, K]); got "
                         f"{type(items).__name__} {items!r:.40}")
    if not items:  # (an empty list ran nothing and printed an empty table)
        raise ValueError(f"{where}: no shapes in it")
    return [parse_shape(s) for s in items]


def load_shapes(name_or_path: str) -> list[tuple[int, int, int]]:
    """A built-in set by name, 'held-out' or 'held-out:SEED' (held_out), a JSON file, 'FILE.json:SET'
    for a set inside a file with 'sets', or an inline list ('128,256,4096x14336x4096')."""
    if not name_or_path.strip(" ,"):  # ('' is the current folder to Path, ',' an empty list)
        raise ValueError(f"no shapes in {name_or_path!r}: name a set, a JSON file or a list of shapes")
    seed = held_out_seed(name_or_path)
    if seed is not None:
        return held_out(seed)
    sets = _builtin()
    if name_or_path in sets:
        return _from_doc(sets[name_or_path], f"shape set {name_or_path!r}")
    path, sub = name_or_path, ""
    if not Path(name_or_path).exists() and ".json:" in name_or_path:
        path, sub = name_or_path.rsplit(":", 1)
    p = Path(path)
    if p.suffix == ".json" or p.exists():
        from .results import read_json

        doc = read_json(p, "shape file")
        if isinstance(doc, dict) and "sets" in doc:
            if not (isinstance(doc["sets"], dict) and doc["sets"]):  # (a list of them said "sequence item 0: expected
                raise ValueError(f"{p}: 'sets' must be an object of named sets ({{\"name\": [shapes]}})")  # str")
            if not sub:
                raise ValueError(f"{p} holds several sets ({', '.join(doc['sets'])}); name one as {p}:SET")
            if sub not in doc["sets"]:
                raise ValueError(f"{p} has no set {sub!r}; it has {', '.join(doc['sets'])}")
            return _from_doc(doc["sets"][sub], f"{p}:{sub}")
        return _from_doc(doc, str(p))
    try:
        return parse_shapes(name_or_path)
    except ValueError as e:
        why = f" ({e})" if any(c.isdigit() for c in name_or_path) else ""  # (it reads as a list of shapes: why not)
        raise ValueError(f"unknown shape set {name_or_path!r}: not a built-in set "
                         f"({', '.join(sets)}, {HELD_OUT}[:SEED]), a JSON file, or a list of shapes{why}") from None
