# Session 57 (docs/perf-notes.md, 113), run on the H200 from the repository root as `bash results/archive/h200-session57/run_g.sh` (as run, from .dev/).
# /tmp/db-5188f9f.json: `git show 5188f9f:src/tilegemm/data/tuning/nvidia-h200.json`, made before the run (the device has no .git).
. scripts/device/env.sh || exit 1
DB=src/tilegemm/data/tuning/nvidia-h200.json
sv() { cp $1 $DB; rm -rf ~/.cache/tilegemm; timeout 80 python3 results/archive/h200-session57/survey.py survey $2 $3 $4 2>&1 | grep -v Warn | tail -25; }
sv /tmp/db-5188f9f.json results/archive/h200-session57/shapes-zn.json zn-before
sv results/archive/h200-session57/db-run-g-after.json results/archive/h200-session57/shapes-zn.json zn-after
sv /tmp/db-5188f9f.json results/archive/h200-session57/shapes-zt.json zt-before wt
sv results/archive/h200-session57/db-run-g-after.json results/archive/h200-session57/shapes-zt.json zt-after wt
