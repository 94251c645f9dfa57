"""Shards of the suite that take about as long: tests dealt by their recorded times
(tests/durations.json, written by `pytest --record-durations`), for conftest's --shard I/N."""

import fcntl
import json
import os
import statistics
from pathlib import Path


def deal(times, n):
    """Shard of each test, `times` its seconds in collection order: the longest first, each to the
    shard with the least time so far (ties: the lower shard). Every process deals alike."""
    load = [0.0] * n
    shard = [0] * len(times)
    for j in sorted(range(len(times)), key=lambda j: (-times[j], j)):
        shard[j] = min(range(n), key=load.__getitem__)
        load[shard[j]] += times[j]
    return shard


def times(path, nodeids):
    """Each test's recorded seconds; a test not yet recorded counts as the median one."""
    known = json.loads(path.read_text()) if path.exists() else {}
    typical = statistics.median(known.values()) if known else 1.0
    return [known.get(k, typical) for k in nodeids]


def record(path, measured, root):
    """Merge `measured` ({nodeid: seconds}) into the JSON at `path`; a test file gone from `root`
    takes its entries with it. Shards side by side each merge their own, one at a time (a lock on
    the file's folder), and the file is replaced whole, so a reader never sees half of one."""
    path = Path(path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        old = json.loads(path.read_text()) if path.exists() else {}
        merged = {k: v for k, v in old.items() if (root / k.split("::")[0]).exists()}
        merged.update((k, round(v, 3)) for k, v in measured.items())
        part = path.with_name(path.name + f".{os.getpid()}")
        part.write_text(json.dumps(dict(sorted(merged.items())), indent=0) + "\n")
        os.replace(part, path)
    finally:
        os.close(folder)  # (and the lock with it)
