"""Session 57 (docs/perf-notes.md, 113): each survey's shapes before and with the database as committed (CPU):
the figure of the decision the committed database gives, from the survey that timed it.
    PYTHONPATH=src python3 results/archive/h200-session57/summary.py"""
import json, sys, math
from unittest import mock
sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W
from tilegemm import tuning
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import space
new = json.load(open("src/tilegemm/data/tuning/nvidia-h200.json"))
usable = tuning.usable
A = "results/archive/h200-session57/"
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
sets = [("M-family, nn (M 300/777/1500/2900/5000; tuned buckets' interiors)", A + "survey-mfam.json", A + "survey-mfam-after.json", False),
        ("M-family, nt", A + "survey-mfamnt.json", A + "survey-mfamnt-after.json", True),
        ("held out A: M-family nn", A + "survey-hn-before.json", A + "survey-hn-after.json", False),
        ("held out A: M-family nt", A + "survey-ht-before.json", A + "survey-ht-after.json", True),
        ("held out A: grid, this session's 132", A + "survey-g1-before.json", A + "survey-g1-after.json", False),
        ("held out A: grid, session 56's 212 (reverted)", A + "survey-g2-before.json", A + "survey-g2-after.json", False),
        ("held out B: mixed nn", A + "survey-zn-before.json", A + "survey-zn-after.json", False),
        ("held out B: M-family nt", A + "survey-zt-before.json", A + "survey-zt-after.json", True)]
with mock.patch.object(P, "num_sms", return_value=132), \
        mock.patch.object(tuning, "usable", lambda r, p: W.t05_runs(p) if r == space.T05 else usable(r, p)):
    for name, fb, fa, lay in sets:
        B, A = json.load(open(fb)), json.load(open(fa))
        rb, rf, unk = [], [], 0
        for x, y in zip(B, A):
            assert (x["m"], x["n"], x["k"]) == (y["m"], y["n"], y["k"])
            d = tuning.pick(new, "db", W.problem("bf16", x["m"], x["n"], x["k"], lay))
            fin = y if (d.rung, d.config) == (y["rung"], y["config"]) else x if (d.rung, d.config) == (x["rung"], x["config"]) else None
            if fin is None:
                unk += 1; fin = y
            rb.append(x["device"][1] / x["device"][0]); rf.append(fin["device"][1] / fin["device"][0])
        print(f"{name}: {len(B)} shapes, device ratio geomean {g(rb):.3f} -> {g(rf):.3f}, min {min(rb):.3f} -> {min(rf):.3f}, "
              f"under 0.85: {sum(r < 0.85 for r in rb)} -> {sum(r < 0.85 for r in rf)}; decisions neither measured: {unk}")
