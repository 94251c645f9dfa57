# usage: narrow2.sh DTYPE [probe]   (tune the narrow corners in DTYPE, ship, A/B old vs new db)
. scripts/device/env.sh || exit 1
D=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/old-db.json
L="--no-host --no-first --no-decode"
t0=$(date +%s)
TILEGEMM_CACHE_DIR=/tmp/tunecache timeout 280 python3 -m tilegemm.cli tune --shapes narrow --dtypes $D --budget-s 15 --ship --log $OUT/tune-narrow-$D.json --quiet > $OUT/tune-$D.txt 2>&1
echo "tune rc=$? $(( $(date +%s)-t0 ))"
cp $DB $OUT/new-db.json
export TILEGEMM_CACHE_DIR=/tmp/emptycache
S=results/archive/h200-session63/narrow-shapes.json
cp /tmp/old-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes $S --dtypes $D --runs 3 $L --json $OUT/narrow-$D-before.json > $OUT/ab-old.txt 2>&1
echo "before rc=$? $(( $(date +%s)-t0 ))"
cp $OUT/new-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes $S --dtypes $D --runs 3 $L --json $OUT/narrow-$D-after.json > $OUT/ab-new.txt 2>&1
echo "after rc=$? $(( $(date +%s)-t0 ))"
if [ -n "$2" ]; then
TILEGEMM_CACHE_DIR=/tmp/probecache timeout 90 python3 .dev/probe_log.py $OUT/probe-1k8k.json 1024x1024x8192 > $OUT/probe.txt 2>&1
echo "probe rc=$? $(( $(date +%s)-t0 ))"
fi
tail -4 $OUT/tune-$D.txt $OUT/ab-old.txt $OUT/ab-new.txt $OUT/probe.txt 2>/dev/null
