"""Session 57 (docs/perf-notes.md, 113): BF16 shapes that fall inside the H200 database's buckets, not on their
corners; on the device, from the repository root (run_a.sh ... run_g.sh say how each file here was made).
  verify OLD_DB BUCKETS_JSON N SEED TAG  one random shape in each of N buckets: the old database's decision, the
        working tree's, and cuBLAS, interleaved on the library's device clock -> $OUT/verify-TAG.json. Not used for
        any conclusion: it forces each configuration through dispatch.run_problem, which keeps no launch plan, and at
        shapes whose rows need realigning that path's host time passes the clock's 200 µs hold, so the clock counts
        it (1229×1043×1827: 280 µs here, 27.8 through tilegemm.matmul in survey-ua.json)
  tune GUARD_S                          grid-todo.json's untuned buckets (session 56), smallest first, --ship, until
        the guard -> $OUT/grid-tuned-buckets.json (as run: tuned.json) and grid-tune-log.json (as run: tune-log.json)
  survey SHAPES_JSON TAG [wt]           tilegemm.matmul (the public API, its launch plan) against cuBLAS on the
        library's device and eager clocks (bench.library.measure_shape, 0.3 s a shape and mode), each shape as given
        and, if N or K is not a multiple of 8, again with both rounded up; wt: B = Wᵀ (K-major)
        -> $OUT/survey-TAG.json"""
import json, os, random, sys, time

OUT = os.environ.get("OUT", "/tmp/out")
DB = "src/tilegemm/data/tuning/nvidia-h200.json"
CLS = "bf16|bfloat16|bfloat16|nn|nobeta|"
HERE = "results/archive/h200-session56/"  # grid-todo.json


def step(b: int) -> int:
    from tilegemm.tuning import space
    return b - next(x for x in range(b - 1, 0, -1) if space.grid_up(x) != b)


def verify(old_path, buckets_path, n, seed, tag):
    import torch
    from tilegemm import dispatch, tuning
    from tilegemm.bench import library as L
    from tilegemm.kernels.tensorcore import _problem as P

    old, new = json.load(open(old_path)), json.load(open(DB))
    buckets = json.load(open(buckets_path))
    rnd = random.Random(seed)
    picked = rnd.sample(buckets, min(n, len(buckets)))
    clock, rows = L._Clock(), []
    for bkt in picked:
        dims = [int(x) for x in bkt.split("x")]
        m, n_, k = (rnd.randint(b - step(b) + 1, b) for b in dims)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n_, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n_, device="cuda", dtype=torch.bfloat16)
        p = P.Problem(a, b, c, "bf16")
        d0, d1 = tuning.pick(old, "db", p), tuning.pick(new, "db", p)
        row = dict(bucket=bkt, m=m, n=n_, k=k, old=dict(rung=d0.rung, config=d0.config, source=d0.source),
                   new=dict(rung=d1.rung, config=d1.config, source=d1.source))
        if (d0.rung, d0.config) == (d1.rung, d1.config):
            row["same"] = True
            rows.append(row)
            print(tag, bkt, m, n_, k, "same decision", flush=True)
            continue
        ref = torch.mm(a, b)
        forms = [lambda d=d: dispatch.run_problem(p, d.rung, config=d.config) for d in (d0, d1)]
        forms.append(lambda: torch.mm(a, b, out=c))
        errs = []
        for f in forms[:2]:
            c.zero_()
            f()
            torch.cuda.synchronize()
            errs.append(float((c.float() - ref.float()).norm() / ref.float().norm()))
        takers = [lambda k_, f=f: clock.device(f, k_) for f in forms]
        s = L._interleaved(takers, 0.4)
        import statistics
        old_us, new_us, ref_us = (statistics.median(x) * 1e3 for x in s)
        row.update(old_us=round(old_us, 2), new_us=round(new_us, 2), ref_us=round(ref_us, 2), errs=errs,
                   samples=len(s[0]))
        rows.append(row)
        json.dump(rows, open(os.path.join(OUT, f"verify-{tag}.json"), "w"), indent=1)
        print(tag, bkt, m, n_, k, f"old {old_us:.1f} new {new_us:.1f} cublas {ref_us:.1f} "
              f"new/old {old_us / new_us:.3f} vs cublas {ref_us / old_us:.3f} -> {ref_us / new_us:.3f}", flush=True)
        del a, b, c, ref
    json.dump(rows, open(os.path.join(OUT, f"verify-{tag}.json"), "w"), indent=1)


