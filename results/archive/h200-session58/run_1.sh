# Session 58 (docs/perf-notes.md, 114), on the H200 from the repository root as `bash run_1.sh bf16` then `bash run_1.sh fp16 tf32 fp8`
# (as run, from .dev/ho.sh), the database at 0e6d33c: $OUT/held-out-DT.json -> runs/head-held-out-20261202-DT.json.
. scripts/device/env.sh || exit 1
rm -rf ~/.cache/tilegemm
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
for dt in "$@"; do
  /usr/bin/time -f "%e s" python3 -m tilegemm.cli library --shapes held-out:20261202 --dtypes $dt --runs 3 --no-host --no-first --no-decode --json $OUT/held-out-$dt.json 2>&1 | tail -45
done
