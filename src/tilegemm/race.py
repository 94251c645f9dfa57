"""`tilegemm race`: what a missing `syncthreads()` does, shown on the same inputs as the fixed kernel.

Inputs: A = 1, B = 2, so every element of C must be exactly 2K (any wrong element is a race,
not rounding), then random inputs. The correct tile-32 kernel and the same kernel with its two
barriers removed run side by side, several times: the broken one's wrong elements differ from
run to run, the signature of a race. On a GPU, compute-sanitizer's racecheck can be run over
the broken kernel (and the correct one, for contrast) when it is on the PATH
(`tilegemm.sanitize.racecheck`; `tilegemm sanitize` runs every tool over every GPU kernel).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from . import _cuda, registry, validate

CORRECT = "smem_tiled_32"
BROKEN = "broken_nosync"


@dataclass
class RaceRun:
    kernel: str
    inputs: str
    trial: int
    check: validate.Check


def run_kernel(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    cuda = _cuda.cuda
    kern = registry.get(name)
    a_d, b_d = cuda.to_device(a), cuda.to_device(b)
    c_d = cuda.device_array((a.shape[0], b.shape[1]), dtype=a.dtype)
    validate.poison(c_d)
    with warnings.catch_warnings():  # garbage in shared memory overflows under the simulator
        warnings.simplefilter("ignore", RuntimeWarning)
        kern.launch(a_d, b_d, c_d, None)
        cuda.synchronize()
    return c_d.copy_to_host()


def race(m: int, n: int, k: int, trials: int = 3, seed: int = 0, kernels=(CORRECT, BROKEN)) -> list[RaceRun]:
    inputs = {
        "A=1, B=2 (C = 2K exactly)": (np.ones((m, k), np.float32), np.full((k, n), 2.0, np.float32)),
        "random": validate.random_operands(m, n, k, "float32", seed=seed),
    }
    runs = []
    for label, (a, b) in inputs.items():
        ref = validate.reference(a, b)
        for name in kernels:
            for t in range(trials):
                c = run_kernel(name, a, b)
                runs.append(RaceRun(name, label, t, validate.check(c, a, b, ref=ref, kernel=name)))
    return runs


def default_size() -> int:
    return 256 if _cuda.has_gpu() else 48
