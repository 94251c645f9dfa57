. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/old-db.json
L="--no-host --no-first --no-decode"
t0=$(date +%s)
# 1. the two held-out worst at their own shapes (a probe: how far our tiles reach there), kept aside
TILEGEMM_CACHE_DIR=/tmp/probecache timeout 120 python3 -m tilegemm.cli tune --sizes 4520x552x4904,5344x496x2496 --dtypes bf16 --budget-s 15 --db $OUT/probe-db.json --log $OUT/probe.json --quiet > $OUT/probe.txt 2>&1
TILEGEMM_CACHE_DIR=/tmp/probecache timeout 60 python3 -m tilegemm.cli library --shapes 4520x552x4904,5344x496x2496 --dtypes bf16 --modes device --runs 3 $L --json $OUT/probe-lib.json > $OUT/probe-lib.txt 2>&1
echo "probe done $(( $(date +%s)-t0 ))"
# 2. the grid of narrow products (N under 1024, M from 1024)
G=1024x384x4096,1024x512x4096,1024x768x4096,2048x384x4096,2048x512x4096,2048x768x4096,3072x512x4096,4096x384x4096,4096x512x4096,4096x768x4096,6144x512x4096,8192x384x4096,8192x512x4096,8192x768x4096,4096x512x2048,4096x512x1024
TILEGEMM_CACHE_DIR=/tmp/tunecache timeout 300 python3 -m tilegemm.cli tune --sizes $G --dtypes bf16 --budget-s 15 --ship --log $OUT/grid.json --quiet > $OUT/grid.txt 2>&1
echo "grid rc=$? $(( $(date +%s)-t0 ))"
cp $DB $OUT/new-db.json
# 3. untuned narrow products, old database then new, in one run
export TILEGEMM_CACHE_DIR=/tmp/emptycache
cp /tmp/old-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes results/archive/h200-session63/narrow-shapes.json --dtypes bf16,fp16 --runs 3 $L --json $OUT/ab-old.json > $OUT/ab-old.txt 2>&1
cp $OUT/new-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes results/archive/h200-session63/narrow-shapes.json --dtypes bf16,fp16 --runs 3 $L --json $OUT/ab-new.json > $OUT/ab-new.txt 2>&1
echo "ab done $(( $(date +%s)-t0 ))"
tail -5 $OUT/probe.txt $OUT/probe-lib.txt $OUT/grid.txt $OUT/ab-old.txt $OUT/ab-new.txt
