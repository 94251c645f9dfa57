# tune N = 896 and 640 corners in BF16 (n, t), TF32, FP8; A/B on a fresh draw; GPU tests on the new db
. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/gpu.txt
DB=src/tilegemm/data/tuning/nvidia-h200.json
cp $DB /tmp/old-db.json
L="--no-host --no-first --no-decode"
G=1024x896x4096,2048x896x4096,4096x896x4096,8192x896x4096,4096x640x4096,8192x640x4096
t0=$(date +%s)
mkdir -p /tmp/r
TILEGEMM_CACHE_DIR=/tmp/tunecache timeout 150 python3 -m tilegemm.cli tune --sizes $G --dtypes bf16 --layouts n,t --budget-s 12 --ship --log /tmp/r/tune-bf16.json --quiet > /tmp/r/tune-bf16.txt 2>&1
echo "bf16 rc=$? $(( $(date +%s)-t0 ))"
TILEGEMM_CACHE_DIR=/tmp/tunecache timeout 150 python3 -m tilegemm.cli tune --sizes $G --dtypes tf32,fp8 --budget-s 12 --ship --log /tmp/r/tune-tf32-fp8.json --quiet > /tmp/r/tune-tf32-fp8.txt 2>&1
echo "tf32,fp8 rc=$? $(( $(date +%s)-t0 ))"
cp $DB $OUT/new-db.json
export TILEGEMM_CACHE_DIR=/tmp/emptycache
S=.dev/narrow-shapes-3.json
cp /tmp/old-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes $S --dtypes bf16,tf32,fp8 --runs 3 $L --json $OUT/n3-before.json > /tmp/r/ab-old.txt 2>&1
echo "before rc=$? $(( $(date +%s)-t0 ))"
cp $OUT/new-db.json $DB
timeout 100 python3 -m tilegemm.cli library --shapes $S --dtypes bf16,tf32,fp8 --runs 3 $L --json $OUT/n3-after.json > /tmp/r/ab-new.txt 2>&1
echo "after rc=$? $(( $(date +%s)-t0 ))"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_tuning.py tests/test_dispatch.py -x > $OUT/gpu-tests.txt 2>&1
echo "tests rc=$? $(( $(date +%s)-t0 ))"; tail -2 $OUT/gpu-tests.txt
tar czf $OUT/logs.tgz -C /tmp/r .
