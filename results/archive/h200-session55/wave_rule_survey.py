"""How many decisions `space.t05_fits_waves` moves (docs/perf-notes.md, 110), on a CPU: the shipped
H200 database, 132 SMs, t05 taken as able to run every plain product whose operands TMA can read
(as on the H200). Each problem's decision with the rule and without it (the rule answering yes).

    PYTHONPATH=src python3 results/archive/h200-session55/wave_rule_survey.py > wave-rule-survey.txt
"""
import itertools
import json
from unittest import mock

import torch

from tilegemm import tuning
from tilegemm.bench.shapes import load_shapes
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.kernels.tensorcore import t05_warp_specialized as t05
from tilegemm.tuning import cache, command, space

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp8": torch.float8_e4m3fn}
GRID = (1280, 1536, 1792, 2048, 2304, 2560, 2816, 3072, 3328, 3584, 3840, 4096, 4608, 5120)
MODEL = [(m, n, k) for m in (1, 8, 16, 32, 64, 128, 512, 2048, 8192)
         for n, k in ((4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (8192, 8192), (1024, 8192),
                      (28672, 8192), (8192, 28672))]
TENSORCORE = [(1024,) * 3, (2048,) * 3, (4096,) * 3, (8192,) * 3, (16384,) * 3, (4096, 14336, 4096),
              (8192, 8192, 1024), (16, 4096, 4096), (128, 4096, 4096), (1, 4096, 4096), (64, 8192, 8192)]


def problem(dtype, m, n, k, b_t):
    dt = DTYPES[dtype]
    a = torch.empty(m, k, dtype=dt, device="meta")
    b = torch.empty(n, k, dtype=dt, device="meta").t() if b_t else torch.empty(k, n, dtype=dt, device="meta")
    c = torch.empty(m, n, dtype=torch.bfloat16 if dtype == "fp8" else dt, device="meta")
    return P.Problem(a, b, c, dtype)


def t05_runs(p):  # t05.usable without its device check (the meta tensors here are on no GPU)
    a, b, c = p.a, p.b, p.c
    return (p.batch == 1 and p.alpha == 1.0 and not p.has_beta and t05._row_major(a) and t05._row_major(c)
            and (t05._row_major(b) or t05._col_major(b)) and (a.element_size() != 1 or t05._col_major(b)))


def survey(db, name, shapes, model_layout=False):
    rule, moved, total = space.t05_fits_waves, [], 0
    for dtype in DTYPES:
        for m, n, k in shapes:
            p = problem(dtype, m, n, k, model_layout or dtype == "fp8")
            space.t05_fits_waves = lambda p, c: True
            try:
                before = tuning.pick(db, "db", p)
            finally:
                space.t05_fits_waves = rule
            after = tuning.pick(db, "db", p)
            total += 1
            if (before.rung, before.config) != (after.rung, after.config):
                moved.append((dtype, m, n, k, before.source.split(", ")[1].split(" (")[0],
                              after.source.split(", ")[1].split(" (")[0]))
    print(f"{name}: {len(moved)} of {total} decisions moved")
    for row in moved[:: max(1, len(moved) // 12)]:
        print("   ", *row)


def main():
    with open(command.db_path("NVIDIA H200")) as f:
        db = json.load(f)
    usable = tuning.usable
    with mock.patch.object(P, "num_sms", return_value=132), \
            mock.patch.object(tuning, "usable", lambda r, p: t05_runs(p) if r == space.T05 else usable(r, p)):
        survey(db, "library set", load_shapes("library"))
        survey(db, "tensor-core bench", TENSORCORE)
        survey(db, "model projections (x @ W.T)", MODEL, model_layout=True)
        survey(db, f"grid {GRID[0]}..{GRID[-1]} cubed", list(itertools.product(GRID, repeat=3)))
        tf32, big = "tf32|float32|float32|nn|nobeta", list(itertools.product(GRID[1:] + (6144,), repeat=3))
        took = sum(cache.nearest(db["entries"], tf32, space.shape_bucket(problem("tf32", *s, False)))[0][0]
                   == "3072x3072x3072" for s in big)
        print(f"TF32 shapes of the grid {GRID[1]}..6144 cubed whose nearest entry is 3072³'s: {took} of {len(big)}")


if __name__ == "__main__":
    main()
