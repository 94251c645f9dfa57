"""The 1-D peer loop at 8192 on two GPUs: its first peer copy (113 µs where the later ones take 24) and the
host's path to the first GEMM. Variants: base; wake (a 64 KB read of the peer's buffer on the copy stream at
the call's start, before the pack); wake-local (the same size copied within this GPU's memory).
torchrun --nproc-per-node 2 .dev/probe_1d_wake.py --out $OUT"""
import argparse, datetime, json, os, statistics, tempfile, time
import torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from tilegemm import multigpu
from tilegemm.distributed import _core
from tilegemm.bench.distributed import _blocks, _Operands

p = argparse.ArgumentParser(); p.add_argument("--n", type=int, default=8192); p.add_argument("--out", default="/tmp/out")
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
scratch = torch.empty(32768, dtype=torch.bfloat16, device="cuda")
local_src = torch.empty(32768, dtype=torch.bfloat16, device="cuda")
orig_take = _core._take_turn
mode = {"v": "base"}
def take(m):
    mine = orig_take(m)
    if mode["v"] != "base":
        st = _core._copy_stream(b.device)
        if mode["v"] == "wake":
            src = _core._peer_view(m, mine, lay.slots[1 - rank], torch.bfloat16)[-32768:]
        else:
            src = local_src
        multigpu.copy_flat(scratch, src, st)
    return mine
_core._take_turn = take

def timed(calls, gap=True):
    wall = []
    if not gap:
        dist.barrier(); torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(calls): loop()
        torch.cuda.synchronize()
        return (time.perf_counter_ns() - t0) / 1e3 / calls
    for _ in range(calls):
        dist.barrier(); torch.cuda.synchronize()
        t0 = time.perf_counter_ns(); loop(); torch.cuda.synchronize(); wall.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(wall)

def gpu_summary(calls):
    out = []
    for _ in range(calls):
        dist.barrier(); torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            loop(); torch.cuda.synchronize()
        path = os.path.join(tempfile.mkdtemp(), "t.json"); prof.export_chrome_trace(path)
        evs = sorted([e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy")], key=lambda e: e["ts"])
        t0 = evs[0]["ts"]
        cps = [e for e in evs if e["cat"] == "gpu_memcpy" and e["args"].get("bytes", 0) > 1 << 20]
        gem = [e for e in evs if e["name"].startswith("ws_kernel") or "gemm" in e["name"].lower() or "kernel" == e["name"][:6]]
        gem = [e for e in evs if e["cat"] == "kernel" and "elementwise" not in e["name"] and "barrier" not in e["name"]]
        bar = [e for e in evs if "barrier" in e["name"]]
        out.append(dict(first_copy_us=cps[0]["dur"], later_copy_us=statistics.median(e["dur"] for e in cps[1:]),
                        first_copy_at=cps[0]["ts"] - t0, barrier_us=bar[0]["dur"] if bar else None,
                        first_gemm_at=gem[0]["ts"] - t0, span=max(e["ts"] + e["dur"] for e in evs) - t0))
    return {k: statistics.median(o[k] for o in out if o[k] is not None) for k in out[0]}

res = dict(rank=rank, n=n, gpu={}, gap={}, nogap={})
for v in ("base", "wake", "wake-local"):
    mode["v"] = v
    for _ in range(5): loop()
    res["gpu"][v] = gpu_summary(9)
for rnd in range(3):
    for v in ("base", "wake", "wake-local"):
        mode["v"] = v
        res["gap"].setdefault(v, []).append(timed(60))
        res["nogap"].setdefault(v, []).append(timed(60, gap=False))
# host marks, no wrappers but these (perf_counter only), base
mode["v"] = "base"
marks = []
names = ("_peer_buffer", "_pack_panels", "_barrier", "_product")
origs = {nm: getattr(_core, nm) for nm in names}
def mk(nm):
    f = origs[nm]
    def g(*x, **kw):
        marks.append((nm, time.perf_counter_ns())); return f(*x, **kw)
    return g
for nm in names: setattr(_core, nm, mk(nm))
ocf = multigpu.copy_flat
def cf(*x, **kw):
    marks.append(("copy", time.perf_counter_ns())); return ocf(*x, **kw)
multigpu.copy_flat = cf
seqs = []
for _ in range(40):
    marks.clear(); dist.barrier(); torch.cuda.synchronize()
    t0 = time.perf_counter_ns(); marks.append(("call", t0)); loop(); marks.append(("return", time.perf_counter_ns())); torch.cuda.synchronize()
    seqs.append([(m, (t - t0) / 1e3) for m, t in marks])
res["marks"] = [(seqs[0][i][0], round(statistics.median(s[i][1] for s in seqs), 1)) for i in range(len(seqs[0]))]
every = [None] * world
dist.all_gather_object(every, res)
if rank == 0:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"probe-1d-wake-{n}.json"), "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), ranks=every), f, indent=1)
    for r in every:
        print("rank", r["rank"])
        for v in r["gpu"]: print("  ", v, {k: round(x, 1) for k, x in r["gpu"][v].items()}, "gap", [round(x) for x in r["gap"][v]], "nogap", [round(x) for x in r["nogap"][v]])
        print("   marks", r["marks"][:12], "...", r["marks"][-3:])
dist.barrier(); dist.destroy_process_group()
