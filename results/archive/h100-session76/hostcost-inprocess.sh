. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader
export TILEGEMM_CACHE_DIR=/tmp/tgcache-host; mkdir -p $TILEGEMM_CACHE_DIR
python3 -m compileall -q .dev/pk > /dev/null
for i in 1 2; do
PYTHONPATH=/tmp/site:$PWD/src:$PWD/.dev/pk timeout 200 taskset -c 5 python3 .dev/hostcost3.py tilegemm,tga0c,tg701 2>&1 | grep -v Warn | tee -a $OUT/hostcost3.txt
done
