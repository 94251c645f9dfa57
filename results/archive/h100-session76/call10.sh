. scripts/device/env.sh || exit 1
step() { local t=$1; shift; echo "== $* (limit ${t}s) $(date +%T)"; timeout "$t" "$@"; echo "== exit $? $(date +%T)"; }
nvidia-smi --query-gpu=name --format=csv,noheader
L=${L:-330}
run() { local name=$1; shift; ( export TILEGEMM_CACHE_DIR=/tmp/tgcache-$name; mkdir -p $TILEGEMM_CACHE_DIR; step $L python3 -m pytest -q -p no:cacheprovider -rfEs "$@" ) > $OUT/tests-$name.txt 2>&1; }
run cli -m "gpu or not gpu" tests/test_cli.py &

run every -m "gpu or not gpu" tests/test_every_command.py &
wait
for f in $OUT/tests-*.txt; do echo "## $f"; grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|^== |^E  " $f | tail -14; done
