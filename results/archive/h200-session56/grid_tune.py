"""Session 56 (docs/perf-notes.md, 112): tune the BF16 buckets of the 1280..5120 grid (grid-todo.json, from grid_plan.py) at
their bucket's shape, smallest side first, until a time guard; the database written after each.
On the device, from the repository root: python3 results/archive/h200-session56/grid_tune.py 530"""
import json, os, sys, time
from tilegemm.cli import main

OUT = os.environ.get("OUT", "/tmp/out")
guard = float(sys.argv[1])
DB = "src/tilegemm/data/tuning/nvidia-h200.json"
todo = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "grid-todo.json")))
have = {k.rsplit("|", 1)[1] for k in json.load(open(DB))["entries"] if k.startswith("bf16|bfloat16|bfloat16|nn|nobeta|")}
todo = sorted((b for b in todo if b not in have), key=lambda b: (min(map(int, b.split("x"))), eval(b.replace("x", "*"))))
t0, log = time.time(), []
for b in todo:
    if time.time() - t0 > guard:
        break
    t1 = time.time()
    rc = main(["tune", "--sizes", b, "--dtypes", "bf16", "--budget-s", "10", "--ship", "--quiet"])
    log.append(dict(bucket=b, rc=rc, seconds=round(time.time() - t1, 2)))
print(f"tuned {len(log)} of {len(todo)} in {time.time() - t0:.0f} s", flush=True)
with open(os.path.join(OUT, "grid-tune.json"), "w") as f:
    json.dump(log, f)
