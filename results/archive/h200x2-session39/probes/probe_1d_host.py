"""Host path of the 1-D peer loop at 8192 on two GPUs: where the host's time goes before the first GEMM.
torchrun --nproc-per-node 2 .dev/probe_1d_host.py --out $OUT"""
import argparse, cProfile, datetime, io, json, os, pstats, statistics, tempfile, time
import torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function
from tilegemm import multigpu
from tilegemm.distributed import _core
from tilegemm.bench.distributed import _blocks, _Operands

p = argparse.ArgumentParser(); p.add_argument("--n", type=int, default=8192); p.add_argument("--out", default="/tmp/out")
p.add_argument("--calls", type=int, default=100)
args = p.parse_args()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=300))
rank, world = dist.get_rank(), dist.get_world_size()
n = args.n
ops, rb = _Operands(n, torch.bfloat16, torch.device("cuda")), _blocks(n, world)
a, b = ops.rows(0, rb[rank], rb[rank + 1]), ops.rows(1, rb[rank], rb[rank + 1])
lay = _core.layout_1d(a, b)
loop = lambda: _core.run_1d(a, b, lay)
for _ in range(20): loop()
torch.cuda.synchronize()

def sample(calls):
    host, wall = [], []
    for _ in range(calls):
        dist.barrier(); torch.cuda.synchronize()
        t0 = time.perf_counter_ns(); loop(); t1 = time.perf_counter_ns(); torch.cuda.synchronize(); t2 = time.perf_counter_ns()
        host.append((t1 - t0) / 1e3); wall.append((t2 - t0) / 1e3)
    return dict(host_us=statistics.median(host), wall_us=statistics.median(wall), host_min=min(host), wall_min=min(wall))

res = dict(rank=rank, n=n, panels=len(lay.panels), peer=lay.peer, plain=sample(args.calls))

# per-step host time: wrap the steps
acc = {}
def wrap(mod, name, label=None):
    f = getattr(mod, name)
    def g(*x, **kw):
        t = time.perf_counter_ns()
        with record_function(label or name):
            r = f(*x, **kw)
        acc.setdefault(label or name, []).append(time.perf_counter_ns() - t)
        return r
    setattr(mod, name, g)
for nm in ("_pack_panels", "_barrier", "_peer_view", "_product", "_peer_buffer", "_take_turn", "_copy_stream"):
    wrap(_core, nm)
wrap(multigpu, "copy_flat")
orig_peer = _core._run_1d_peer
def peer(*x, **kw):
    t = time.perf_counter_ns()
    with record_function("_run_1d_peer"):
        r = orig_peer(*x, **kw)
    acc.setdefault("_run_1d_peer", []).append(time.perf_counter_ns() - t)
    return r
_core._run_1d_peer = peer
for _ in range(10): loop()
acc.clear()
res["wrapped"] = sample(args.calls)
res["steps_us_per_call"] = {k: sum(v) / 1e3 / args.calls for k, v in acc.items()}
res["steps_calls_per_call"] = {k: len(v) / args.calls for k, v in acc.items()}

# first GEMM's host timestamps in one call, relative to the call's start
marks = []
orig_prod = _core._product
def prod2(*x, **kw):
    marks.append(("product", time.perf_counter_ns())); r = orig_prod(*x, **kw); marks.append(("product_done", time.perf_counter_ns())); return r
ocf = multigpu.copy_flat
def cf2(*x, **kw):
    marks.append(("copy", time.perf_counter_ns())); return ocf(*x, **kw)
obar = _core._barrier
def bar2(*x, **kw):
    marks.append(("barrier", time.perf_counter_ns())); r = obar(*x, **kw); marks.append(("barrier_done", time.perf_counter_ns())); return r
opk = _core._pack_panels
def pk2(*x, **kw):
    marks.append(("pack", time.perf_counter_ns())); r = opk(*x, **kw); marks.append(("pack_done", time.perf_counter_ns())); return r
_core._product, multigpu.copy_flat, _core._barrier, _core._pack_panels = prod2, cf2, bar2, pk2
seqs = []
for _ in range(20):
    marks.clear(); dist.barrier(); torch.cuda.synchronize()
    t0 = time.perf_counter_ns(); loop(); t1 = time.perf_counter_ns(); torch.cuda.synchronize()
    seqs.append([(m, round((t - t0) / 1e3, 1)) for m, t in marks] + [("return", round((t1 - t0) / 1e3, 1))])
res["marks_median"] = [(seqs[0][i][0], statistics.median(s[i][1] for s in seqs)) for i in range(len(seqs[0]))]
_core._product, multigpu.copy_flat, _core._barrier, _core._pack_panels = orig_prod, ocf, obar, opk

# one profiled call: host ranges and GPU events on one clock
dist.barrier(); torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    with record_function("CALL"):
        loop()
    torch.cuda.synchronize()
path = os.path.join(tempfile.mkdtemp(), "t.json"); prof.export_chrome_trace(path)
evs = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
call = [e for e in evs if e.get("name") == "CALL"]
t0 = call[0]["ts"] if call else min(e["ts"] for e in evs)
keep = [e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "user_annotation", "cuda_runtime", "cuda_driver")]
res["trace"] = [(e.get("cat"), e["name"][:50], round((e["ts"] - t0), 1), round(e.get("dur", 0), 1)) for e in sorted(keep, key=lambda e: e["ts"])]

# cProfile of many calls
pr = cProfile.Profile()
dist.barrier(); torch.cuda.synchronize()
pr.enable()
for _ in range(args.calls): loop()
pr.disable(); torch.cuda.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30)
res["cprofile_tottime"] = s.getvalue()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(40)
res["cprofile_cum"] = s.getvalue()

every = [None] * world
dist.all_gather_object(every, res)
if rank == 0:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"probe-1d-host-{n}.json"), "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), ranks=every), f, indent=1)
    for r in every:
        print("rank", r["rank"], "panels", r["panels"], "peer", r["peer"], "plain", r["plain"], "wrapped", r["wrapped"])
        print(" steps us/call", {k: round(v, 1) for k, v in r["steps_us_per_call"].items()})
        print(" marks", r["marks_median"])
    print(every[0]["cprofile_tottime"][:6000])
dist.barrier(); dist.destroy_process_group()
