"""CPU (session 45, note 90): which picks the gate/up entry moves. The library set's BF16/FP16 (B
row-major) and FP8 (B K-major) shapes, the 48 decode products (BF16, B = Wᵀ), and B = Wᵀ at
M = 96–256 on the 8B's weights, looked up in the database before (commit d26a3ba) and after
(b00cf9e), with pick.py's lookup (num_sms patched to the H200's 132). Run from the repository
root with this folder on sys.path."""
import json, subprocess, sys, os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pick import decide  # noqa: E402
from tilegemm.bench import library as L  # noqa: E402
from tilegemm.bench.shapes import load_shapes  # noqa: E402


def db(commit):
    return json.loads(subprocess.check_output(["git", "show", f"{commit}:src/tilegemm/data/tuning/nvidia-h200.json"]))


old, new = db("d26a3ba"), db("b00cf9e")
todo = [(dt, m, n, k, "n") for (m, n, k) in load_shapes("library") for dt in ("bf16", "fp16")]
todo += [("fp8", m, n, k, "t") for (m, n, k) in load_shapes("library")]
todo += [("bf16", m, n, k, "t") for _, m, n, k in L.decode_shapes()]
todo += [("bf16", m, n, k, "t") for m in (96, 100, 128, 160, 192, 256)
         for n, k in ((14336, 4096), (4096, 14336), (4096, 4096), (1024, 4096))]
moved = 0
for t in todo:
    a, b = decide(old, *t), decide(new, *t)
    if (a.rung, a.config) != (b.rung, b.config):
        moved += 1
        print("moved", t, a.rung, a.config, "->", b.rung, b.config)
print(len(todo), "checked,", moved, "moved")
