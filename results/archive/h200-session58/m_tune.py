"""Session 58 (docs/perf-notes.md, 114): buckets of Llama-3 8B and 70B projection widths at M between the database's
128 and 1024 (then past 1024), tuned at the bucket's shape and shipped, until a time guard -> $OUT/m-tuned-TAG.json.
FP8 and TF32 had none there: M = 129..1023 took the 1024 bucket's tile (a crossing of M = 128 costs cache.distance
8), 188×4096×4096 at 0.56× (TF32) and 0.49× (FP8) cuBLAS on the held-out draw of 2026-12-02; BF16 had the 8B widths
(session 57) but not the 70B ones. Layouts: FP8 t (B = Wᵀ, the only one it runs), TF32 n, BF16 n and t.
On the device, from the repository root:
    python3 results/archive/h200-session58/m_tune.py GUARD_S DTYPES WIDTHS TAG
Run a (420 fp8,tf32 all a): 81 buckets, M = 256, 512, 768, 384 (72) and 9 at 192 (m-tuned-a.json), shipped.
Run b (200 bf16 70b b): 50 BF16 buckets of the 70B widths; not shipped and not kept (the device gave back 8 files
of that call's 13, not its database); its held-out BF16 geomeans, read from its output, moved 1.054 -> 1.067
(draw 20261202) and 0.956 -> 0.954 (20261204), 196×8192×8192 0.585 -> 0.581."""
import json, os, sys, time
from tilegemm.cli import main
from tilegemm.tuning import space

OUT = os.environ.get("OUT", "/tmp/out")
DB = "src/tilegemm/data/tuning/nvidia-h200.json"
WIDTHS = {"8b": ((4096, 4096), (14336, 4096), (4096, 14336), (1024, 4096), (6144, 4096)),
          "70b": ((8192, 8192), (28672, 8192), (8192, 28672), (1024, 8192))}
WIDTHS["all"] = WIDTHS["8b"] + WIDTHS["70b"]
MS = (256, 512, 768, 384, 192, 2048, 320, 640, 4096)
CLS = {"fp8": "fp8|float8_e4m3fn|bfloat16", "tf32": "tf32|float32|float32", "bf16": "bf16|bfloat16|bfloat16"}
LAYOUTS = {"fp8": "t", "tf32": "n", "bf16": "nt"}
guard, dtypes, widths, tag = float(sys.argv[1]), sys.argv[2].split(","), WIDTHS[sys.argv[3]], sys.argv[4]
t0, log = time.time(), []
for m in MS:
    for n, k in widths:
        for dt in dtypes:
            for lay in LAYOUTS[dt]:
                have = json.load(open(DB))["entries"]
                b = f"{space.grid_up(m)}x{space.grid_up(n)}x{space.grid_up(k)}"
                if f"{CLS[dt]}|n{lay}|nobeta|{b}" in have or time.time() - t0 > guard:
                    continue
                t1 = time.time()
                rc = main(["tune", "--sizes", f"{m}x{n}x{k}", "--dtypes", dt, "--layouts", lay, "--budget-s", "10",
                           "--ship", "--quiet"])
                log.append(dict(dtype=dt, layout=lay, m=m, n=n, k=k, rc=rc, seconds=round(time.time() - t1, 2)))
                json.dump(log, open(os.path.join(OUT, f"m-tuned-{tag}.json"), "w"))
print(f"tuned {len(log)} in {time.time() - t0:.0f} s", flush=True)
