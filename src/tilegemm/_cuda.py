"""Decide, once and before Numba's CUDA module is imported, whether a real GPU is there.

Numba chooses between the real CUDA driver and its simulator when `numba.cuda` is first
imported, from the environment variable NUMBA_ENABLE_CUDASIM. We probe the driver with
ctypes (cuInit + cuDeviceGetCount), which needs no CUDA Python package, and switch the
simulator on when no device answers, so the lab and the library run on a laptop.

`TILEGEMM_SIMULATOR=1` forces the simulator on a GPU machine; `=0` forbids it. Where
NUMBA_ENABLE_CUDASIM, or a numba.cuda imported before tilegemm, says otherwise, that is a
ConfigError, not a silent choice of one.

Both are made on first use (`_cuda.SIMULATOR`, `_cuda.cuda`: module attributes computed by
`__getattr__`), so that `import tilegemm` neither probes the driver nor imports Numba; or, where
the caller imports numba.cuda after `import tilegemm` and before its first use, just before that
import where no driver call is needed (`_DecideFirst`: the environment says, or no CUDA driver is
installed), so that `import tilegemm; from numba import cuda` gets the simulator on a laptop too.

Under the simulator, `_cuda.cuda` also makes the simulator's shared arrays safe to allocate
from many threads (`_one_shared_array_per_block`): the simulator runs a Python thread per CUDA
thread, and every thread of a block asks for the block's shared array by the line that
declares it; numba-cuda looks the line up and stores a new array in two steps, so a thread
switch between them gives two threads two different "shared" arrays. A kernel then reads
tiles its neighbours never wrote, rarely and at random (CI saw k07 give a wrong row at
20×12×3 once in hundreds of launches).
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import os
import sys
import threading

from . import env
from .errors import ConfigError

_SIM_VAR = "NUMBA_ENABLE_CUDASIM"
SIM_MAX_SIDE = 64  # the largest side the lab runs in the simulator (an OS thread per CUDA thread: beyond, hours)
SIMULATED_MNK = SIM_MAX_SIDE ** 3  # the largest product the lab runs there
SIM_LAUNCHES = threading.RLock()  # held around a simulated product: numba-cuda's simulator runs one launch at a
# time in a process (one global kernel context); a launch from a second host thread meanwhile is taken for a device
# function's call inside the first, and fails (AttributeError: 'Thread' object has no attribute 'threadIdx')
OFF_WHY = ""  # why the simulator is off where no TILEGEMM_SIMULATOR=0 asked it to be (`_decide`), for the errors
SIMULATED_SAID = contextvars.ContextVar("tilegemm_simulated_said", default=False)  # an N-D product has warned
# for the whole of it: its 2-D products do not warn again, each for its part


def warn_simulated(what: str, kernel: str, mnk: int, stacklevel: int) -> None:
    """matmul's warning that a product (what, as said; mnk multiply-adds) on a GPU kernel is about
    to run in the simulator, for many times as long as the lab's largest; stacklevel: warnings.warn's,
    this function's frame being 1."""
    import warnings

    warnings.warn(f"matmul: {what} on {kernel} runs in Numba's CUDA simulator (no GPU here), one OS thread per "
                  f"CUDA thread: {mnk / SIMULATED_MNK:.3g}× the work of the lab's largest simulated product "
                  f"({SIM_MAX_SIDE}³, seconds), so about as many times as long; kernel='auto' runs the CPU's BLAS",
                  stacklevel=stacklevel)


@functools.cache
def driver_entry(name: str, *argtypes):
    """The CUDA driver's entry point `name` (returning a CUresult), bound once a process through
    ctypes (OSError where there is no driver, AttributeError where it lacks the entry point)."""
    fn = getattr(ctypes.CDLL("libcuda.so.1"), name)
    fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
    return fn


def _driver_library():
    """The CUDA driver's library, loaded (no call into it: nothing initialised), or None where there is none."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _driver_device_count() -> int:
    lib = _driver_library()
    if lib is None:
        return 0
    try:
        if lib.cuInit(0) != 0:
            return 0
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except AttributeError:
        return 0


def _simulate() -> bool:
    """Switch the simulator on for numba.cuda's import to come. Numba reads its environment when
    numba itself is imported (the CPU kernels import it, and so may the caller): if it has been,
    its configuration is told too, else numba.cuda would look for a driver that is not there. Only
    this setting: reading the whole environment again would undo what the caller set in code
    (numba.config.DISABLE_JIT), so numba's own reloader is told the variable is already read."""
    os.environ[_SIM_VAR] = "1"
    if "numba" in sys.modules:
        from numba.core import config

        config.ENABLE_CUDASIM = 1
        seen = getattr(getattr(config, "_env_reloader", None), "old_environ", None)
        if isinstance(seen, dict):
            seen[_SIM_VAR] = "1"
    return True


def _forced_set() -> bool:
    """Is TILEGEMM_SIMULATOR set (to anything but blanks)?"""
    return os.environ.get("TILEGEMM_SIMULATOR", "").strip() != ""


def _asked() -> bool:
    """Does NUMBA_ENABLE_CUDASIM ask for the simulator?"""
    return os.environ.get(_SIM_VAR, "0").strip() not in ("", "0")


