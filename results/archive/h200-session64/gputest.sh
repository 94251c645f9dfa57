. scripts/device/env.sh || exit 1
export TILEGEMM_CACHE_DIR=/tmp/emptycache
timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_tuning.py tests/test_dispatch.py -x > $OUT/gpu-tests-final.txt 2>&1
echo "rc=$?"; tail -2 $OUT/gpu-tests-final.txt
