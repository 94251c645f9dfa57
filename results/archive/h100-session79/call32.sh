. scripts/device/env.sh || exit 1
export TILEGEMM_CACHE_DIR=/tmp/tgcache; mkdir -p $TILEGEMM_CACHE_DIR
timeout 60 python3 .dev/probe_fp8acc.py 2>&1 | grep -v Warn | tail -8
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE -m "gpu or not gpu" tests/test_tensorcore.py -k "tiny_scales or scales_outside" 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed|^E  " | tail -8