def _decide() -> bool:
    """Return True when the simulator is (or will be) in use. TILEGEMM_SIMULATOR, where set, is
    honoured or refused: a ConfigError where NUMBA_ENABLE_CUDASIM, or a numba.cuda imported before
    us, says the other thing (a run told never to simulate must not time the simulator)."""
    forced = env.flag("TILEGEMM_SIMULATOR") if _forced_set() else None
    said = f"TILEGEMM_SIMULATOR={os.environ.get('TILEGEMM_SIMULATOR')!r}"
    asked = _asked()
    if _FIRST_ERROR and forced is False and asked:
        raise ConfigError(_FIRST_ERROR)  # (the conflict that numba.cuda's import met, while it stands)
    if "numba.cuda" in sys.modules:  # someone imported it first: its choice is made
        from numba import config

        simulated = bool(config.ENABLE_CUDASIM)
        if forced is not None and forced != simulated:
            raise ConfigError(f"{said}: numba.cuda was imported {'with' if simulated else 'without'} its simulator "
                              "before tilegemm, and that cannot change now (set NUMBA_ENABLE_CUDASIM to agree, or "
                              "import tilegemm first)")
        if not simulated and forced is None:
            global OFF_WHY
            OFF_WHY = ("numba.cuda was imported without its simulator before tilegemm chose (at its first use; at "
                       "that import where no CUDA driver is installed), which cannot change now (import tilegemm "
                       f"first, or set {_SIM_VAR}=1 before importing numba)")
        return simulated
    if forced is False and asked:
        raise ConfigError(f"{said} forbids Numba's CUDA simulator, which {_SIM_VAR}={os.environ[_SIM_VAR]!r} asks "
                          "for: unset one of them")
    if forced or asked:
        return _simulate()  # (NUMBA_ENABLE_CUDASIM: set before numba's import, or after it: read again either way)
    if forced is None and _driver_device_count() == 0:
        return _simulate()
    return False


class _DecideFirst:
    """A finder first on sys.meta_path from `import tilegemm`: asked for numba.cuda before tilegemm
    has decided (a caller's own `from numba import cuda`), it decides then, while Numba's choice can
    still follow, where that takes no call into a driver: the environment says (TILEGEMM_SIMULATOR,
    NUMBA_ENABLE_CUDASIM), or no CUDA driver library is installed (so no GPU; the caller's
    numba.cuda is the simulator too). Elsewhere it leaves the decision to tilegemm's first use: a
    cuInit at numba.cuda's import would initialise CUDA in a process that may fork workers before
    any GPU work. Either way it leaves the import to the finders after it, and stays in place (a
    removal could make another thread's import, walking the list meanwhile, skip a finder) doing
    nothing once the decision is made. A ConfigError is kept for tilegemm's first use."""

    def find_spec(self, name, path=None, target=None):
        if name != "numba.cuda" or "SIMULATOR" in globals():
            return None
        if _forced_set() or _asked() or _driver_library() is None:
            try:
                getattr(sys.modules[__name__], "SIMULATOR")
            except ConfigError as e:
                global _FIRST_ERROR
                _FIRST_ERROR = str(e)
        return None


_FIRST_ERROR = ""  # the ConfigError of a decision made for a caller's import of numba.cuda (`_DecideFirst`)
if "numba.cuda" not in sys.modules:
    sys.meta_path.insert(0, _DecideFirst())


def __getattr__(name: str):
    """SIMULATOR (the decision) and cuda (numba.cuda, imported after it), made on first access."""
    if name == "SIMULATOR":
        value = _decide()
    elif name == "cuda":
        simulated = globals().setdefault("SIMULATOR", _decide())
        from numba import cuda as value  # must follow the decision above

        if simulated:
            _one_shared_array_per_block()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _one_shared_array_per_block() -> None:
    """Make the simulator's `cuda.shared.array` hand every thread of a block the same array.

    numba-cuda (0.30) keys a launch's shared arrays by the declaring line (the blocks of a
    launch run one after another and share them), then does a `get`, and on a miss `np.empty`
    and a store: two threads that both miss store two arrays, and the first keeps its own.
    `shared_array_method` settles the miss with one `dict.setdefault` instead. Left alone where
    the class no longer looks as described.
    """
    from numba.cuda.simulator import kernelapi

    shared = getattr(kernelapi, "FakeCUDAShared", None)
    original = getattr(shared, "array", None)
    known = all(hasattr(kernelapi, name) for name in ("types", "numpy_support"))
    if original is None or not known or getattr(original, "_tilegemm_atomic", False):
        return
    method = shared_array_method(original)
    method.__doc__ = original.__doc__
    shared.array = method


def shared_array_method(fallback, make=None):
    """A `FakeCUDAShared.array` for the simulator whose static arrays are race-free.

    A static array is found by the caller's file and line (numba-cuda's key); on a miss it is
    `make(np.empty(shape, dtype), caller_frame)` (the array itself by default), stored with one
    `dict.setdefault`, atomic under the GIL, so whichever lands first is every thread's.
    Dynamic shared memory (shape 0) and an alignment request (refused by the simulator) go
    to `fallback(self, shape, dtype, alignment)`, as does a class without `_allocations`.
    `tilegemm.bench.traffic` builds its counting arrays on the same method.
    """
    import numpy as np
    from numba.cuda.simulator import kernelapi

    def array(self, shape, dtype, alignment=None):
        allocations = getattr(self, "_allocations", None)
        if shape == 0 or alignment is not None or not isinstance(allocations, dict):
            return fallback(self, shape, dtype, alignment)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        found = allocations.get(key)
        if found is None:
            if isinstance(dtype, kernelapi.types.Type):  # the simulator's own conversion
                dtype = kernelapi.numpy_support.as_dtype(dtype)
            new = np.empty(shape, dtype)
            found = allocations.setdefault(key, new if make is None else make(new, caller))
        return found

    array._tilegemm_atomic = True
    return array


def has_gpu() -> bool:
    """A real CUDA device is usable."""
    mod = sys.modules[__name__]
    return not mod.SIMULATOR and mod.cuda.is_available()


def gpu_backend_label() -> str:
    return "Numba CUDA simulator" if sys.modules[__name__].SIMULATOR else "CUDA GPU"
