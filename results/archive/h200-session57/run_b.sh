# Session 57 (docs/perf-notes.md, 113), run on the H200 from the repository root as `bash results/archive/h200-session57/run_b.sh` (as run, from .dev/).
# /tmp/db-5188f9f.json: `git show 5188f9f:src/tilegemm/data/tuning/nvidia-h200.json`, made before the run (the device has no .git).
. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 400 python3 results/archive/h200-session57/survey.py survey results/archive/h200-session57/shapes-unaligned.json ua 2>&1 | grep -v Warn | tail -70
python3 - <<'PY'
import time, torch, tilegemm
for (m,n,k) in [(1229,1043,1827),(1232,1048,1832)]:
    a=torch.randn(m,k,device="cuda",dtype=torch.bfloat16); b=torch.randn(k,n,device="cuda",dtype=torch.bfloat16)
    for _ in range(3): tilegemm.matmul(a,b)
    torch.cuda.synchronize()
    t=time.perf_counter()
    for _ in range(200): tilegemm.matmul(a,b)
    h=(time.perf_counter()-t)/200*1e6; torch.cuda.synchronize(); tt=(time.perf_counter()-t)/200*1e6
    print("host us/call", m,n,k, round(h,1), "with sync", round(tt,1), tilegemm.explain(a,b) if hasattr(tilegemm,"explain") else "")
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20): tilegemm.matmul(a,b)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))
PY
