"""Session 57 (docs/perf-notes.md, 113): the H200 database as committed, from the one the device's tuning left
(db-after-tuning.json: 5188f9f's with 132 grid buckets and 117 M-row buckets added) and the surveys here. CPU, from
the repository root: PYTHONPATH=src python3 results/archive/h200-session57/db_edits.py [OUT.json]
  1. session 56's 212 grid entries removed: at 8 shapes inside their buckets (survey-g2-*) 4 ran slower than
     without them by more than 3%, 2 faster; device-clock geomean 0.967×
  2. where a shape inside a bucket ran slower on the bucket's new entry (or a new neighbour's) than on the pick
     before, that pick is written as the bucket's entry, "kept", with the shape and time it was measured at, and
     `when` the time of the survey that showed it slower (its file's time on the device)
  3. FP16's pick at 896×1024×4096 kept: BF16's kept entry there became FP16 777×1234×4321's nearest, 40.7 -> 44.0
     µs on the device clock (run_f-stdout-tail.txt); the entry is the FP16 one that shape took before
The surveys' "after" databases were steps on the way: run_f's (db-run-f-after.json) is step 2's first six entries
over db-after-tuning.json; run_g's (db-run-g-after.json) steps 1 and 3 and the 2780×6144×4096 entry besides."""
import json, re, subprocess, sys
from unittest import mock
sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W  # noqa: E402  (CPU problems on meta tensors; t05's usability without a GPU)
from tilegemm import tuning  # noqa: E402
from tilegemm.kernels.tensorcore import _problem as P  # noqa: E402
from tilegemm.tuning import cache, space  # noqa: E402

A = "results/archive/h200-session57/"
DB = "src/tilegemm/data/tuning/nvidia-h200.json"
db = json.load(open(A + "db-after-tuning.json"))
head = json.loads(subprocess.check_output(["git", "show", "5188f9f:" + DB]))
without212 = json.load(open(A + "db-without-grid212.json"))
rows = lambda f: {(r["m"], r["n"], r["k"]): r for r in json.load(open(A + f))}
TUNED, M_ROWS, GRID = ("the tuning of 2026-12-02 at this bucket's shape", "2026-12-02's entries at M = 320-5120",
                       "the grid's entries of 2026-12-01/02")
KEPT = [  # (layout K-major, shape, database before, survey before, survey after, its time, what the entry replaced)
    (False, (300, 1024, 4096), head, "survey-mfam.json", "survey-mfam-after.json", "15:38:50", TUNED),
    (False, (777, 1024, 4096), head, "survey-mfam.json", "survey-mfam-after.json", "15:38:50", TUNED),
    (False, (2900, 14336, 4096), head, "survey-mfam.json", "survey-mfam-after.json", "15:38:50", TUNED),
    (True, (300, 1024, 4096), head, "survey-mfamnt.json", "survey-mfamnt-after.json", "15:38:59", TUNED),
    (True, (777, 1024, 4096), head, "survey-mfamnt.json", "survey-mfamnt-after.json", "15:38:59", TUNED),
    (True, (300, 6144, 4096), head, "survey-mfamnt.json", "survey-mfamnt-after.json", "15:38:59", TUNED),
    (False, (2780, 6144, 4096), head, "survey-hn-before.json", "survey-hn-after.json", "15:42:29", TUNED),
    (False, (4888, 4112, 4984), head, "survey-zn-before.json", "survey-zn-after.json", "15:46:19", M_ROWS),
    (False, (396, 1024, 4096), head, "survey-zn-before.json", "survey-zn-after.json", "15:46:19", M_ROWS),
    (False, (2504, 3600, 1096), without212, "survey-g2-before.json", "survey-g2-after.json", "15:43:35", GRID),
]
for b in json.load(open(A + "shapes-b212-buckets.json")):
    del db["entries"]["bf16|bfloat16|bfloat16|nn|nobeta|" + b]
usable = tuning.usable
with mock.patch.object(P, "num_sms", return_value=132), \
        mock.patch.object(tuning, "usable", lambda r, p: W.t05_runs(p) if r == space.T05 else usable(r, p)):
    for wt, (m, n, k), before, fb, fa, when, what in KEPT:
        p = W.problem("bf16", m, n, k, wt)
        d = tuning.pick(before, "db", p)
        bus, aus = rows(fb)[(m, n, k)]["device"][0], rows(fa)[(m, n, k)]["device"][0]
        db["entries"][cache.problem_class(p) + "|" + cache.bucket(p)] = dict(
            rung=d.rung, config=d.config, ms=round(bus / 1e3, 5), shape=[m, n, k], when=f"2026-12-02T{when}",
            kept=f"the database's pick here before {what}: at {m}×{n}×{k} {bus:.1f} µs against {aus:.1f} on the "
                 "library's device clock (docs/perf-notes.md, 113)")
    p = W.problem("fp16", 777, 1024, 4096, False)  # a shape of the bucket, aligned: the entry FP16 took there
    src = re.search(r"bucket (\S+)", tuning.pick(head, "db", p).source).group(1)
    entry = head["entries"][cache.problem_class(p) + "|" + src]
    db["entries"][cache.problem_class(p) + "|" + cache.bucket(p)] = dict(
        entry, when="2026-12-02T15:43:53",
        kept=f"FP16's pick here before BF16's 896×1024×4096 entry of 2026-12-02 (the {src} entry, which FP16's "
             "shapes of this bucket took): FP16 777×1234×4321, whose nearest this bucket is, ran 40.7 µs with it "
             "against 44.0 with BF16's on the library's device clock (docs/perf-notes.md, 113)")
cache.write_json(sys.argv[1] if len(sys.argv) > 1 else DB, db, replace=True)
print(len(db["entries"]), "entries")
