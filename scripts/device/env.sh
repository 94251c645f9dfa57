# Source on the H200 device image: numba-cuda 0.30.4 breaks with the image's numpy 2.5, so a
# carried numpy 2.4 wheel (.whl/) goes first on the path; the project runs from src/.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || return 1
export PYTHONPATH=/tmp/site:$PWD/src
export PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
