. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $OUT/gpu.txt
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/old-db.json
L="--no-host --no-first --no-decode"
t0=$(date +%s)
TILEGEMM_CACHE_DIR=/tmp/tunecache timeout 150 python3 -m tilegemm.cli tune --sizes 2048x320x4096,4096x320x4096,8192x320x4096 --dtypes bf16 --budget-s 15 --ship --log $OUT/grid320.json --quiet > /tmp/grid320.txt 2>&1
echo "grid rc=$? $(( $(date +%s)-t0 ))"
cp $DB $OUT/new-db.json
export TILEGEMM_CACHE_DIR=/tmp/emptycache
cp /tmp/old-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes results/archive/h200-session63/narrow-shapes.json --dtypes bf16,fp16 --runs 3 $L --json $OUT/ab320-old.json > /tmp/ab-old.txt 2>&1
cp $OUT/new-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes results/archive/h200-session63/narrow-shapes.json --dtypes bf16,fp16 --runs 3 $L --json $OUT/ab320-new.json > /tmp/ab-new.txt 2>&1
echo "ab done $(( $(date +%s)-t0 ))"
timeout 200 python3 -m tilegemm.cli library --shapes held-out:20261205 --dtypes bf16,fp16,tf32,fp8 --runs 3 --no-first --no-decode --no-host --json $OUT/held-out.json > /tmp/ho.txt 2>&1
echo "held-out rc=$? $(( $(date +%s)-t0 ))"
tail -n 6 /tmp/ab-old.txt /tmp/ab-new.txt /tmp/ho.txt
