import json, os, sys, torch
from tilegemm.tuning import command, timer, tuner
name = sys.argv[1]
out = {}
for dtype, m, n, k, cfg in (("bf16", 1536, 1536, 1536, dict(BM=192, BN=128, BK=64, STAGES=4, SPLIT=1, CONSUMERS=3, GROUP_M=8)),
                            ("bf16", 4096, 4096, 4096, dict(BM=128, BN=256, BK=64, STAGES=3, SPLIT=1, CONSUMERS=1, GROUP_M=8))):
    p = command.problem(dtype, m, n, k)
    trial = tuner.trial_problem(p)
    fns = [lambda c=dict(cfg, SK=s): tuner.run("tc_warp_specialized", trial, c) for s in (0, 2)]
    for f in fns:
        f()
    torch.cuda.synchronize()
    ms = timer.settle(fns, budget_ms=100, graph=False)
    out[f"{m}x{n}x{k}"] = dict(sk0_us=round(ms[0] * 1e3, 2), sk2_us=round(ms[1] * 1e3, 2))
print(name, out, flush=True)
json.dump(out, open(os.environ["OUT"] + f"/{name}.json", "w"))
