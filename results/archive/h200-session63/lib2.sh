. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $OUT/gpu.txt
t0=$(date +%s)
export TILEGEMM_CACHE_DIR=/tmp/emptycache
timeout 420 python3 -m tilegemm.cli library --dtypes bf16,fp16,fp8,tf32 --runs 3 --no-first --no-decode --json $OUT/lib-tc.json > $OUT/lib-tc.txt 2>&1
echo "lib rc=$? $(( $(date +%s)-t0 ))"
mkdir -p /tmp/p
TILEGEMM_CACHE_DIR=/tmp/probecache timeout 100 python3 -m tilegemm.cli tune --sizes 4520x552x4904,5344x496x2496,8064x264x5856,1800x288x6144 --dtypes bf16 --budget-s 10 --db /tmp/p/probe-db.json --log /tmp/p/probe.json --quiet > /tmp/p/probe.txt 2>&1
TILEGEMM_CACHE_DIR=/tmp/probecache timeout 60 python3 -m tilegemm.cli library --shapes 4520x552x4904,5344x496x2496,8064x264x5856,1800x288x6144 --dtypes bf16 --modes device --runs 3 --no-host --no-first --no-decode --json /tmp/p/probe-lib.json > /tmp/p/probe-lib.txt 2>&1
echo "probe $(( $(date +%s)-t0 ))"
tar czf $OUT/probe.tgz -C /tmp/p .
tail -4 $OUT/lib-tc.txt /tmp/p/probe-lib.txt
