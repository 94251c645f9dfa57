"""Probes of session 55 (docs/perf-notes.md, 109), one file, a mode each (run from the repository
root on the device, after `. scripts/device/env.sh`; each writes $OUT/<mode>.json):

    python3 results/archive/h200-session55/host_pace_probe.py forms      # -> host-pace-probe.json
    python3 results/archive/h200-session55/host_pace_probe.py split      # -> split-forms-1024x1024x8192.json
    python3 results/archive/h200-session55/host_pace_probe.py process    # -> host-pace-in-process.json
    python3 results/archive/h200-session55/host_pace_probe.py machine    # -> host-pace-second-machine.json
    python3 results/archive/h200-session55/host_pace_probe.py breakdown  # -> host-breakdown.json

forms, split: a shape's forms forced through the public API (`tilegemm.gemm` / `matmul`, the
decision replaced), each checked against float64, then its host µs a call (the GPU held),
and its eager and device time interleaved with cuBLAS's (the library harness's clocks).
process: TF32 128×1024×8192 and BF16 64³ in one process before and after the library's TF32 part,
then with the garbage collector frozen and off. machine: the library's `measure_shape` on TF32
128×1024×8192 twice, the probe, and again. breakdown: a planned call's host µs in parts (as run:
200 calls, 9 repetitions, a 15 ms hold; the others 300, 7, 20 ms)."""
import gc
import json
import os
import statistics
import sys
import time

import torch

from tilegemm import dispatch, hold, tuning
from tilegemm.bench import library as L
from tilegemm.bench.shapes import load_shapes
from tilegemm.tuning import cache
from tilegemm.tuning.cache import Decision

OUT = os.environ.get("OUT", "/tmp/out")
T04, T03 = "tc_splitk", "tc_tma_persistent"
res = []
orig = tuning._choose


def force(d):
    if d is None and tuning._choose is orig:
        return  # nothing forced: keep the process's plans as they are
    tuning._choose = (lambda p, want: d) if d else orig
    cache.reset()


def host_us(fn, calls=300, reps=7, hold_us=20000):
    s = torch.cuda.current_stream().cuda_stream
    out = []
    for _ in range(reps):
        hold.hold(hold_us, s)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return round(statistics.median(out[2:]), 2)


def probe(dtype, m, n, k, forms):
    a, b, sa, sb = L.operands(dtype, m, n, k)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    ours, ref = L._library_call(dtype, a, b, sa, sb), L._reference_call(dtype, a, b, sa, sb)
    clock = L._Clock()
    for name, d in forms:
        force(d)
        try:
            checks = []
            for _ in range(2):  # the first call, then the plan's
                got = ours()
                torch.cuda.synchronize()
                checks.append(L._check(dtype, a, b, sa, sb, got) or "ok")
        except Exception as e:  # noqa: BLE001
            print(name, "failed", type(e).__name__, str(e)[:200], flush=True)
            continue
        stats = json.loads(json.dumps(dispatch.STATS))
        hu, hr = host_us(ours), host_us(ref)
        est = min(clock.eager(ours, 3, 5) + clock.eager(ref, 3, 5))
        calls = max(1, min(50, int(L.EAGER_SAMPLE_US / 1e3 / max(est, 1e-4))))
        rec = dict(dtype=dtype, m=m, n=n, k=k, form=name, config=d.config if d else "shipped", check=checks[0],
                   check2=checks[1], host_us=hu, ref_host_us=hr, stats=stats)
        for mode in ("eager", "device"):
            tk = [lambda k_, f=f: clock.eager(f, k_, calls) if mode == "eager" else clock.device(f, k_) for f in (ours, ref)]
            so, sr = L._interleaved(tk, 0.3)
            rec[mode] = dict(ours_us=round(statistics.median(so) * 1e3, 2), ref_us=round(statistics.median(sr) * 1e3, 2),
                             ratio=round(statistics.median(sr) / statistics.median(so), 3))
        res.append(rec)
        print(json.dumps({x: rec[x] for x in ("dtype", "m", "n", "k", "form", "check", "check2", "host_us",
                                              "ref_host_us", "eager", "device")}), flush=True)
    force(None)


def t04(bm, bn, bk, w, st, split, **kw):
    return Decision(T04, dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st, SPLIT=split, **kw), "probe")


def forms():
    sw = dict(SWAP=True, REG_A=True, TMA=True)
    probe("tf32", 128, 1024, 8192, [
        ("shipped", None),
        ("t04 128x64 s16 fused", t04(128, 64, 32, 4, 4, 16, FUSED=True, **sw)),
        ("t04 128x64 s8 fused", t04(128, 64, 32, 4, 4, 8, FUSED=True, **sw)),
        ("t04 128x64 s8", t04(128, 64, 32, 4, 4, 8, **sw)),
        ("t04 128x64 s4 fused", t04(128, 64, 32, 4, 4, 4, FUSED=True, **sw)),
        ("t04 128x128 s16 w8", t04(128, 128, 32, 8, 3, 16, **sw)),
        ("t04 128x128 s8 w8 fused", t04(128, 128, 32, 8, 3, 8, FUSED=True, **sw)),
        ("t04 64x64 s8 fused", t04(64, 64, 32, 4, 4, 8, FUSED=True, **sw)),
    ])
    probe("fp16", 1024, 1024, 8192, [("shipped", None)])
    probe("fp16", 100, 12345, 678, [("shipped", None)])
    probe("bf16", 128, 1024, 8192, [("shipped", None)])


