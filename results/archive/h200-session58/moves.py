"""Session 58 (docs/perf-notes.md, 114): the decisions that differ (CPU, meta tensors) between
  head: the H200 database at COMMIT (as run: 0e6d33c, before this session's 81 entries), split-K tiles
        carried to any K (space.t04_fits_k off), and
  new:  the working tree's database with space.t04_fits_k,
over the library, tensor-core and model sets and held-out draws, per dtype; a shape neither decides
(the heuristic's) counts as moved only if one does:
    PYTHONPATH=src python3 results/archive/h200-session58/moves.py 0e6d33c 20261202 20261203 20261204 20261205
With `tree` for COMMIT, head is the working tree's database too: what the rule alone moves."""
import json, subprocess, sys
from unittest import mock
sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W
from tilegemm import tuning
from tilegemm.bench.shapes import held_out, load_shapes
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import space

new = json.load(open("src/tilegemm/data/tuning/nvidia-h200.json"))
head = new if sys.argv[1] == "tree" else json.loads(
    subprocess.check_output(["git", "show", sys.argv[1] + ":src/tilegemm/data/tuning/nvidia-h200.json"]))
sets = [("library", load_shapes("library"), False), ("tensorcore", W.TENSORCORE, False), ("model", W.MODEL, True)]
sets += [(f"held-out:{s}", held_out(int(s)), False) for s in sys.argv[2:]]
usable, rule = tuning.usable, space.t04_fits_k
with mock.patch.object(P, "num_sms", return_value=132), \
        mock.patch.object(tuning, "usable", lambda r, p: W.t05_runs(p) if r == space.T05 else usable(r, p)):
    for name, shapes, lay in sets:
        for dtype in W.DTYPES:
            moved = []
            for m, n, k in shapes:
                if dtype == "fp8" and (n % 16 or k % 16):
                    continue
                p = W.problem(dtype, m, n, k, lay or dtype == "fp8")
                space.t04_fits_k = lambda *a: True
                try:
                    a = tuning.pick(head, "db", p)
                finally:
                    space.t04_fits_k = rule
                b = tuning.pick(new, "db", p)
                if (a and (a.rung, a.config)) != (b and (b.rung, b.config)):
                    moved.append(f"{m}x{n}x{k}")
            if moved:
                print(name, dtype, len(moved), " ".join(moved))
