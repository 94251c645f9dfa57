"""Host and whole time of matmul(a, b, devices='all') (A, B on cuda:0, BF16 N^3), shipped split; one process."""
import json, statistics, sys, time
import torch
import tilegemm

def sync():
    for g in range(torch.cuda.device_count()):
        torch.cuda.synchronize(g)

res = {"src": tilegemm.__file__}
for n, reps in ((8192, 40), (16384, 20), (32768, 7)):
    a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    ref = torch.mm(a, b)
    c = tilegemm.matmul(a, b, devices="all")
    err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
    for _ in range(2):
        tilegemm.matmul(a, b, devices="all")
    host, whole = [], []
    for _ in range(reps):
        sync(); t0 = time.perf_counter(); tilegemm.matmul(a, b, devices="all"); t1 = time.perf_counter(); sync()
        host.append((t1 - t0) * 1e3); whole.append((time.perf_counter() - t0) * 1e3)
    res[n] = dict(host_ms=statistics.median(host), whole_ms=statistics.median(whole), err=err,
                  stream_ok=torch.cuda.current_stream(0) == torch.cuda.default_stream(0)
                  and torch.cuda.current_stream(1) == torch.cuda.default_stream(1) and torch.cuda.current_device() == 0)
    print(n, {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res[n].items()}, flush=True)
    del a, b, ref, c; torch.cuda.empty_cache()
json.dump(res, open(sys.argv[1], "w"), indent=1)
