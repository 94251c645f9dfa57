# Session 58 (docs/perf-notes.md, 114), on the H200 from the repository root (as run, from .dev/r2.sh; .dev/db-head.json was
# `git show 0e6d33c:src/tilegemm/data/tuning/nvidia-h200.json`; src/ held run 2's database, no split-K rule): b-* -> runs/head-*,
# a-* -> runs/tuned-norule-*. The device gave back 8 of the 13 files: b-held-out-20261204-tf32 (its output said device geomean
# 1.004), the BF16 tuning's database and log and the c-* files are not kept (m_tune.py says what its output showed).
. scripts/device/env.sh || exit 1
DB=src/tilegemm/data/tuning/nvidia-h200.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
ho() {  # seed dtype tag
  rm -rf ~/.cache/tilegemm
  python3 -m tilegemm.cli library --shapes held-out:$1 --dtypes $2 --runs 3 --no-host --no-first --no-decode --json $OUT/$3-held-out-$1-$2.json 2>&1 | grep -v "^run " | grep device
}
cp $DB /tmp/db-a.json; cp .dev/db-head.json $DB
for dt in bf16 tf32 fp8; do ho 20261204 $dt b; done
cp /tmp/db-a.json $DB
for s in 20261202 20261203 20261204; do for dt in tf32 fp8; do ho $s $dt a; done; done
rm -rf ~/.cache/tilegemm
timeout 260 python3 results/archive/h200-session58/m_tune.py ${GUARD:-200} bf16 70b b 2>&1 | grep -v "Warn\|entries written\|pairs into" | tail -2
cp $DB $OUT/
for s in 20261202 20261204; do ho $s bf16 c; done
