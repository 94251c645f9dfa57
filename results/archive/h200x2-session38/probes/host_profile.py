"""cProfile of the host split's call (A, B on cuda:0, devices='all', BF16 N^3), after warm calls."""
import cProfile, io, pstats, statistics, sys, time
import torch
import tilegemm

def sync():
    for g in range(torch.cuda.device_count()):
        torch.cuda.synchronize(g)

for n, calls in ((8192, 40), (32768, 6)):
    a = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda:0").to(torch.bfloat16)
    for _ in range(3):
        tilegemm.matmul(a, b, devices="all")
    sync()
    host = []
    for _ in range(calls):
        sync(); t0 = time.perf_counter_ns(); tilegemm.matmul(a, b, devices="all"); host.append((time.perf_counter_ns() - t0) / 1e3); sync()
    print(f"n {n}: host us per call median {statistics.median(host):.0f} (min {min(host):.0f})", flush=True)
    pr = cProfile.Profile()
    for _ in range(calls):
        sync()
        pr.enable(); tilegemm.matmul(a, b, devices="all"); pr.disable()
        sync()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s); st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumulative").print_stats(35)
    print(s.getvalue().replace("/tmp/site/", "").replace(str(__import__('os').getcwd()) + "/", ""), flush=True)
    del a, b; torch.cuda.empty_cache()
