"""The tuning data shipped in the package: one JSON file per GPU under `tilegemm/data/tuning/`.

A file holds the GPU's name, compute capability and SM count, the versions it was tuned with,
`entries` (the tensor-core decisions by problem class and shape bucket: `tilegemm.tuning`) and
`simt` (the SIMT ladder's autotuned winner by dtype: `kernels/simt/k11_autotuned`). It is data,
read here for both; written by `tilegemm tune --ship`. Nothing here imports a GPU library.
"""

from __future__ import annotations

import json
import warnings
from importlib import resources

FOLDER = "data/tuning"  # inside the package
_DBS: dict | None = None


def slug(gpu: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (a database's file name)."""
    return "-".join("".join(ch if ch.isalnum() else " " for ch in gpu.lower()).split())


def databases() -> dict:
    """slug -> the shipped database of that GPU, read once per process."""
    global _DBS
    if _DBS is None:
        found = {}
        folder = resources.files("tilegemm").joinpath(FOLDER)
        for item in (folder.iterdir() if folder.is_dir() else ()):
            if item.name.endswith(".json"):
                try:
                    found[item.name[:-5]] = json.loads(item.read_text())
                except ValueError as e:
                    warnings.warn(f"tilegemm: shipped database {item.name} unreadable ({e})", RuntimeWarning)
        _DBS = found
    return _DBS


def forget() -> None:
    global _DBS
    _DBS = None


def database_for(gpu: str, capability: tuple, sms: int) -> tuple[dict | None, str]:
    """The database of this GPU, or of the known GPU most like it (same compute capability,
    nearest SM count), with a phrase saying which; (None, why) when none fits."""
    dbs = databases()
    mine = dbs.get(slug(gpu))
    if mine is not None:
        return mine, f"the shipped database for {gpu}"
    alike = [d for d in dbs.values() if tuple(d.get("capability", ())) == tuple(capability)]
    if not alike:
        return None, f"no shipped database for {gpu} or another sm_{capability[0]}{capability[1]} GPU"
    best = min(alike, key=lambda d: (abs(int(d.get("sms", 0)) - sms), -_common_prefix(d.get("gpu", ""), gpu)))
    return best, (f"the shipped database for {best.get('gpu')} ({gpu} is not in the database; that GPU has the "
                  f"same compute capability and the nearest SM count, {best.get('sms')})")


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.lower(), b.lower()):
        if x != y:
            break
        n += 1
    return n
