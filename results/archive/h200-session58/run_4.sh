# Session 58 (docs/perf-notes.md, 114), on the H200 from the repository root (as run, from .dev/r3.sh; .dev/old/src was
# `git archive 0e6d33c src`; src/ the committed database and space.t04_fits_k): head-* -> runs/head-*, held-out.json ->
# results/h200/held-out.json, new-* -> runs/tuned-rule-*.
. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
ho() {  # seed dtype tag
  rm -rf ~/.cache/tilegemm
  python3 -m tilegemm.cli library --shapes held-out:$1 --dtypes $2 --runs 3 --no-host --no-first --no-decode --json $OUT/$3-held-out-$1-$2.json 2>&1 | grep -v "^run " | grep device
}
NEW=$PYTHONPATH
export PYTHONPATH=/tmp/site:$PWD/.dev/old/src
for dt in tf32 fp8; do ho 20261205 $dt head; done
export PYTHONPATH=$NEW
rm -rf ~/.cache/tilegemm; python3 -m tilegemm.cli library --shapes held-out:20261205 --dtypes bf16,fp16,tf32,fp8 --runs 3 --no-host --no-first --no-decode --json $OUT/held-out.json 2>&1 | grep -v "^run " | tail -12
for s in 20261202 20261203; do ho $s tf32 new; done
