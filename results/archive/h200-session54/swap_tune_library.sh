. scripts/device/env.sh || exit 1
timeout 100 python3 .dev/s54_swap.py 2>&1 | grep -v "Warning\|warn(" | tail -30
python3 -m tilegemm.cli tune --sizes 3072x3072x3072 --dtypes tf32 --budget-s 15 --ship --log $OUT/tune-tf32.json --quiet 2>&1 | tail -4
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
timeout 150 python3 -m tilegemm.cli library --dtypes tf32 --runs 3 --no-host --no-first --no-decode --json $OUT/lib-tf32.json 2>&1 | tail -4
