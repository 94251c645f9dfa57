. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/old-db.json
L="--no-host --no-first --no-decode"
export TILEGEMM_CACHE_DIR=/tmp/emptycache
S=.dev/narrow-shapes-2.json
t0=$(date +%s)
for D in tf32 fp8; do
cp /tmp/old-db.json $DB
timeout 120 python3 -m tilegemm.cli library --shapes $S --dtypes $D --runs 3 $L --json $OUT/n2-$D-before.json > $OUT/n2-$D-old.txt 2>&1
cp .dev/new-db.json $DB
timeout 120 python3 -m tilegemm.cli library --shapes $S --dtypes $D --runs 3 $L --json $OUT/n2-$D-after.json > $OUT/n2-$D-new.txt 2>&1
echo "$D $(( $(date +%s)-t0 ))"
done
cd $OUT && tar czf logs.tgz *.txt && rm n2-*.txt
tail -4 /dev/null
