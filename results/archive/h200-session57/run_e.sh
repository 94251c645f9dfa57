# Session 57 (docs/perf-notes.md, 113), run on the H200 from the repository root as `bash results/archive/h200-session57/run_e.sh` (as run, from .dev/).
# /tmp/db-5188f9f.json: `git show 5188f9f:src/tilegemm/data/tuning/nvidia-h200.json`, made before the run (the device has no .git).
. scripts/device/env.sh || exit 1
rm -rf ~/.cache/tilegemm
timeout 450 python3 results/archive/h200-session57/m_tune.py ${GUARD:-400} 2>&1 | grep -v "Warn\|entries written\|pairs into" | tail -3
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
timeout 70 python3 results/archive/h200-session57/survey.py survey results/archive/h200-session57/shapes-mfam.json mfam-after 2>&1 | grep -v Warn | tail -25
timeout 50 python3 results/archive/h200-session57/survey.py survey results/archive/h200-session57/shapes-mfam_nt.json mfamnt-after wt 2>&1 | grep -v Warn | tail -15
