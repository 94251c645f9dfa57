"""Session 57 (docs/perf-notes.md, 113): BF16 buckets of Llama-3 8B's projections at M between the model set's
(320, 896, 1536, 3072, 5120 first, then 384, 640, 768, 1280, 2560, 256, 512, 2048), B row-major (n) and
K-major (t, x @ W.t()), tuned at the bucket's shape and shipped, until a time guard -> $OUT/m-tuned.json
On the device, from the repository root: python3 results/archive/h200-session57/m_tune.py GUARD_S"""
import json, os, sys, time
from tilegemm.cli import main
from tilegemm.tuning import space

OUT = os.environ.get("OUT", "/tmp/out")
DB = "src/tilegemm/data/tuning/nvidia-h200.json"
NK = ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096), (6144, 4096))
MS = (320, 896, 1536, 3072, 5120, 384, 640, 768, 1280, 2560, 256, 512, 2048)
guard = float(sys.argv[1])
t0, log = time.time(), []
for m in MS:
    for lay in ("n", "t"):
        for n, k in NK:
            have = json.load(open(DB))["entries"]
            b = f"{space.grid_up(m)}x{space.grid_up(n)}x{space.grid_up(k)}"
            if f"bf16|bfloat16|bfloat16|n{lay}|nobeta|{b}" in have:
                continue
            if time.time() - t0 > guard:
                break
            t1 = time.time()
            rc = main(["tune", "--sizes", f"{m}x{n}x{k}", "--dtypes", "bf16", "--layouts", lay, "--budget-s", "10",
                       "--ship", "--quiet"])
            log.append(dict(m=m, n=n, k=k, layout=lay, rc=rc, seconds=round(time.time() - t1, 2)))
            json.dump(log, open(os.path.join(OUT, "m-tuned.json"), "w"))
print(f"tuned {len(log)} in {time.time() - t0:.0f} s", flush=True)
