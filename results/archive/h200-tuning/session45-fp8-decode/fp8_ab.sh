# (session 45; run from the repository root with .dev/s45/ holding ab.py and make_variants.py's databases)
# FP8 decode on the 70B gate/up weight (M = 1, 16): the database's t03 pick against t04 split-K variants,
# through the public API, each database in its own process, two rounds in turn.
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/db-base.json
for round in ${ROUNDS:-1 2}; do
  for v in ${VARIANTS:-base s4 s2 s2k512 s3}; do
    if [ $v = base ]; then cp /tmp/db-base.json $DB; else cp .dev/s45/db-fp8-$v.json $DB; fi
    echo "== round $round $v"
    TILEGEMM_CACHE_DIR=/tmp/c-$v-$round DTYPE=fp8 SHAPES=1x28672x8192xt,16x28672x8192xt NAME=fp8-$v-$round \
      python3 .dev/s45/ab.py 2>&1 | grep -v Warning
  done
done
cp /tmp/db-base.json $DB
