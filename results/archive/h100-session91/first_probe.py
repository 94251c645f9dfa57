"""Is there a cost to the first call after a synchronize, ours against torch's (eager's samples)?"""
import statistics, time, json, os
import torch
import tilegemm
from tilegemm.bench.timing import L2Flush

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = True
flush = L2Flush(framework="torch", kind="read")
res = {}
for n in (256, 512):
    a = torch.rand(n, n, device=dev) * 2 - 1
    b = torch.rand(n, n, device=dev) * 2 - 1
    fns = {"ours": lambda: tilegemm.gemm(a, b, precision="tf32"), "torch": lambda: torch.matmul(a, b)}
    for f in fns.values():
        for _ in range(100):
            f()
    torch.cuda.synchronize()
    for name, f in fns.items():
        # host time of each call in a sample of 30 after flush + synchronize
        per = [[] for _ in range(30)]
        for rep in range(40):
            flush()
            torch.cuda.synchronize()
            t = time.perf_counter()
            for i in range(30):
                f()
                t2 = time.perf_counter()
                per[i].append((t2 - t) * 1e6)
                t = t2
        torch.cuda.synchronize()
        med = [round(statistics.median(p), 1) for p in per]
        res[f"{n} {name} host per call"] = med
        print(n, name, "host µs per call, by position:", med[:8], "... last:", med[-4:], flush=True)
        for calls in (5, 10, 20, 40):
            ts = []
            for rep in range(30):
                flush()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                s.record()
                for _ in range(calls):
                    f()
                e.record(); e.synchronize()
                ts.append(s.elapsed_time(e) / calls * 1e3)
            q = statistics.quantiles(ts, n=4)
            res[f"{n} {name} eager calls={calls}"] = [round(x, 2) for x in (min(ts), q[0], q[1], q[2], max(ts))]
            print(n, name, f"eager µs/call, {calls} calls: min q1 med q3 max", res[f"{n} {name} eager calls={calls}"], flush=True)
json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), "first_probe.json"), "w"), indent=1)
