"""Host µs a call of tilegemm.matmul on N-D / 1-D torch CUDA operands: with the view plans (new) and
without (old: dispatch.remember_view a no-op, plans reset), torch.matmul beside, GPU not waited on."""
import json, os
import torch
import tilegemm
from tilegemm import dispatch
from tilegemm.bench.overhead import time_calls

real = dispatch.remember_view
res = []
cases = [("x3d @ W.t() 1x1x4096 . 4096x4096", (1, 1, 4096), (4096, 4096), True),
         ("x3d @ W.t() 64x1x4096 . 4096x4096", (64, 1, 4096), (4096, 4096), True),
         ("x3d @ W 4x128x1024 . 1024x1024", (4, 128, 1024), (1024, 1024), False),
         ("vec @ W 4096 . 4096x4096", (4096,), (4096, 4096), False),
         ("batched 8x64x64 . 8x64x64", (8, 64, 64), (8, 64, 64), False),
         ("batched 32x128x64 . 32x64x128", (32, 128, 64), (32, 64, 128), False)]
sync = torch.cuda.synchronize
for dt in (torch.bfloat16, torch.float32):
    for name, sa, sb, wt in cases:
        a = torch.randn(sa, device="cuda", dtype=dt)
        b = torch.randn(sb, device="cuda", dtype=dt)
        b = b.t() if wt else b
        row = dict(case=name, dtype=str(dt))
        row["torch"] = time_calls(lambda: torch.matmul(a, b), 2000, sync=sync)["median_us"]
        for tag in ("old", "new", "old2", "new2"):
            dispatch.reset()
            dispatch.remember_view = (lambda *x: None) if tag.startswith("old") else real
            tilegemm.matmul(a, b); sync()
            row[tag] = time_calls(lambda: tilegemm.matmul(a, b), 2000, sync=sync)["median_us"]
        dispatch.remember_view = real
        err = float((tilegemm.matmul(a, b).double() - torch.matmul(a.double(), b.double())).norm() / torch.matmul(a.double(), b.double()).norm())
        row["rel_err"] = err
        res.append(row)
        print({k: (round(v, 1) if isinstance(v, float) and k != "rel_err" else v) for k, v in row.items()}, flush=True)
json.dump(res, open(os.path.join(os.environ["OUT"], "nd-host.json"), "w"), indent=1)
