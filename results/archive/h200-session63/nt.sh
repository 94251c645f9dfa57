. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $OUT/gpu.txt
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/old-db.json
t0=$(date +%s)
G=1024x384x4096,1024x512x4096,1024x768x4096,2048x384x4096,2048x512x4096,2048x768x4096,3072x512x4096,4096x384x4096,4096x512x4096,4096x768x4096,6144x512x4096,8192x384x4096,8192x512x4096,8192x768x4096,4096x512x2048,4096x512x1024,2048x320x4096,4096x320x4096,8192x320x4096
TILEGEMM_CACHE_DIR=/tmp/tunecache timeout 300 python3 -m tilegemm.cli tune --sizes $G --dtypes bf16 --layouts t --budget-s 15 --ship --log $OUT/tune-narrow-nt.json --quiet > /tmp/grid.txt 2>&1
echo "grid rc=$? $(( $(date +%s)-t0 ))"; tail -3 /tmp/grid.txt
cp $DB $OUT/new-db.json
export TILEGEMM_CACHE_DIR=/tmp/emptycache
cp /tmp/old-db.json $DB
timeout 120 python3 results/archive/h200-session63/nt_ab.py results/archive/h200-session63/narrow-shapes.json $OUT/narrow-nt-before.json 2>&1 | tail -5
cp $OUT/new-db.json $DB
timeout 120 python3 results/archive/h200-session63/nt_ab.py results/archive/h200-session63/narrow-shapes.json $OUT/narrow-nt-after.json 2>&1 | tail -5
echo "ab done $(( $(date +%s)-t0 ))"
