"""The cost model, held to counted accesses: under the simulator every global and shared element
access of a SIMT kernel is counted and compared with the registry's `traffic` exactly."""

import numpy as np
import pytest

from tilegemm import _cuda, registry
from tilegemm.bench import traffic
from tilegemm.registry import ceil_div

pytestmark = pytest.mark.skipif(not _cuda.SIMULATOR, reason="counting runs kernels in Numba's CUDA simulator")

SHAPES = [(20, 24, 40), (33, 17, 5)]


@pytest.mark.parametrize("shape", SHAPES)
def test_naive_reads_2mnk_and_writes_mn(shape):
    m, n, k = shape
    c = traffic.count(registry.get("naive"), m, n, k)
    assert c.result_ok
    assert c.per_array["global:A"] == {"loads": m * n * k, "stores": 0}
    assert c.per_array["global:B"] == {"loads": m * n * k, "stores": 0}
    assert c.per_array["global:C"] == {"loads": 0, "stores": m * n}
    assert (c.shared_loads, c.shared_stores) == (0, 0)
    assert c.global_bytes == c.model_bytes == (2 * m * n * k + m * n) * 4


@pytest.mark.parametrize("tile", [16, 32])
@pytest.mark.parametrize("shape", SHAPES)
def test_tiled_reads_only_in_bounds_elements(shape, tile):
    """Each block row reads all of its in-bounds rows of A once per step along K: A is read
    ceil(N/T) times, B ceil(M/T) times; zero-padded tile elements are never global reads."""
    m, n, k = shape
    c = traffic.count(registry.get(f"smem_tiled_{tile}"), m, n, k)
    assert c.result_ok
    assert c.per_array["global:A"]["loads"] == m * k * ceil_div(n, tile)
    assert c.per_array["global:B"]["loads"] == k * n * ceil_div(m, tile)
    assert c.global_stores == m * n
    assert c.global_bytes == c.model_bytes
    # Shared memory: every thread stores one element of each tile per step (padding included)
    # and reads 2·T per step, in every block.
    blocks, steps = ceil_div(m, tile) * ceil_div(n, tile), ceil_div(k, tile)
    assert c.shared_stores == 2 * tile * tile * blocks * steps
    assert c.shared_loads == 2 * tile * tile * tile * blocks * steps


@pytest.mark.parametrize("name", ["smem32_conflicted", "smem32_padded", "broken_nosync", "register_blocked"])
def test_other_simt_kernels_match_their_model(name):
    m, n, k = 33, 17, 5
    c = traffic.count(registry.get(name), m, n, k)
    assert c.global_bytes == c.model_bytes, c.to_dict()
    if name != "broken_nosync":
        assert c.result_ok


def test_counter_sees_a_wrong_model():
    """The check can fail: a kernel whose declared traffic is off is reported as not matching."""
    k02 = registry.get("smem_tiled_16")
    liar = registry.Kernel(**{**k02.__dict__, "name": "liar", "traffic": lambda m, n, k, s: 2.0 * m * n * k * s})
    c = traffic.count(liar, 20, 24, 40)
    assert not c.matches and c.global_bytes < c.model_bytes


def test_counting_array_counts_slices_and_refuses_nothing_silently():
    ctr = traffic.Counter()
    a = traffic.CountingArray(np.arange(12.0).reshape(3, 4), "global:X", ctr)
    assert a[1, 2] == 6.0 and a[0].tolist() == [0.0, 1.0, 2.0, 3.0]
    a[2, :2] = 0.0
    assert ctr.loads["global:X"] == 5 and ctr.stores["global:X"] == 2
    with pytest.raises(AttributeError):
        a.copy_to_host()


def _main(capsys, *argv):
    """`tilegemm ARGV` in this process: (exit status, stdout, stderr); argparse's exit counts too."""
    from tilegemm import cli

    try:
        rc = cli.main(list(argv))
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_traffic_dtypes_are_the_simt_kernels_dtypes():
    assert set(traffic.DTYPES) == {d for k in registry.select(backend="simt") for d in k.dtypes}


