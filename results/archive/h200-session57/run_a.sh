# Session 57 (docs/perf-notes.md, 113), run on the H200 from the repository root as `bash results/archive/h200-session57/run_a.sh` (as run, from .dev/).
# /tmp/db-5188f9f.json: `git show 5188f9f:src/tilegemm/data/tuning/nvidia-h200.json`, made before the run (the device has no .git).
. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
rm -rf ~/.cache/tilegemm
timeout 300 python3 results/archive/h200-session57/survey.py tune ${GUARD:-270} 2>&1 | grep -v "Warn\|entries written\|pairs into" | tail -3
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
timeout 150 python3 results/archive/h200-session57/survey.py verify results/archive/h200-session57/db-without-grid212.json results/archive/h200-session57/shapes-b212-buckets.json 40 571 g212 2>&1 | grep -v Warn | tail -45
timeout 130 python3 results/archive/h200-session57/survey.py verify /tmp/db-5188f9f.json $OUT/tuned.json 30 572 new${TAG} 2>&1 | grep -v Warn | tail -32
