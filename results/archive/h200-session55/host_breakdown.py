"""Where a planned call's host time goes: the whole call, the plan's run, each launch alone (GPU held)."""
import json, os, statistics, time
import torch
import tilegemm
from tilegemm import dispatch, hold
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp/out")
res = []


def host_us(fn, calls=200):
    s = torch.cuda.current_stream().cuda_stream
    out = []
    for _ in range(9):
        hold.hold(15000, s)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return round(statistics.median(out[2:]), 2)


for dtype, (m, n, k) in (("tf32", (128, 1024, 8192)), ("tf32", (64, 64, 64)), ("bf16", (64, 64, 64)), ("bf16", (128, 1024, 8192))):
    a, b, sa, sb = L.operands(dtype, m, n, k)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    ours = L._library_call(dtype, a, b, sa, sb)
    dispatch._PLANS.clear()
    ours(); ours(); torch.cuda.synchronize()
    plans = list(dispatch._PLANS.values())
    plan = plans[-1]
    plan = getattr(plan, "plan", plan)
    stream = torch.cuda.current_stream().cuda_stream
    addr = plan.launches[0]._addresses
    rec = dict(dtype=dtype, shape=(m, n, k), launches=[x.name for x in plan.launches], plans=len(plans),
               params=[len(x.parameters()) for x in plan.launches], grids=[x.grid for x in plan.launches],
               shared=[x.shared for x in plan.launches])
    rec["call_us"] = host_us(ours)
    rec["torch_us"] = host_us(L._reference_call(dtype, a, b, sa, sb))
    rec["run_us"] = host_us(lambda: plan.run(a.data_ptr(), b.data_ptr(), None, 0, 0))
    rec["empty_us"] = host_us(lambda: torch.empty(m, n, device="cuda", dtype=a.dtype))
    for i, la in enumerate(plan.launches):
        rec[f"launch{i}_us"] = host_us(lambda la=la: la(la._addresses, stream))
    rec["noop_us"] = host_us(lambda: None)
    res.append(rec)
    print(json.dumps(rec), flush=True)
json.dump(res, open(f"{OUT}/probe5.json", "w"), indent=1)
