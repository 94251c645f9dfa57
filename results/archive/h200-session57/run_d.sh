# Session 57 (docs/perf-notes.md, 113), run on the H200 from the repository root as `bash results/archive/h200-session57/run_d.sh` (as run, from .dev/).
# /tmp/db-5188f9f.json: `git show 5188f9f:src/tilegemm/data/tuning/nvidia-h200.json`, made before the run (the device has no .git).
. scripts/device/env.sh || exit 1
rm -rf ~/.cache/tilegemm
timeout 100 python3 results/archive/h200-session57/survey.py survey results/archive/h200-session57/shapes-mfam_nt.json mfamnt wt 2>&1 | grep -v Warn | tail -16
S=$(python3 -c "import json;print(','.join('x'.join(map(str,s)) for s in json.load(open('results/archive/h200-session57/shapes-mworst.json'))))")
timeout 200 python3 -m tilegemm.cli tune --sizes $S --dtypes bf16 --budget-s 10 --log $OUT/tune-mworst.json --quiet 2>&1 | grep -v Warn | tail -3
timeout 100 python3 results/archive/h200-session57/survey.py survey results/archive/h200-session57/shapes-mworst.json mtuned 2>&1 | grep -v Warn | tail -10
