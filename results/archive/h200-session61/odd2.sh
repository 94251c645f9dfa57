. scripts/device/env.sh || exit 1
python3 .dev/prof_odd.py > $OUT/prof.txt 2>&1; tail -40 $OUT/prof.txt
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_dispatch.py tests/test_tuning.py > $OUT/pytest.txt 2>&1; tail -3 $OUT/pytest.txt
