# Source on the H200 device image: numba-cuda 0.30.4 breaks with the image's numpy 2.5, so a
# carried numpy 2.4 wheel (.whl/) goes first on the path; the project runs from src/. The image sets
# PYTHONDONTWRITEBYTECODE=1, so both are byte-compiled here, once: otherwise every fresh process
# compiles numpy from source (0.28 s of a 0.35 s `import tilegemm` on the device, against 0.09 s).
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || return 1
python3 -m compileall -q src > /dev/null
export PYTHONPATH=/tmp/site:$PWD/src
export PYTHONUNBUFFERED=1
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
