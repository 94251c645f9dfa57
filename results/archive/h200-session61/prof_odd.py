"""One-off: where 100x12345x678's call goes (BF16, FP16), kernel by kernel, on the shipped database."""
import json, os, sys
import torch
import tilegemm
from torch.profiler import profile, ProfilerActivity

out = {}
for dt in (torch.bfloat16, torch.float16):
    a = torch.rand(100, 678, device="cuda").to(dt)
    b = torch.rand(678, 12345, device="cuda").to(dt)
    print(tilegemm.explain(a, b))
    for _ in range(20):
        tilegemm.matmul(a, b); torch.matmul(a, b)
    torch.cuda.synchronize()
    for name, fn in (("tilegemm", tilegemm.matmul), ("torch", torch.matmul)):
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(50):
                fn(a, b)
            torch.cuda.synchronize()
        rows = []
        for e in p.key_averages():
            if e.device_type.name == "CUDA" or getattr(e, "self_device_time_total", 0):
                rows.append(dict(name=e.key[:90], count=e.count, us_each=e.self_device_time_total / max(e.count, 1)))
        rows.sort(key=lambda r: -r["us_each"] * r["count"])
        out[f"{dt}/{name}"] = rows[:6]
        print(dt, name); [print("  ", r) for r in rows[:6]]
json.dump(out, open(os.path.join(os.environ["OUT"], "prof-odd.json"), "w"), indent=1)