@pytest.mark.parametrize("args, says", [
    (["--dtype", "float99"], "invalid choice: 'float99'"),  # was 21 'skipped' lines and an empty table, exit 0
    (["--kernels", "cpu_blas"], "cpu_blas (cpu): traffic counts only SIMT"),  # was an empty table, exit 0
    (["--kernels", "tc_tiled"], "tc_tiled (tensorcore): traffic counts only SIMT"),
    (["--kernels", "naive,cpu_blas"], "cpu_blas (cpu): traffic counts only SIMT"),
    (["--kernels", "vectorized,warptile", "--dtype", "float64"], "nothing to count: none of vectorized, warptile"),
    (["--kernels", "naive", "--dtype", "float16"], "nothing to count: naive takes float32, float64, not float16"),
])
def test_traffic_refuses_what_it_cannot_count_in_one_line(args, says, capsys):
    rc, out, err = _main(capsys, "traffic", *args)
    assert rc == 2 and "skipped" not in out and "Element accesses" not in out, out
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and says in err, err


@pytest.mark.parametrize("shapes, told", [("20x24x40,33x17x5", True), ("128x130x4", False)])
def test_traffic_says_when_its_shapes_cannot_show_the_ladder(shapes, told, capsys):
    """The default shapes fit in one tile of the later rungs, whose counts then look alike (a student
    read that as the ladder moving no fewer bytes): the command says so, and which shape shows it."""
    rc, out, err = _main(capsys, "traffic", "--kernels", "naive", "--shapes", shapes)
    assert rc == 0, err
    assert ("--shapes 128x128x32" in " ".join(out.split())) == told, out


@pytest.mark.parametrize("name", ["skinny_m", "splitk_tiles"])
def test_split_k_atomics_count_one_read_modify_write(name):
    """K split over blocks (4×8×256: four slices): the partial sums meet in C through Numba's
    `cuda.atomic.add`, one load and one store of C's element each, as the cost model charges
    (2·M·N·splits). The simulator spells an atomic as a read, then `+=`: counted as two loads,
    it put M·N·splits loads too many and `tilegemm traffic` called the model OFF."""
    m, n, k = 4, 8, 256
    c = traffic.count(registry.get(name), m, n, k)
    assert c.result_ok
    splits = (c.global_stores - m * n) // (m * n)  # C zeroed once, then each slice's adds
    assert splits > 1, c.to_dict()  # (the shape does split K)
    assert c.per_array["global:C"] == {"loads": m * n * splits, "stores": m * n + m * n * splits}
    assert c.global_bytes == c.model_bytes, c.to_dict()


def test_traffic_refuses_products_the_simulator_takes_hours_over(capsys, monkeypatch):
    """`--shapes llm` (or 4096) started counting for hours; the lesson's 128×128×32 still runs."""
    monkeypatch.setattr(traffic, "count", lambda *a: pytest.fail("counted before the sizes were checked"))
    rc, out, err = _main(capsys, "traffic", "--kernels", "naive", "--shapes", "4096,20x24x40")
    assert rc == 2 and "4096×4096×4096: above" in err and "--force" in err and len(err.strip().splitlines()) == 1, err
    assert 128 * 128 * 32 <= traffic.MAX_MNK


def test_traffic_fails_on_a_wrong_result(capsys, monkeypatch):
    """A kernel that should be right and computed a wrong result exited 0 (only a count off the
    model failed the command); the broken kernel's wrong result is expected and passes."""
    real = traffic.count

    def wrong(kernel, m, n, k, dtype="float32"):
        c = real(kernel, m, n, k, dtype)
        c.result_ok = False
        return c

    monkeypatch.setattr(traffic, "count", wrong)
    rc, out, err = _main(capsys, "traffic", "--kernels", "naive", "--shapes", "5x6x7")
    assert rc == 1 and "results are wrong" in " ".join(out.split()), out
    rc, out, err = _main(capsys, "traffic", "--kernels", "broken_nosync", "--shapes", "5x6x7")
    assert rc == 0 and "results are wrong" not in out, out


def test_an_fp16_result_is_right_when_it_is_the_exact_sum_rounded_once(monkeypatch):
    """FP16 holds integers exactly only up to 2048: a sum of 2049, accumulated exactly in FP32 and
    stored as FP16's 2048, is right (it was called wrong, and `traffic` now fails on a wrong result)."""
    monkeypatch.setattr(traffic.validate, "integer_operands",
                        lambda m, n, k, dtype, seed=0: (np.array([[2000, 49]], dtype), np.array([[1], [1]], dtype)))
    c = traffic.count(registry.get("mixed_half"), 1, 1, 2, "float16")
    assert c.result_ok, c.to_dict()
