"""Session 57 (docs/perf-notes.md, 113): note 113's table and figures from the surveys here and the committed H200
database (CPU): for each survey, the shapes before, as the "after" survey timed them, and with the committed
database (each shape at the figure of the survey that timed the decision the committed database gives it).
    PYTHONPATH=src python3 results/archive/h200-session57/summary.py"""
import json
import math
import sys
from unittest import mock

sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W  # noqa: E402  (CPU problems on meta tensors; t05's usability without a GPU)
from tilegemm import tuning  # noqa: E402
from tilegemm.bench.shapes import load_shapes  # noqa: E402
from tilegemm.kernels.tensorcore import _problem as P  # noqa: E402
from tilegemm.tuning import space  # noqa: E402

HERE = "results/archive/h200-session57/"
DB = json.load(open("src/tilegemm/data/tuning/nvidia-h200.json"))
WIDTHS = {(n, k) for _, n, k in load_shapes("projections")}
geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
ratio = lambda r, mode="device": r[mode][1] / r[mode][0]  # noqa: E731
llama = lambda r: (r["n"], r["k"]) in WIDTHS  # noqa: E731
aligned8 = lambda r: r["n"] % 8 == 0 and r["k"] % 8 == 0  # noqa: E731
SETS = [  # (row, before, after, B K-major, which rows)
    ("Llama rows in the tuned buckets, B row-major", "survey-mfam.json", "survey-mfam-after.json", False, None),
    ("Llama rows in the tuned buckets, x·Wᵀ", "survey-mfamnt.json", "survey-mfamnt-after.json", True, None),
    ("held out A: Llama rows, B row-major", "survey-hn-before.json", "survey-hn-after.json", False, None),
    ("held out A: Llama rows, x·Wᵀ", "survey-ht-before.json", "survey-ht-after.json", True, None),
    ("held out A: in the 132 grid buckets", "survey-g1-before.json", "survey-g1-after.json", False, None),
    ("held out A: in session 56's 212", "survey-g2-before.json", "survey-g2-after.json", False, None),
    ("held out B: Llama rows, B row-major", "survey-zn-before.json", "survey-zn-after.json", False, llama),
    ("held out B: grid, rows aligned to 8", "survey-zn-before.json", "survey-zn-after.json", False,
     lambda r: not llama(r) and aligned8(r)),
    ("held out B: grid, rows not aligned to 8", "survey-zn-before.json", "survey-zn-after.json", False,
     lambda r: not aligned8(r)),
    ("held out B: Llama rows, x·Wᵀ", "survey-zt-before.json", "survey-zt-after.json", True, None),
]


def committed(before, after, wt):
    """Each shape's figure with the committed database: the after survey's row where its decision is the
    database's, else the before survey's; and how many are neither (a decision no survey timed)."""
    out, untimed = [], 0
    for x, y in zip(before, after):
        assert (x["m"], x["n"], x["k"]) == (y["m"], y["n"], y["k"])
        d = tuning.pick(DB, "db", W.problem("bf16", x["m"], x["n"], x["k"], wt))
        mine = (d.rung, d.config)
        row = y if mine == (y["rung"], y["config"]) else x if mine == (x["rung"], x["config"]) else None
        untimed += row is None
        out.append(row or y)
    return out, untimed


usable = tuning.usable
aligned_rows = []
with mock.patch.object(P, "num_sms", return_value=132), \
        mock.patch.object(tuning, "usable", lambda r, p: W.t05_runs(p) if r == space.T05 else usable(r, p)):
    print("| shapes | n | before | after (as surveyed) | committed | worst: before → committed |")
    print("|---|---|---|---|---|---|")
    for name, fb, fa, wt, keep in SETS:
        before, after = json.load(open(HERE + fb)), json.load(open(HERE + fa))
        final, untimed = committed(before, after, wt)
        rows = [(x, y, z) for x, y, z in zip(before, after, final) if keep is None or keep(x)]
        b, a, c = ([ratio(t[i]) for t in rows] for i in range(3))
        note = f" ({untimed} committed decision untimed: its after figure)" if untimed else ""
        print(f"| {name}{note} | {len(rows)} | {geo(b):.3f} | {geo(a):.3f} | {geo(c):.3f} | {min(b):.3f} → {min(c):.3f} |")
        be, ce = [ratio(t[0], "eager") for t in rows], [ratio(t[2], "eager") for t in rows]
        print(f"|   eager | | {geo(be):.3f} | | {geo(ce):.3f} | |")
        if not wt:
            aligned_rows += [(x, z) for x, _, z in rows if aligned8(x)]
    # rows 128-byte aligned (N and K multiples of 64, 2-byte types) or not, B row-major, rows aligned to 8
    for when, i in (("before", 0), ("committed", 1)):
        for label, test in (("N and K multiples of 64", lambda r: r["n"] % 64 == 0 and r["k"] % 64 == 0),
                            ("neither", lambda r: r["n"] % 64 and r["k"] % 64)):
            got = [ratio(t[i]) for t in aligned_rows if test(t[i])]
            print(f"{when}: {label}: {len(got)} shapes, device geomean {geo(got):.3f}")
    ua = json.load(open(HERE + "survey-ua.json"))
    for label, rows in (("unaligned", [r for r in ua if not aligned8(r)]), ("rounded to 8", [r for r in ua if aligned8(r)])):
        got = [ratio(r) for r in rows]
        print(f"survey-ua {label}: {len(got)} shapes, device geomean {geo(got):.3f}, min {min(got):.3f}, "
              f"under 0.85: {sum(x < 0.85 for x in got)}")
