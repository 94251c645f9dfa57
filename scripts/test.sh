#!/usr/bin/env bash
# The tests: set up, then pytest. Without a GPU, the `gpu`-marked tests are deselected (they run
# on a GPU machine, where this same script runs them all); every kernel still runs here under
# Numba's CUDA simulator. Extra arguments go to pytest.
#
# Without a GPU and without arguments (the whole suite, as CI runs it), the suite is split into as
# many shards as the machine has CPUs (tests/conftest.py's --shard I/N: the tests dealt by their
# times in tests/durations.json, so the shards end together), run side by side: most tests are one
# busy Python thread (the simulator, Triton's interpreter), so two cores halve the wall time.
# Shard 0 prints as it goes; the others' output follows when they end. TILEGEMM_TEST_SHARDS=N sets
# the count (1: one process, as with arguments or on a GPU). The times are re-recorded with
#   TILEGEMM_TEST_SHARDS=2 bash scripts/test.sh --record-durations tests/durations.json
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if python -c "import sys, tilegemm._cuda as c; sys.exit(0 if c.has_gpu() else 1)"; then
    marker=()
    shards=${TILEGEMM_TEST_SHARDS:-1}
else
    marker=(-m "not gpu")
    default=$(nproc 2>/dev/null || echo 1)
    # A property-count JSON (TILEGEMM_PROPERTY_JSON) is one process's counts: no shards then.
    if [ "$#" -gt 0 ] || [ -n "${TILEGEMM_PROPERTY_JSON:-}" ]; then default=1; fi
    shards=${TILEGEMM_TEST_SHARDS:-$default}
fi

no_tests() {
    echo "test.sh: pytest collected no tests: that is a failure" >&2
    exit 1
}

set +e
if [ "$shards" -le 1 ]; then
    python -m pytest -q "${marker[@]}" "$@"
    code=$?
    if [ "$code" -eq 5 ]; then
        no_tests
    fi
    exit "$code"
fi

logs=$(mktemp -d) || exit 1
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$logs"' EXIT
pids=()
for ((i = 1; i < shards; i++)); do
    python -m pytest -q -p no:cacheprovider "${marker[@]}" --shard "$i/$shards" "$@" > "$logs/$i.log" 2>&1 &
    pids+=($!)
done
echo "test.sh: the suite in $shards shards side by side (TILEGEMM_TEST_SHARDS); shard 0/$shards:"
python -m pytest -q -p no:cacheprovider "${marker[@]}" --shard "0/$shards" "$@"
codes=($?)
for ((i = 1; i < shards; i++)); do
    wait "${pids[i - 1]}"
    codes+=($?)
    echo "test.sh: shard $i/$shards:"
    cat "$logs/$i.log"
done
pids=()  # all reaped: nothing for the trap to kill
# A shard's exit 5 (no tests) is a failure only if every shard had none; any other non-zero fails.
empty=0
for c in "${codes[@]}"; do
    if [ "$c" -eq 5 ]; then
        empty=$((empty + 1))
    elif [ "$c" -ne 0 ]; then
        echo "test.sh: exit codes by shard: ${codes[*]}" >&2
        exit "$c"
    fi
done
if [ "$empty" -eq "$shards" ]; then
    no_tests
fi
echo "test.sh: every shard passed (exit codes ${codes[*]})"
exit 0
