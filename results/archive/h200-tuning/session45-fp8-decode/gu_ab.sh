# (session 45; run from the repository root with .dev/s45/ holding ab.py and the db-gu-*.json databases: make_variants_gu.py writes them)
# 8B gate/up at M = 128 (B = W^T): the database's pick against t02/t03 tile variants, public API, two rounds in turn.
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/db-base.json
for round in 1 2; do
  for v in base g1 g2 g3 g4 g5 g6 g7; do
    if [ $v = base ]; then cp /tmp/db-base.json $DB; else cp .dev/s45/db-gu-$v.json $DB; fi
    echo "== round $round $v"
    TILEGEMM_CACHE_DIR=/tmp/c-$v-$round BUDGET=0.8 SHAPES=128x14336x4096xt NAME=gu-$v-$round python3 .dev/s45/ab.py 2>&1 | grep -v Warning
  done
done
cp /tmp/db-base.json $DB
