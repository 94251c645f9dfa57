"""The 1-D peer loop at 8192 on two GPUs, host calls and GPU work on one clock (torch.profiler, CPU and CUDA),
three gapped calls after two the profiler warms on. torchrun --nproc-per-node 2 .dev/probe_1d_clock.py --out $OUT"""
import argparse, datetime, json, os, tempfile, time
import torch, torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function
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
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for i in range(5):
        dist.barrier(); torch.cuda.synchronize()
        with record_function(f"CALL{i}"):
            loop()
        torch.cuda.synchronize()
path = os.path.join(tempfile.mkdtemp(), "t.json"); prof.export_chrome_trace(path)
evs = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
out = {}
for i in (2, 3, 4):
    call = [e for e in evs if e.get("name") == f"CALL{i}"][0]
    t0, t1 = call["ts"], call["ts"] + call["dur"]
    nxt = [e for e in evs if e.get("name") == f"CALL{i+1}"]
    lim = nxt[0]["ts"] if nxt else 1e30
    sel = [e for e in evs if t0 <= e["ts"] < lim and e.get("cat") in ("kernel", "gpu_memcpy", "cuda_runtime", "cuda_driver")
           and not (e.get("cat") == "cuda_runtime" and e["name"] in ("cudaStreamIsCapturing",))]
    out[i] = [(e["cat"][:6], e["name"][:40], round(e["ts"] - t0, 1), round(e.get("dur", 0), 1)) for e in sorted(sel, key=lambda e: e["ts"])]
    out[i].append(("host", "CALL returns", round(call["dur"], 1), 0))
every = [None] * world
dist.all_gather_object(every, out)
if rank == 0:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"probe-1d-clock-{n}.json"), "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), ranks=every), f, indent=1)
    for r, o in enumerate(every):
        print("rank", r, "call 3")
        for e in sorted(o[3], key=lambda e: e[2])[:40]: print("  ", e)
dist.barrier(); dist.destroy_process_group()
