#!/usr/bin/env bash
# The tests: set up, then pytest. Without a GPU, the `gpu`-marked tests are deselected (they run
# on a GPU machine, where this same script runs them all); every kernel still runs here under
# Numba's CUDA simulator. Extra arguments go to pytest.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
if python -c "import sys, tilegemm._cuda as c; sys.exit(0 if c.has_gpu() else 1)"; then
    marker=()
else
    marker=(-m "not gpu")
fi
set +e
python -m pytest -q "${marker[@]}" "$@"
code=$?
set -e
if [ "$code" -eq 5 ]; then
    echo "test.sh: pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$code"
