"""The tuning data shipped in the package: one JSON file per GPU under `tilegemm/data/tuning/`.

A file holds the GPU's name, compute capability and SM count, the versions it was tuned with,
`entries` (the tensor-core decisions by problem class and shape bucket: `tilegemm.tuning`) and
`simt` (the SIMT ladder's autotuned winner by dtype: `kernels/simt/k11_autotuned`). It is data,
read here for both; written by `tilegemm tune --ship`. Nothing here imports a GPU library.
"""

from __future__ import annotations

import json
import re
import warnings
from importlib import resources

FOLDER = "data/tuning"  # inside the package
_DBS: dict | None = None


def slug(gpu: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (a database's file name)."""
    return "-".join("".join(ch if ch.isalnum() else " " for ch in gpu.lower()).split())


def databases() -> dict:
    """slug -> the shipped database of that GPU, read once per process, in the order of the files'
    names (`database_for` breaks its last tie by the GPU's name, not by this order). A file that is not a database is left out, and entries
    that are not decisions (a hand-edited file) are dropped, each with a warning."""
    global _DBS
    if _DBS is None:
        found = {}
        folder = resources.files("tilegemm").joinpath(FOLDER)
        for item in sorted(folder.iterdir() if folder.is_dir() else (), key=lambda it: it.name):
            if item.name.endswith(".json"):
                try:
                    db = json.loads(item.read_text())
                except ValueError as e:
                    warnings.warn(f"tilegemm: shipped database {item.name} unreadable ({e})", RuntimeWarning)
                    continue
                why = database_problem(db)
                if why:
                    warnings.warn(f"tilegemm: shipped database {item.name} ignored ({why})", RuntimeWarning)
                    continue
                bad = [k for k, e in db.get("entries", {}).items() if not is_entry(k, e)]
                if bad:
                    warnings.warn(f"tilegemm: shipped database {item.name}: {len(bad)} entries that are not "
                                  f"decisions ignored, e.g. {bad[0]!r}", RuntimeWarning)
                    db = dict(db, entries={k: e for k, e in db["entries"].items() if k not in set(bad)})
                found[item.name[:-5]] = db
        _DBS = found
    return _DBS


def database_problem(db) -> str:
    """Why `db` (a file's JSON) is not a tuning database, as `tilegemm tune` writes one; '' where it
    is one (or an empty object). Entries are judged one by one apart (is_entry)."""
    if not isinstance(db, dict):
        return f"a JSON {type(db).__name__}, not an object"
    if "schema" in db or (db and "entries" not in db):
        return "an object without 'entries' (a results document, a tuning cache or another file)"
    if not isinstance(db.get("entries", {}), dict) or not isinstance(db.get("simt", {}), dict):
        return "its entries or simt are not JSON objects"
    cap, sms = db.get("capability", [0, 0]), db.get("sms", 0)
    if not (isinstance(cap, list) and len(cap) == 2 and all(isinstance(x, int) for x in cap)) \
            or not isinstance(sms, int) or not isinstance(db.get("gpu", ""), str):
        return "its gpu, capability or sms is not a name, [major, minor] or a count"
    return ""


_BUCKET = re.compile(r"[1-9][0-9]*x[1-9][0-9]*x[1-9][0-9]*(b[1-9][0-9]*)?")


def is_entry(key: str, e) -> bool:
    """A decision: 'precision|in|out|layout|beta|bucket' → an object with a rung and a configuration."""
    parts = key.split("|")
    return (len(parts) == 6 and _BUCKET.fullmatch(parts[5]) is not None and isinstance(e, dict)
            and isinstance(e.get("rung"), str) and isinstance(e.get("config"), dict))


def forget() -> None:
    global _DBS
    _DBS = None


def database_for(gpu: str, capability: tuple, sms: int, having: str = "") -> tuple[dict | None, str]:
    """The database of this GPU, or of the known GPU most like it (same compute capability,
    nearest SM count), with a phrase saying which; (None, why) when none fits. having: only
    databases with an entry of that class (a key beginning 'having|')."""
    dbs = databases()
    if having:
        dbs = {k: d for k, d in dbs.items() if holds(d, having)}
    mine = dbs.get(slug(gpu))
    if mine is not None:
        return mine, f"the shipped database for {gpu}"
    alike = [d for d in dbs.values() if tuple(d.get("capability", ())) == tuple(capability)]
    if not alike:
        return None, (f"no shipped database for {gpu} or another sm_{capability[0]}{capability[1]} GPU"
                      + (f" with {having} entries" if having else ""))
    best = min(alike, key=lambda d: (abs(int(d.get("sms", 0)) - sms), -_common_prefix(d.get("gpu", ""), gpu),
                                     d.get("gpu", "")))  # (the name last: never the folder's listing order)
    mine = f"{gpu}'s has no {having} entries" if having and slug(gpu) in databases() else \
        f"{gpu} is not in the database"
    return best, (f"the shipped database for {best.get('gpu')} ({mine}; that GPU has the same compute capability "
                  f"and the nearest SM count, {best.get('sms')})")


def holds(db: dict, word: str) -> bool:
    """Has db an entry whose key begins 'word|' (a class's precision word, as cache.PROMOTED)?"""
    return any(k.startswith(word + "|") for k in db.get("entries", {}))


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.lower(), b.lower()):
        if x != y:
            break
        n += 1
    return n
