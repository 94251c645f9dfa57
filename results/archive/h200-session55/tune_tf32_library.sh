. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 200 python3 -m pytest -q -m gpu tests/test_tensorcore.py -p no:cacheprovider -k "warp_specialized_every_config and tf32" 2>&1 | tail -4
python3 -m tilegemm.cli tune --sizes 3072x3072x3072,5000x3000x2000 --dtypes tf32 --budget-s 20 --ship --log $OUT/tune-tf32.json --quiet 2>&1 | tail -4
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
timeout 170 python3 -m tilegemm.cli library --dtypes tf32 --runs 3 --no-host --no-first --no-decode --json $OUT/lib-tf32.json 2>&1 | tail -25
timeout 60 python3 -m tilegemm.cli tune --sizes 4096x4096x4096,2048x2048x2048 --dtypes tf32 --budget-s 20 --log $OUT/tune-tf32-probe.json --quiet 2>&1 | tail -4
