"""Session 59 (docs/perf-notes.md, 115): the decisions (CPU, meta tensors, 132 SMs) that differ between
the code and databases at COMMIT and the working tree, over the library, tensor-core and model sets
and the held-out draws SEEDS, for the H200's database and the H100's:
    python3 results/archive/h200-session59/moves.py 3cc475a 20261205 20261213"""
import json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DBS = ("nvidia-h200", "nvidia-h100-80gb-hbm3")


def decide(db_name, seeds):
    from unittest import mock
    sys.path.insert(0, "results/archive/h200-session55")
    import wave_rule_survey as W
    from tilegemm import tuning
    from tilegemm.bench.shapes import held_out, load_shapes
    from tilegemm.kernels.tensorcore import _problem as P
    from tilegemm.tuning import space

    db = json.load(open(f"src/tilegemm/data/tuning/{db_name}.json"))
    sets = [("library", load_shapes("library"), False), ("tensorcore", W.TENSORCORE, False), ("model", W.MODEL, True)]
    sets += [(f"held-out:{s}", held_out(int(s)), False) for s in seeds]
    usable = tuning.usable
    with mock.patch.object(P, "num_sms", return_value=132), \
            mock.patch.object(tuning, "usable", lambda r, p: W.t05_runs(p) if r == space.T05 else usable(r, p)):
        for name, shapes, lay in sets:
            for dtype in W.DTYPES:
                for m, n, k in shapes:
                    if dtype == "fp8" and (n % 16 or k % 16):
                        continue
                    d = tuning.pick(db, "db", W.problem(dtype, m, n, k, lay or dtype == "fp8"))
                    print(name, dtype, f"{m}x{n}x{k}", d and d.rung, d and json.dumps(d.config, sort_keys=True))


if sys.argv[1] == "--decide":
    decide(sys.argv[2], sys.argv[3:])
    sys.exit()
commit, seeds = sys.argv[1], sys.argv[2:]
with tempfile.TemporaryDirectory() as old:
    subprocess.run(f"git archive {commit} src | tar -x -C {old}", shell=True, check=True)
    for db in DBS:
        out = {}
        for side, path in (("before", f"{old}/src"), ("after", "src")):
            env = dict(os.environ, PYTHONPATH=path)
            lines = subprocess.check_output([sys.executable, __file__, "--decide", db, *seeds], env=env, text=True)
            out[side] = dict((tuple(l.split(" ", 3)[:3]), l.split(" ", 3)[3]) for l in lines.splitlines())
        moved = {}
        for key, d in out["after"].items():
            if out["before"].get(key) != d:
                moved.setdefault(key[:2], []).append(key[2])
        for (name, dtype), shapes in moved.items():
            print(db, name, dtype, len(shapes), " ".join(shapes))
