"""Session 56 (docs/perf-notes.md, 112): the 1280..5120 grid's BF16 buckets a fill would tune, less those that would become the bucket a
shape of the committed sets (library, tensor-core bench, model projections; every dtype and layout
they are measured in) takes, whose figures stand measured (CPU, meta tensors). Run from the repository
root, on the database after fill_probe.py's 29 entries and before grid_tune.py (a3552e6's plus those 29; it
rewrites grid-todo.json here): PYTHONPATH=src python3 results/archive/h200-session56/grid_plan.py"""
import itertools, json, os, re, sys
from unittest import mock
sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W
from tilegemm import tuning
from tilegemm.bench.shapes import load_shapes
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import space

VALS = (1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120)
db = json.load(open("src/tilegemm/data/tuning/nvidia-h200.json"))
cls = "bf16|bfloat16|bfloat16|nn|nobeta"
have = {k.rsplit("|", 1)[1] for k in db["entries"] if k.startswith(cls + "|")}
todo = ["x".join(map(str, s)) for s in itertools.product(VALS, repeat=3)]
todo = [b for b in todo if b not in have]
std = space.t05_cfg(128, 256, 64, 3)
sets = [(s, False) for s in load_shapes("library")] + [(s, False) for s in W.TENSORCORE] + [(s, True) for s in W.MODEL]
bucket_of = lambda d: (re.search(r"bucket (\S+)", d.source) or re.search(r"(exact) bucket", d.source)).group(1)
usable = tuning.usable
excluded = set()
with mock.patch.object(P, "num_sms", return_value=132), \
        mock.patch.object(tuning, "usable", lambda r, p: W.t05_runs(p) if r == space.T05 else usable(r, p)):
    probs = [W.problem(dt, m, n, k, lay or dt == "fp8") for (m, n, k), lay in sets for dt in W.DTYPES]
    before = [tuning.pick(db, "db", p) for p in probs]
    while True:
        fake = dict(db, entries=dict(db["entries"], **{
            f"{cls}|{b}": dict(rung=space.T05, config=std, shape=[int(x) for x in b.split("x")])
            for b in todo if b not in excluded}))
        new = set()
        for p, d0 in zip(probs, before):
            d1 = tuning.pick(fake, "db", p)
            if d1 is not None and (d0 is None or d1.source != d0.source):
                b1 = space.shape_bucket(p) if "exact bucket" in d1.source else bucket_of(d1)
                if b1 in todo and b1 not in excluded:
                    new.add(b1)
        if not new:
            break
        excluded |= new
keep = [b for b in todo if b not in excluded]
print(len(todo), "grid buckets untuned;", len(excluded), "excluded (a set shape would take them):", sorted(excluded))
json.dump(keep, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "grid-todo.json"), "w"))
print(len(keep), "to tune")
