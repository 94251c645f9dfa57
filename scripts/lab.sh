#!/usr/bin/env bash
# The lab: set up, describe the machine, then the comparison table.
# With a GPU: sizes 128…4096, the course's kernels (CPU, naive to register-blocked, and the broken
# one the checker catches), cuBLAS; --kernels all for every rung. Without: the same kernels, the GPU
# ones under Numba's CUDA simulator at sizes ≤ 64 (correct results; simulated times are not GPU times).
# Extra arguments go to `tilegemm bench` (e.g. --sizes 256,1024 --kernels all --json out.json).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
tilegemm info
tilegemm bench "$@"
