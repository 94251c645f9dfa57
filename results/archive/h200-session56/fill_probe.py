"""Session 56: BF16 shapes between the database's buckets (docs/perf-notes.md, 112). On the device, from the
repository root: python3 results/archive/h200-session56/fill_probe.py survey before; ... tune 270; ... survey after.
As run, the scripts sat in .dev/ and the after-survey read the first one's shapes from .dev/fill-before.json;
here they read this folder's copy (the archived fill-before.json), so a rerun times the same 45 shapes.
Modes:
  survey TAG   each sampled shape (30 picked to tune, 15 held out): the decision, then ours against cuBLAS on the library's device
               clock (interleaved, L2 flushed) -> $OUT/fill-TAG.json
  tune         `tilegemm tune --ship` on the sampled shapes, worst ratio first (fill-before.json),
               until a time guard -> $OUT/fill-tune.json"""
import itertools, json, os, random, sys, time

OUT = os.environ.get("OUT", "/tmp/out")
HERE = os.path.dirname(os.path.abspath(__file__)) + "/"  # the after-survey re-reads the first one's shapes here
GRID = (1280, 1536, 1792, 2048, 2304, 2560, 2816, 3072, 3328, 3584, 3840, 4096, 4608, 5120)
N_SAMPLE = int(os.environ.get("FILL_N", "30"))


def sample():
    import triton  # noqa: F401
    from tilegemm.tuning import space
    with open("src/tilegemm/data/tuning/nvidia-h200.json") as f:
        have = {k.rsplit("|", 1)[1] for k in json.load(f)["entries"] if k.startswith("bf16|bfloat16|bfloat16|nn|nobeta|")}
    shapes = [s for s in itertools.product(GRID, repeat=3)
              if "x".join(str(space.grid_up(x)) for x in s) not in have]
    picked = random.Random(56).sample(shapes, N_SAMPLE)
    rest = [x for x in shapes if x not in picked]
    return picked, random.Random(57).sample(rest, N_SAMPLE // 2)  # the tuned candidates; held out


def survey(tag):
    import torch
    from tilegemm import tuning
    from tilegemm.bench import library as L
    from tilegemm.kernels.tensorcore import _problem as P
    clock, out = L._Clock(), []
    if os.path.exists(HERE + "fill-before.json"):  # the shapes the first survey sampled, whatever the database holds now
        rows = json.load(open(HERE + "fill-before.json"))
        picked = [(r["m"], r["n"], r["k"]) for r in rows if r["kind"] == "picked"]
        held = [(r["m"], r["n"], r["k"]) for r in rows if r["kind"] == "held out"]
    else:
        picked, held = sample()
    for (m, n, k), kind in [(s, "picked") for s in picked] + [(s, "held out") for s in held]:
        a = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(k, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        d = tuning.choose(P.Problem(a, b, c, "bf16"))
        rec = L.measure_shape(clock, "bf16", m, n, k, ("device",), 0.3)
        dev = rec.get("device") or {}
        row = dict(m=m, n=n, k=k, kind=kind, rung=d.rung, config=d.config, source=d.source, check=rec.get("check"),
                   ours_us=round(dev.get("ours_ms", 0) * 1e3, 2), ref_us=round(dev.get("ref_ms", 0) * 1e3, 2))
        row["ratio"] = round(row["ref_us"] / row["ours_us"], 3) if row["ours_us"] else None
        out.append(row)
        print(tag, m, n, k, row["ratio"], row["ours_us"], row["ref_us"], d.rung, d.source.split(",")[-1][:60], flush=True)
    json.dump(out, open(os.path.join(OUT, f"fill-{tag}.json"), "w"), indent=1)


def tune(guard_s):
    from tilegemm.cli import main
    first = HERE + "fill-before.json" if os.path.exists(HERE + "fill-before.json") else os.path.join(OUT, "fill-before.json")
    rows = [r for r in json.load(open(first)) if r["kind"] == "picked"]
    rows.sort(key=lambda r: r["ratio"] or 0)
    t0, log = time.time(), []
    for r in rows:
        if time.time() - t0 > guard_s:
            break
        s = f"{r['m']}x{r['n']}x{r['k']}"
        t1 = time.time()
        rc = main(["tune", "--sizes", s, "--dtypes", "bf16", "--budget-s", "10", "--ship", "--quiet",
                   "--log", os.path.join(OUT, f"tune-{s}.json")])
        log.append(dict(shape=s, rc=rc, seconds=round(time.time() - t1, 1), before=r["ratio"]))
        print("tuned", s, rc, round(time.time() - t1, 1), flush=True)
    json.dump(log, open(os.path.join(OUT, "fill-tune.json"), "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "survey":
        survey(sys.argv[2])
    elif sys.argv[1] == "tune":
        tune(float(sys.argv[2]))
    else:
        print(sample())
