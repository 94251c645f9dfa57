# Session 58 (docs/perf-notes.md, 114), on the H200 from the repository root (as run, from .dev/r1.sh, with GUARD=420; m_tune.py then took
# only the guard, its dtypes, widths and tag were these): the database at 0e6d33c on draw 20261203 -> runs/head-held-out-20261203-DT.json;
# then the FP8 and TF32 tuning: m-tuned.json -> m-tuned-a.json, and the database it left, whose 81 new entries are shipped.
. scripts/device/env.sh || exit 1
rm -rf ~/.cache/tilegemm
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
for dt in tf32 fp8; do
  python3 -m tilegemm.cli library --shapes held-out:20261203 --dtypes $dt --runs 3 --no-host --no-first --no-decode --json $OUT/b-held-out-20261203-$dt.json 2>&1 | grep -v "^run " | tail -3
done
timeout 420 python3 results/archive/h200-session58/m_tune.py ${GUARD:-360} fp8,tf32 all a 2>&1 | grep -v "Warn\|entries written\|pairs into" | tail -3
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
