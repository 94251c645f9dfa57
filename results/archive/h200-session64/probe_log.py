"""Each rung's fastest few at given shapes (BF16, FP16): where the tuner's winner stands."""
import json, sys, os
os.environ.setdefault("TILEGEMM_TUNE_BUDGET_S", "15")
from tilegemm.tuning import tuner
from tilegemm.tuning.command import problem
out = []
for s in sys.argv[2:]:
    m, n, k = map(int, s.split("x"))
    for dt in ("bf16",):
        tuner.tuning_log.clear()
        d = tuner.tune(problem(dt, m, n, k))
        out.append(dict(shape=s, dtype=dt, win=(d.rung, d.config, d.ms) if d else None, log=list(tuner.tuning_log)))
        print(s, dt, d.rung if d else None, d.ms if d else None, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1, default=str)