def tune(guard):
    from tilegemm.cli import main
    todo = json.load(open(HERE + "grid-todo.json"))
    have = {k.rsplit("|", 1)[1] for k in json.load(open(DB))["entries"] if k.startswith(CLS)}
    todo = sorted((b for b in todo if b not in have),
                  key=lambda b: (min(map(int, b.split("x"))), eval(b.replace("x", "*"))))
    t0, log = time.time(), []
    for b in todo:
        if time.time() - t0 > guard:
            break
        t1 = time.time()
        rc = main(["tune", "--sizes", b, "--dtypes", "bf16", "--budget-s", "10", "--ship", "--quiet"])
        log.append(dict(bucket=b, rc=rc, seconds=round(time.time() - t1, 2)))
    print(f"tuned {len(log)} of {len(todo)} in {time.time() - t0:.0f} s", flush=True)
    json.dump([r["bucket"] for r in log if r["rc"] == 0], open(os.path.join(OUT, "tuned.json"), "w"))
    json.dump(log, open(os.path.join(OUT, "tune-log.json"), "w"))


if __name__ == "__main__":
    if sys.argv[1] == "verify":
        verify(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif sys.argv[1] == "tune":
        tune(float(sys.argv[2]))


def survey(shapes_path, tag, w_t=False):
    """The public API (tilegemm.matmul's launch plan) on the library's device and eager clocks, each shape
    as sampled and with N and K rounded up to 8 (rows 16-byte aligned) -> $OUT/survey-TAG.json"""
    import torch
    from tilegemm import tuning
    from tilegemm.bench import library as L
    from tilegemm.kernels.tensorcore import _problem as P
    clock, rows = L._Clock(), []
    shapes = [tuple(s) for s in json.load(open(shapes_path))]
    for m, n, k in shapes:
        for mm, nn, kk in dict.fromkeys([(m, n, k), (m, -(-n // 8) * 8, -(-k // 8) * 8)]):
            a = torch.empty(mm, kk, device="cuda", dtype=torch.bfloat16)
            b = torch.empty(kk, nn, device="cuda", dtype=torch.bfloat16)
            if w_t:
                b = b.t().contiguous().t()
            c = torch.empty(mm, nn, device="cuda", dtype=torch.bfloat16)
            d = tuning.choose(P.Problem(a, b, c, "bf16"))
            del a, b, c
            rec = L.measure_shape(clock, "bf16", mm, nn, kk, ("device", "eager"), 0.3, w_t=w_t)
            row = dict(m=mm, n=nn, k=kk, aligned=(mm, nn, kk) != (m, n, k) or (n % 8 == 0 and k % 8 == 0),
                       rung=d.rung, config=d.config, source=d.source, check=rec.get("check"))
            for mode in ("device", "eager"):
                r = rec.get(mode) or {}
                row[mode] = [round(r.get("ours_ms", 0) * 1e3, 2), round(r.get("ref_ms", 0) * 1e3, 2)]
            rows.append(row)
            json.dump(rows, open(os.path.join(OUT, f"survey-{tag}.json"), "w"), indent=1)
            dv, ea = row["device"], row["eager"]
            print(tag, mm, nn, kk, "dev", dv, round(dv[1] / dv[0], 3) if dv[0] else None, "eager", ea,
                  round(ea[1] / ea[0], 3) if ea[0] else None, d.rung, d.source[-70:], flush=True)


if __name__ == "__main__" and sys.argv[1] == "survey":
    survey(sys.argv[2], sys.argv[3], len(sys.argv) > 4)
