# (session 45; run from the repository root with .dev/s45/ holding ab.py and make_variants.py's databases)
# FP8 decode products (M = 1, 16 on the 8B's and 70B's weights): the shipped database against the one
# with session 45's retuned FP8 entries, through the public API, each in its own process, in turn.
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/db-base.json
S=""; for m in 1 16; do for w in 4096x4096 1024x4096 14336x4096 4096x14336 8192x8192 1024x8192 28672x8192 8192x28672; do S="$S,${m}x${w}xt"; done; done
for round in 1 2 3; do
  for v in base tuned; do
    if [ $v = base ]; then cp /tmp/db-base.json $DB; else cp .dev/s45/db-fp8-$v.json $DB; fi
    echo "== round $round $v"
    TILEGEMM_CACHE_DIR=/tmp/c-$v-$round DTYPE=fp8 BUDGET=0.5 SHAPES=${S#,} NAME=fp8-$v-$round python3 .dev/s45/ab.py 2>&1 | grep -v Warning
  done
done
cp /tmp/db-base.json $DB
