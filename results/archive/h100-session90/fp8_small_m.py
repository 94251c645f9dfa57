"""Session 90: promoted FP8 at small M with a row-major B (the one-span REG_A tile, space.one_span) against t02 and auto
and torch._scaled_mm's promoted mode (B column-major, its only layout); device clock, L2 flushed, interleaved."""
import json, os, torch, tilegemm
from tilegemm.bench.timing import DeviceClock, L2Flush, interleave
from tilegemm import dispatch
out = os.environ.get("OUT", "/tmp/out"); rows = []
clock = DeviceClock(framework="torch"); flush = L2Flush(framework="torch", kind="read")
for (m, n, k) in [(5, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (5, 14336, 4096), (16, 4096, 14336), (48, 4096, 4096)]:
    a = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.float8_e4m3fn)
    b = (torch.rand(k, n, device="cuda") * 2 - 1).to(torch.float8_e4m3fn)  # row-major
    bt = b.t().contiguous().t()  # column-major, for _scaled_mm
    one = torch.ones((), device="cuda")
    ref = torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=False).float()
    runs = {"scaled_mm-promoted(colB)": lambda: torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=False)}
    for kern in ("auto", "tc_tma_persistent", "tc_persistent", "tc_splitk", "tc_gemv"):
        f = lambda kern=kern: tilegemm.gemm(a, b, kernel=kern, fast_accum=False)
        try:
            err = (f().float() - ref).abs().max().item()
            runs[kern] = f
        except Exception as e:
            print(m, n, k, kern, "refused:", str(e)[:160]); continue
        print(m, n, k, kern, "max|diff| vs scaled_mm", err)
    t = interleave(runs, clock=clock, flush=flush, budget_s=3.0)
    base = t["scaled_mm-promoted(colB)"].median_ms
    for name, tm in t.items():
        rows.append(dict(shape=[m, n, k], run=name, median_ms=tm.median_ms, vs_ref=base / tm.median_ms))
        print(f"{m}x{n}x{k} {name:28s} {tm.median_ms*1e3:8.2f} us  ref/this {base/tm.median_ms:.3f}")
    print(dict(dispatch.STATS.get("not_planned", {})))
json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), open(f"{out}/fp8-small-m.json", "w"), indent=1)
