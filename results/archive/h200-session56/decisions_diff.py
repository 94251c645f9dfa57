"""Session 56 (docs/perf-notes.md, 112): the decisions of the library, model and tensor-core sets that differ between
the H200 database at a commit and the working tree's (CPU, meta tensors; 0 moved across the fill):
    PYTHONPATH=src python3 results/archive/h200-session56/decisions_diff.py <commit>"""
import json, subprocess, sys
from unittest import mock
sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W
from tilegemm import tuning
from tilegemm.bench.shapes import load_shapes
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import space

old = json.loads(subprocess.check_output(["git", "show", sys.argv[1] + ":src/tilegemm/data/tuning/nvidia-h200.json"]))
new = json.load(open("src/tilegemm/data/tuning/nvidia-h200.json"))
usable = tuning.usable
moved = []
with mock.patch.object(P, "num_sms", return_value=132), \
        mock.patch.object(tuning, "usable", lambda r, p: W.t05_runs(p) if r == space.T05 else usable(r, p)):
    for name, shapes, lay in (("library", load_shapes("library"), False), ("tensorcore", W.TENSORCORE, False),
                              ("model", W.MODEL, True)):
        for dtype in W.DTYPES:
            for m, n, k in shapes:
                p = W.problem(dtype, m, n, k, lay or dtype == "fp8")
                a, b = tuning.pick(old, "db", p), tuning.pick(new, "db", p)
                if (a.rung, a.config) != (b.rung, b.config):
                    moved.append((name, dtype, m, n, k, a.source.split(", ")[-1][:50], b.source.split(", ")[-1][:50]))
for r in moved:
    print(*r)
print(len(moved), "moved")
