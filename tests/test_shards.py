"""The suite's shards (tests/_shards.py, conftest's --shard I/N): dealt by recorded time, every
test in exactly one shard, the same deal in every process, the times recorded and merged."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import _shards

TESTS = Path(__file__).parent


def test_deal_balances_by_time_not_by_count():
    # Round robin would give shard 0 the two long tests (10 + 10 against 1 + 1).
    assert _shards.deal([10, 1, 10, 1], 2) == [0, 0, 1, 1]
    times = [float(t) for t in (158, 87, 68, 58, 51, 45, 37, 35, 34)] + [0.5] * 700
    dealt = _shards.deal(times, 2)
    loads = [sum(t for t, s in zip(times, dealt) if s == i) for i in range(2)]
    assert abs(loads[0] - loads[1]) <= max(times[9:])  # within the smallest test dealt last


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_deal_puts_every_test_in_one_shard(n):
    dealt = _shards.deal([3, 1, 4, 1, 5, 9, 2, 6], n)
    assert len(dealt) == 8 and set(dealt) <= set(range(n))
    assert len(set(dealt)) == min(n, 8)


def test_times_count_an_unrecorded_test_as_the_median(tmp_path):
    path = tmp_path / "durations.json"
    assert _shards.times(path, ["a", "b"]) == [1.0, 1.0]
    path.write_text(json.dumps({"a": 1.0, "b": 3.0, "c": 8.0}))
    assert _shards.times(path, ["c", "new", "a"]) == [8.0, 3.0, 1.0]


def test_record_merges_and_drops_the_entries_of_a_file_gone(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("")
    path = tmp_path / "durations.json"
    path.write_text(json.dumps({"tests/test_x.py::a": 1.0, "tests/test_x.py::b": 2.0,
                                "tests/test_gone.py::c": 3.0}))
    _shards.record(path, {"tests/test_x.py::b": 5.12345, "tests/test_x.py::d": 0.5}, tmp_path)
    assert json.loads(path.read_text()) == {"tests/test_x.py::a": 1.0, "tests/test_x.py::b": 5.123,
                                            "tests/test_x.py::d": 0.5}


def collect(*args):
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          __file__, *args], capture_output=True, text=True,
                         cwd=TESTS.parent)
    return out.returncode, [line for line in out.stdout.splitlines() if "::" in line]


def test_shards_of_a_module_are_its_tests_once_each():
    code, everything = collect()
    assert code == 0 and len(everything) > 5
    shards = [collect("--shard", f"{i}/3")[1] for i in range(3)]
    assert sorted(sum(shards, [])) == sorted(everything)
    assert all(shards)


@pytest.mark.parametrize("shard", ["2/2", "x/2", "1"])
def test_a_bad_shard_is_a_usage_error(shard):
    code, _ = collect("--shard", shard)
    assert code == 4  # pytest's usage error