def split():
    tm = dict(TMA=True)
    for dt in ("fp16", "bf16"):
        probe(dt, 1024, 1024, 8192, [
            ("shipped", None),
            ("t04 128x128 w8 s2 fused", t04(128, 128, 64, 8, 4, 2, FUSED=True, **tm)),
            ("t04 128x128 w8 s2", t04(128, 128, 64, 8, 4, 2, **tm)),
            ("t04 128x256 w8 s4 fused", t04(128, 256, 64, 8, 3, 4, FUSED=True, **tm)),
            ("t04 128x128 w4 s2 fused", t04(128, 128, 64, 4, 4, 2, FUSED=True, **tm)),
            ("t04 64x128 w4 s2 fused", t04(64, 128, 64, 4, 6, 2, FUSED=True, **tm)),
            ("t03 128x128 w8", Decision(T03, dict(BM=128, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=4,
                                                  C_TMA=True), "probe")),
        ])


def process():
    count = {"n": [0, 0, 0], "s": [0.0, 0.0, 0.0], "t0": 0.0}

    def on_gc(phase, info):
        if phase == "start":
            count["t0"] = time.perf_counter()
        else:
            count["n"][info["generation"]] += 1
            count["s"][info["generation"]] += time.perf_counter() - count["t0"]

    gc.callbacks.append(on_gc)

    def phase(name):
        count["n"], count["s"] = [0, 0, 0], [0.0, 0.0, 0.0]
        probe("tf32", 128, 1024, 8192, [(name, None)])
        probe("bf16", 64, 64, 64, [(name, None)])
        print(name, "gc collections", count["n"], "seconds", [round(x, 4) for x in count["s"]], "objects",
              len(gc.get_objects()), "plans", len(dispatch._PLANS), flush=True)

    phase("fresh")
    doc = L.run(load_shapes("library"), ["tf32"], runs=1, with_host=False, with_first=False, with_decode=False,
                progress=lambda s: None)
    for r in doc["records"]:
        if (r["m"], r["n"], r["k"]) == (128, 1024, 8192):
            print("library run", r["mode"], round(r["ours_ms"] * 1e3, 2), round(r["ref_ms"] * 1e3, 2),
                  round(r["ratio"], 3), flush=True)
    phase("after the library part")
    gc.collect()
    gc.freeze()
    phase("after, gc frozen")
    gc.unfreeze()
    gc.disable()
    phase("after, gc off")
    gc.enable()


def machine():
    def lib(tag):
        rec = L.measure_shape(L._Clock(), "tf32", 128, 1024, 8192, ("eager", "device"), 0.3)
        print("measure_shape", tag, {m: (round(rec[m]["ours_ms"] * 1e3, 2), round(rec[m]["ref_ms"] * 1e3, 2),
                                         round(rec[m]["ref_ms"] / rec[m]["ours_ms"], 3)) for m in ("eager", "device")},
              flush=True)
        res.append(dict(tag=tag, rec=rec))

    lib("first")
    lib("second")
    probe("tf32", 128, 1024, 8192, [("probe between", None)])
    lib("after the probe")


def breakdown():
    for dtype, (m, n, k) in (("tf32", (128, 1024, 8192)), ("tf32", (64, 64, 64)), ("bf16", (64, 64, 64)),
                             ("bf16", (128, 1024, 8192))):
        a, b, sa, sb = L.operands(dtype, m, n, k)
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        ours = L._library_call(dtype, a, b, sa, sb)
        dispatch._PLANS.clear()
        ours()
        ours()
        torch.cuda.synchronize()
        plans = list(dispatch._PLANS.values())
        plan = getattr(plans[-1], "plan", plans[-1])  # a ViewPlan's own
        stream = torch.cuda.current_stream().cuda_stream
        rec = dict(dtype=dtype, shape=(m, n, k), launches=[x.name for x in plan.launches], plans=len(plans),
                   params=[len(x.parameters()) for x in plan.launches], grids=[x.grid for x in plan.launches],
                   shared=[x.shared for x in plan.launches])
        timed = lambda fn: host_us(fn, calls=200, reps=9, hold_us=15000)  # noqa: E731
        rec["call_us"] = timed(ours)
        rec["torch_us"] = timed(L._reference_call(dtype, a, b, sa, sb))
        rec["run_us"] = timed(lambda: plan.run(a.data_ptr(), b.data_ptr(), None, 0, 0))
        rec["empty_us"] = timed(lambda: torch.empty(m, n, device="cuda", dtype=a.dtype))
        for i, la in enumerate(plan.launches):
            rec[f"launch{i}_us"] = timed(lambda la=la: la(la._addresses, stream))
        rec["noop_us"] = timed(lambda: None)
        res.append(rec)
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    modes = dict(forms=forms, split=split, process=process, machine=machine, breakdown=breakdown)
    if mode not in modes:
        sys.exit(f"usage: host_pace_probe.py {{{','.join(modes)}}}")
    modes[mode]()
    json.dump(res, open(f"{OUT}/{mode}.json", "w"), indent=1)
