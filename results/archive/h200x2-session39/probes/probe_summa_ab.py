"""SUMMA's peer loop, old (base_src) and new host path, alternated in one process (rounds of gapped calls),
on grids 1x2 and 2x1 at --sizes. torchrun --nproc-per-node 2 .dev/probe_summa_ab.py --out $OUT"""
import argparse, datetime, json, os, statistics, time
import torch, torch.distributed as dist
from tilegemm.distributed import _core

p = argparse.ArgumentParser(); p.add_argument("--sizes", default="8192"); p.add_argument("--out", default="/tmp/out")
p.add_argument("--rounds", type=int, default=16); p.add_argument("--calls", type=int, default=20)
args = p.parse_args()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=300))
rank, world = dist.get_rank(), dist.get_world_size()
src = open(".dev/base_src/src/tilegemm/distributed/_core.py").read()
old_src = src[src.index("def _run_summa_peer("):src.index("def _last_filled(")]
ns = dict(vars(_core))
exec(compile(old_src, "old_core", "exec"), ns)
impl = {"new": _core._run_summa_peer, "old": ns["_run_summa_peer"]}
out = dict(rank=rank, sizes={})
for n in map(int, args.sizes.split(",")):
    for grid in ((1, 2), (2, 1)):
        pr, pc = grid
        g = torch.Generator(device="cuda").manual_seed(rank)
        a = torch.randn(n // pr, n // pc, device="cuda", generator=g).to(torch.bfloat16)
        b = torch.randn(n // pr, n // pc, device="cuda", generator=g).to(torch.bfloat16)
        lay = _core.layout(a, b, grid, transport="peer")
        loop = lambda: _core.run(a, b, lay)
        res = {v: dict(host=[], gpu=[]) for v in impl}
        ref = None
        for v in impl:
            _core._run_summa_peer = impl[v]
            for _ in range(10): c = loop()
            torch.cuda.synchronize()
            if ref is None: ref = c.clone()
            else: res["same_as_old"] = bool(torch.equal(ref, c))
        for r in range(args.rounds):
            for v in (("old", "new") if r % 2 == 0 else ("new", "old")):
                _core._run_summa_peer = impl[v]
                loop(); torch.cuda.synchronize()
                for _ in range(args.calls):
                    dist.barrier(); torch.cuda.synchronize()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    t0 = time.perf_counter_ns(); s.record(); loop(); e.record(); t1 = time.perf_counter_ns(); torch.cuda.synchronize()
                    res[v]["host"].append((t1 - t0) / 1e3); res[v]["gpu"].append(s.elapsed_time(e) * 1e3)
        out["sizes"][f"{n} {pr}x{pc}"] = {v: ({k: statistics.median(x) for k, x in d.items()} if isinstance(d, dict) else d) for v, d in res.items()}
        _core._run_summa_peer = impl["new"]
every = [None] * world
dist.all_gather_object(every, out)
if rank == 0:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "probe-summa-ab.json"), "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), ranks=every), f, indent=1)
    for r in every:
        for n, d in r["sizes"].items():
            print("rank", r["rank"], n, {v: ({k: round(x, 1) for k, x in x_.items()} if isinstance(x_, dict) else x_) for v, x_ in d.items()})
dist.barrier(); dist.destroy_process_group()
