#!/usr/bin/env bash
# Set-up shared by scripts/lab.sh and scripts/test.sh: a virtual environment in .venv with
# tilegemm installed (editable) and what its tests need. Safe to run again: pip skips what is there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
export PIP_DISABLE_PIP_VERSION_CHECK=1
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: NVIDIA GPU found: installing tilegemm with its GPU extra (torch, triton, CUDA 13 wheels)"
    python -m pip install -q -e ".[gpu,test]"
else
    # No GPU. torch is only the yardstick and the torch round-trip tests here. The pin alone does not
    # make it the CPU build: from PyPI on Linux torch==2.13.0 is the CUDA build (several GB);
    # TORCH_SPEC=torch==2.13.0+cpu PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu is (README).
    echo "setup: no NVIDIA GPU: ${TORCH_SPEC:-torch==2.13.0} (on Linux from PyPI the CUDA build, several GB: the README says how to take the CPU one), Numba's CUDA simulator for the GPU kernels"
    python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}"
    python -m pip install -q -e ".[test]"
fi
