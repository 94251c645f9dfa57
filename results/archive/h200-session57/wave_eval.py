"""Session 57 (docs/perf-notes.md, 113): does t05_fits_waves' count (waves × (BM + BN)) name the faster of two t05
decisions the surveys timed at one shape? CPU: PYTHONPATH=src python3 results/archive/h200-session57/wave_eval.py
A split tile's waves are counted at its tiles × SPLIT and divided by SPLIT (its k-steps a tile)."""
import json, sys, math
from unittest import mock
sys.path.insert(0, "results/archive/h200-session55")
import wave_rule_survey as W
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import space
A = "results/archive/h200-session57/"
pairs = [("survey-mfam.json", "survey-mfam-after.json", False), ("survey-mfamnt.json", "survey-mfamnt-after.json", True)]
pairs += [(f"survey-{s}-before.json", f"survey-{s}-after.json", s in ("ht", "zt")) for s in ("hn", "ht", "g1", "g2", "zn", "zt")]
pairs += [("survey-mfam.json", "survey-mtuned.json", False)]
ok = bad = tie = 0
rows = []
with mock.patch.object(P, "num_sms", return_value=132):
    for fb, fa, wt in pairs:
        B = {(r["m"], r["n"], r["k"]): r for r in json.load(open(A + fb))}
        for y in json.load(open(A + fa)):
            key = (y["m"], y["n"], y["k"]); x = B.get(key)
            if not x or x["rung"] != "tc_warp_specialized" or y["rung"] != "tc_warp_specialized":
                continue
            cx, cy = x["config"], y["config"]
            tx, ty = (cx["BM"], cx["BN"]), (cy["BM"], cy["BN"])
            if tx == ty and cx.get("SPLIT", 1) == cy.get("SPLIT", 1):
                continue
            p = W.problem("bf16", *key, wt)
            wx, wy = space._waves(p, (tx, ty))
            sx, sy = cx.get("SPLIT", 1), cy.get("SPLIT", 1)
            # split-K multiplies tiles, divides the k-steps
            wx = math.ceil(math.ceil(p.m / tx[0]) * math.ceil(p.n / tx[1]) * sx / 132) / sx
            wy = math.ceil(math.ceil(p.m / ty[0]) * math.ceil(p.n / ty[1]) * sy / 132) / sy
            px, py = wx * sum(tx), wy * sum(ty)
            mx, my = x["device"][0], y["device"][0]
            if abs(mx / my - 1) < 0.03:
                tie += 1; continue
            good = (px < py) == (mx < my) if px != py else None
            if good is None: tie += 1
            elif good: ok += 1
            else: bad += 1
            rows.append((key, tx, sx, ty, sy, round(px), round(py), mx, my, good))
ns=[r for r in rows if r[2]==1 and r[4]==1]; sp=[r for r in rows if not(r[2]==1 and r[4]==1)]
print("unsplit", len(ns), sum(r[-1] is True for r in ns), "split", len(sp), sum(r[-1] is False for r in sp))
print("model right", ok, "wrong", bad, "ties/within 3%", tie)
