. scripts/device/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
S=1x14336x4096,3072x3072x3072,3000x3000x3000,1x16384x4096,1x12288x4096,2560x2560x2560,4096x4096x4096
python3 -m tilegemm.cli library --dtypes tf32 --shapes $S --runs 3 --no-host --no-first --no-decode --json $OUT/tf32-before.json 2>&1 | tail -25
python3 -m tilegemm.cli tune --sizes 1x14336x4096,3072x3072x3072 --dtypes tf32 --budget-s 20 --ship --log $OUT/tune-tf32.json --quiet 2>&1 | tail -20
cp src/tilegemm/data/tuning/nvidia-h200.json $OUT/
python3 -m tilegemm.cli library --dtypes tf32 --shapes $S --runs 3 --no-host --no-first --no-decode --json $OUT/tf32-after.json 2>&1 | tail -25
