# Session 59 (docs/perf-notes.md, 115): held-out draws before (the code and database at 3cc475a, put in
# .dev/old/src by `git archive 3cc475a src | tar -x -C .dev/old`) and after (the tree), per draw, in one
# device call: SEEDS="20261205 20261213" DTYPES=bf16,fp16,tf32,fp8 bash results/archive/h200-session59/val.sh
# (runs/{old,new}-held-out-SEED.json; summary.py says which rule each draw's `new` ran)
. scripts/device/env.sh || exit 1
for seed in $SEEDS; do
  for side in old new; do
    rm -rf ~/.cache/tilegemm
    if [ $side = old ]; then PP=/tmp/site:$PWD/.dev/old/src; else PP=/tmp/site:$PWD/src; fi
    PYTHONPATH=$PP python3 -m tilegemm.cli library --shapes held-out:$seed --dtypes $DTYPES --runs 3 --no-host --no-first --no-decode --json $OUT/$side-held-out-$seed.json > $OUT/$side-$seed.log 2>&1 || tail -3 $OUT/$side-$seed.log
    tail -1 $OUT/$side-$seed.log
  done
done
cd $OUT && tar czf logs.tgz *.log && rm *.log
