"""At 32768 on 2 GPUs: for home-row counts h, the home's rows alone (cuda:0, one product), the other's
rows alone (cuda:1, one product, and its 11 panel products as the split runs them), both at once,
and the whole split call; steady state, medians, rounds interleaved."""
import json, statistics, sys, time
import torch
import tilegemm
from tilegemm import multigpu

def sync():
    for g in range(torch.cuda.device_count()):
        torch.cuda.synchronize(g)

def timed(fn, reps):
    fn(); sync(); t = []
    for _ in range(reps):
        sync(); t0 = time.perf_counter(); fn(); sync(); t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)

n = int(sys.argv[1]) if len(sys.argv) > 1 else 32768
hs = [int(x) for x in sys.argv[2].split(",")]
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
a0 = torch.randn(n, n, device="cuda:0").to(torch.bfloat16); b0 = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
a1 = a0.to("cuda:1"); b1 = b0.to("cuda:1")
ship = multigpu.describe_split
cuts = multigpu.panels(n)
bs1 = [b1[:, j0:j1].contiguous() for j0, j1 in cuts]
res = {h: {"home": [], "other": [], "other_panels": [], "both": [], "split": []} for h in hs}
for rnd in range(2):
    for h in hs:
        r = res[h]
        r["home"].append(timed(lambda: tilegemm.matmul(a0[:h], b0), reps))
        r["other"].append(timed(lambda: tilegemm.matmul(a1[h:], b1), reps))
        ch = multigpu._row_chunks(n - h)
        def panels_other():
            with torch.cuda.device(1):
                for i0, i1 in zip(ch, ch[1:]):
                    tilegemm.matmul(a1[h + i0:h + i1], bs1[0])
                for bj in bs1[1:]:
                    tilegemm.matmul(a1[h:], bj)
        r["other_panels"].append(timed(panels_other, reps))
        def both():
            tilegemm.matmul(a0[:h], b0)
            tilegemm.matmul(a1[h:], b1)
        r["both"].append(timed(both, reps))
        blocks = ((0, 0, h), (1, h, n))
        multigpu.describe_split = lambda *args, blocks=blocks: blocks
        r["split"].append(timed(lambda: tilegemm.matmul(a0, b0, devices="all"), reps))
        multigpu.describe_split = ship
        print(rnd, h, {k: round(v[-1], 3) for k, v in r.items()}, flush=True)
out = {"gpu": torch.cuda.get_device_name(0), "n": n, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
       "res": res}
json.dump(out, open(sys.argv[4] if len(sys.argv) > 4 else "/tmp/out/alone.json", "w"), indent=1)
for h in hs:
    print(h, {k: round(statistics.median(v), 3) for k, v in res[h].items()})
