"""What a plan's second launch costs the host, against torch.mm's call (the tuner's floor): TF32
128x1024x4096 forced (user cache) to one-launch and two-launch forms of one tile, host µs per call
with the GPU held, alternating with torch.mm 64^3 back to back; then the library's measure_shape
of the shape on each form (3 runs), cuBLAS in the same runs. Writes $OUT/launch_cost.json."""
import json, os, statistics, time
import torch
import tilegemm
from tilegemm import hold
from tilegemm.kernels.tensorcore import _problem as P
from tilegemm.tuning import cache
from tilegemm.tuning.cache import Decision
from tilegemm.bench import library as L

OUT = os.environ.get("OUT", "/tmp")
stream = torch.cuda.current_stream().cuda_stream
m, n, k = 128, 1024, 4096
a = torch.rand(m, k, device="cuda") * 2 - 1
b = torch.rand(k, n, device="cuda") * 2 - 1
c = torch.empty(m, n, device="cuda")
p = P.Problem(a, b, c, "tf32")
T04 = "tc_splitk"
base = dict(BM=64, BN=64, BK=32, GROUP_M=8, num_warps=4, num_stages=4, SPLIT=12, SWAP=True, REG_A=True, TMA=True)
FORMS = {"db": None, "fused": dict(base, FUSED=True), "unfused": base,
         "unfused128": dict(BM=128, BN=64, BK=32, GROUP_M=8, num_warps=4, num_stages=4, SPLIT=16, SWAP=True, REG_A=True, TMA=True)}

def force(cfg):
    key = cache.decision_key(p, P.gpu_name(a.device))
    data = json.load(open(cache.cache_path())) if os.path.exists(cache.cache_path()) else {}
    data.pop(key, None)
    if cfg is not None:
        data[key] = cache.record(p, Decision(T04, cfg, "probe", None))
    json.dump(data, open(cache.cache_path(), "w"))
    cache.reset()

x = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
def mm_floor(calls=200):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.mm(x, x)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6

def host(fn, calls=60):
    hold.hold(int(calls * 80), stream)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    return t

call = lambda: tilegemm.gemm(a, b, precision="tf32")
res = dict(forms={}, floor=[])
for name, cfg in FORMS.items():
    force(cfg)
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    res["forms"][name] = dict(cfg=cfg, explain=str(tilegemm.explain(a, b)) if False else None,
                              launches=None, host=[])
# alternate: floor, then each form's host time (each form forced in turn)
for rep in range(9):
    res["floor"].append(mm_floor())
    for name, cfg in FORMS.items():
        force(cfg)
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        res["forms"][name]["host"].append(host(call))
for name, f in res["forms"].items():
    f["host_med"] = statistics.median(f["host"])
res["floor_med"] = statistics.median(res["floor"])
print("floor", round(res["floor_med"], 2), {n: round(f["host_med"], 2) for n, f in res["forms"].items()}, flush=True)
# the library's measurement of the shape on each form
clock = L._Clock()
for name, cfg in FORMS.items():
    force(cfg)
    runs = [L.measure_shape(clock, "tf32", m, n, k, ("eager", "device"), 0.3) for _ in range(3)]
    res["forms"][name]["library"] = runs
    for mode in ("eager", "device"):
        r = [x[mode]["ref_ms"] / x[mode]["ours_ms"] for x in runs]
        o = [x[mode]["ours_ms"] * 1e3 for x in runs]
        print(name, mode, "ratio med", round(statistics.median(r), 3), [round(v, 3) for v in r], "ours us", [round(v, 2) for v in o], flush=True)
force(None)
json.dump(res, open(f"{OUT}/launch_cost.json", "w"), indent=1, default=str)
