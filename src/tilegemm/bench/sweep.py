"""The lab's sweep: every chosen kernel at every size, validated, then timed; cuBLAS beside it.

For each shape: fresh random inputs; a float64 reference; for each kernel a checked run into a
NaN-poisoned output (a wrong kernel shows WRONG, never a time); then kernel-only timing with
device events after warm-up, with L2 flushed before each sample (`bench.timing`). JIT compile
time is measured once per kernel on a 1×1×1 launch, apart from kernel time. For the kernel
`matmul()` would pick, the end-to-end time of a NumPy call (host→device copies, kernel,
device→host copy) is measured too. The CPU naive loop is skipped, and says so, where its
predicted time exceeds the budget.
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import _cuda, api, registry, validate
from ..registry import Kernel, bytes_compulsory
from .timing import DeviceClock, HostClock, L2Flush, Timing, measure

COURSE = ("cpu_naive", "cpu_blas", "naive", "smem_tiled_16", "smem_tiled_32", "smem32_conflicted", "smem32_padded",
          "register_blocked", "broken_nosync")  # the lab's table (the README's), the checker's catch included
GPU_SIZES = (128, 256, 512, 1024, 2048, 4096)
SIM_SIZES = (16, 32, 64)


@dataclass
class Settings:
    dtype: str = "float32"
    warmup_s: float = 0.1
    budget_s: float = 1.0  # per kernel and shape, after warm-up
    target_rse: float = 0.01
    max_reps: int = 200
    flush: bool = True
    cpu_naive_budget_s: float = 10.0  # skip the CPU triple loop when predicted slower than this
    cublas: bool = True
    e2e: bool = True
    seed: int = 0
    simulated: bool = field(default_factory=lambda: _cuda.SIMULATOR)

    def harness(self) -> dict:
        return dict(warmup_s=self.warmup_s, budget_s=self.budget_s, target_rse=self.target_rse,
                    max_reps=self.max_reps, l2_flush=self.flush and _cuda.has_gpu(),  # (Sweep flushes on a GPU only)
                    cpu_naive_budget_s=self.cpu_naive_budget_s, seed=self.seed, dtype=self.dtype,
                    simulated=self.simulated)


def choose_kernels(spec: str | None) -> list[Kernel]:
    """'course' (default), 'all', 'simt', 'cpu', 'tensorcore', or a comma-separated list of names."""
    spec = spec or "course"
    out: list[Kernel] = []
    for name in (n.strip() for n in spec.split(",")):  # (groups and names together: "cpu,naive" said "no kernel
        if not name:  # named 'cpu'", a documented value)
            continue
        if name == "course":
            group = [registry.get(n) for n in COURSE]
        elif name == "all":
            group = registry.all_kernels()
        elif name in registry.BACKEND_ARRAYS:
            group = registry.select(backend=name)
        else:
            group = [registry.get(name)]
        out += group  # (in the order named; a kernel named twice is timed twice, as a repeat)
    return out


def why_not_run(kern: Kernel, dtype: str) -> str | None:
    """Why the bench gives `kern` no row at `dtype` here (None: it runs)."""
    if not kern.supports(dtype):
        timed = [d for d in ("float32", "float64") if kern.supports(d)]
        return (f"it takes {', '.join(kern.dtypes)}, and the bench times {dtype}" + (f" (--dtype {timed[0]})" if timed
                else f" (its --dtype is float32 or float64; tilegemm.matmul(..., kernel={kern.name!r}) runs it)"))
    if kern.backend not in ("simt", "cpu"):
        return "tensor-core kernels have their own benchmark: tilegemm library (GPU)"
    ok, why = kern.runnable()
    return None if ok else why


def cublas_available() -> bool:
    if not _cuda.has_gpu() or importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def _record(kern_name, label, backend, shape, dtype, **kw) -> dict:
    m, n, k = shape
    s = np.dtype(dtype).itemsize
    rec = dict(kernel=kern_name, label=label, backend=backend, m=m, n=n, k=k, dtype=dtype, ok=None,
               rel_err=None, check="", time=None, median_ms=None, tflops=None, gbps=None,
               flops=2.0 * m * n * k, traffic_bytes=None, compulsory_bytes=bytes_compulsory(m, n, k, s),
               intensity=None, compile_ms=None, e2e_ms=None, simulated=_cuda.SIMULATOR and backend == "simt",
               note="")
    rec.update(kw)
    return rec


def _fill_speed(rec: dict, t: Timing) -> None:
    rec["time"] = t.to_dict()
    rec["median_ms"] = t.median_ms
    rec["tflops"] = rec["flops"] / (t.median_ms * 1e-3) / 1e12
    if rec["traffic_bytes"]:
        rec["gbps"] = rec["traffic_bytes"] / (t.median_ms * 1e-3) / 1e9


class Sweep:
    def __init__(self, kernels: list[Kernel], shapes: list[tuple[int, int, int]], settings: Settings,
                 progress=None):
        self.kernels = kernels
        self.shapes = shapes
        self.s = settings
        self.progress = progress or (lambda msg: None)
        self.records: list[dict] = []
        self._compile_ms: dict[str, float] = {}
        self._naive_rate: float | None = None  # measured CPU-naive seconds per multiply-add
        self._flush = L2Flush() if (settings.flush and _cuda.has_gpu()) else None
        self.gpu = _cuda.has_gpu()

    # ---- per-backend runners ------------------------------------------------------------

    def _gpu_clock(self):
        return DeviceClock("numba") if self.gpu else HostClock(_cuda.cuda.synchronize)

    def _time(self, run, clock, flush) -> Timing:
        s = self.s
        if s.simulated and not self.gpu:  # one run: the simulator is seconds per launch
            return measure(run, clock=clock, flush=None, warmup_runs=0, warmup_s=0, max_reps=1, min_reps=1)
        return measure(run, clock=clock, flush=flush, warmup_s=s.warmup_s, budget_s=s.budget_s,
                       target_rse=s.target_rse, max_reps=s.max_reps)

    def compile_ms(self, kern: Kernel) -> float | None:
        """JIT time: the first launch of a 1×1×1 product (same types, so the same specialisation)."""
        if kern.backend != "simt":
            return None
        if kern.name not in self._compile_ms:
            cuda = _cuda.cuda
            one = cuda.to_device(np.ones((1, 1), dtype=self.s.dtype))
            c = cuda.device_array((1, 1), dtype=self.s.dtype)
            cuda.synchronize()
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                kern.launch(one, one, c, None)
                cuda.synchronize()
            self._compile_ms[kern.name] = (time.perf_counter() - t0) * 1e3
        return self._compile_ms[kern.name]

    def run_simt(self, kern: Kernel, shape, a, b, ref) -> dict:
        cuda = _cuda.cuda
        m, n, k = shape
        s = np.dtype(self.s.dtype).itemsize
        rec = _record(kern.name, kern.label, kern.backend, shape, self.s.dtype,
                      traffic_bytes=kern.traffic(m, n, k, s), intensity=kern.intensity(m, n, k, s))
        rec["compile_ms"] = self.compile_ms(kern)
        a_d, b_d = cuda.to_device(a), cuda.to_device(b)
        c_d = cuda.device_array((m, n), dtype=self.s.dtype)
        validate.poison(c_d)
        with warnings.catch_warnings():  # the broken kernel overflows in the simulator
            warnings.simplefilter("ignore", RuntimeWarning)
            kern.launch(a_d, b_d, c_d, None)
            cuda.synchronize()
        chk = validate.check(c_d.copy_to_host(), a, b, ref=ref, kernel=kern.name)
        rec.update(ok=chk.ok, rel_err=chk.rel_err, check=str(chk))
        if not chk.ok:
            return rec
        _fill_speed(rec, self._time(lambda: kern.launch(a_d, b_d, c_d, None), self._gpu_clock(), self._flush))
        return rec

    def run_cpu(self, kern: Kernel, shape, a, b, ref) -> dict:
        m, n, k = shape
        s = np.dtype(self.s.dtype).itemsize
        rec = _record(kern.name, kern.label, kern.backend, shape, self.s.dtype,
                      traffic_bytes=kern.traffic(m, n, k, s), intensity=kern.intensity(m, n, k, s))
        c = np.empty((m, n), dtype=self.s.dtype)
        if kern.name == "cpu_naive":
            if self._naive_rate is None:  # calibrate (and compile) on a small product
                ca, cb = validate.random_operands(64, 64, 64, self.s.dtype)
                cc = np.empty((64, 64), self.s.dtype)
                kern.launch(ca, cb, cc)
                t0 = time.perf_counter()
                kern.launch(ca, cb, cc)
                self._naive_rate = (time.perf_counter() - t0) / 64**3
            predicted = self._naive_rate * m * n * k
            if predicted > self.s.cpu_naive_budget_s:
                rec["note"] = f"skipped: predicted {predicted:.3g} s > budget {self.s.cpu_naive_budget_s:.3g} s"
                return rec
        c.fill(np.nan)
        kern.launch(a, b, c)
        chk = validate.check(c, a, b, ref=ref, kernel=kern.name)
        rec.update(ok=chk.ok, rel_err=chk.rel_err, check=str(chk))
        if not chk.ok:
            return rec
        slow = kern.name == "cpu_naive"
        t = measure(lambda: kern.launch(a, b, c), clock=HostClock(), warmup_s=0 if slow else self.s.warmup_s,
                    warmup_runs=0 if slow else 1, budget_s=self.s.budget_s, target_rse=self.s.target_rse,
                    min_reps=1 if slow else 5, max_reps=3 if slow else self.s.max_reps)
        _fill_speed(rec, t)
        if slow:  # re-calibrate from the real size: caches make the rate size-dependent
            self._naive_rate = t.median_ms * 1e-3 / (m * n * k)
        return rec

    def run_cublas(self, shape, a, b, ref) -> dict:
        import torch

        m, n, k = shape
        rec = _record("cublas", "cuBLAS (torch)", "torch", shape, self.s.dtype,
                      traffic_bytes=bytes_compulsory(m, n, k, np.dtype(self.s.dtype).itemsize))
        rec["intensity"] = rec["flops"] / rec["traffic_bytes"]
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False  # true FP32 SGEMM, the fair yardstick
        try:
            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            tc = torch.empty((m, n), dtype=ta.dtype, device="cuda")
            validate.poison(tc)
            torch.mm(ta, tb, out=tc)
            chk = validate.check(tc.cpu().numpy(), a, b, ref=ref, kernel="cublas")
            rec.update(ok=chk.ok, rel_err=chk.rel_err, check=str(chk), note="TF32 off")
            if chk.ok:
                _fill_speed(rec, self._time(lambda: torch.mm(ta, tb, out=tc), DeviceClock("torch"), self._flush))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = prev
        return rec

    def e2e_kernel(self) -> Kernel | None:
        """The kernel `auto` would pick if only the chosen kernels existed (GPU ones only)."""
        pool = [k for k in self.kernels if k.backend != "cpu" and k.auto_rank > 0 and not k.teaching
                and k.supports(self.s.dtype) and k.runnable()[0]]
        return max(pool, key=lambda k: k.auto_rank) if pool else None

    def run_e2e(self, shape, a, b) -> dict | None:
        """matmul() on NumPy inputs, host clock: copies in, kernel, copy out."""
        kern = self.e2e_kernel()
        if kern is None:
            return None
        t = measure(lambda: api.matmul(a, b, kernel=kern.name), clock=HostClock(_cuda.cuda.synchronize),
                    warmup_s=0 if self.s.simulated else self.s.warmup_s, warmup_runs=0 if self.s.simulated else 1,
                    budget_s=self.s.budget_s, min_reps=1 if self.s.simulated else 5,
                    max_reps=1 if self.s.simulated else 50)
        return dict(kernel=kern.name, time=t.to_dict(), median_ms=t.median_ms)

    # ---- the sweep -----------------------------------------------------------------------

    def run(self) -> list[dict]:
        do_cublas = self.s.cublas and cublas_available()
        for shape in self.shapes:  # (all of them before any work: one too large is said at once)
            _check_host_memory(shape, self.s.dtype)
        for shape in self.shapes:
            m, n, k = shape
            a, b = validate.random_operands(m, n, k, self.s.dtype, seed=self.s.seed)
            ref = _reference(a, b)
            seen: dict[str, int] = {}
            for kern in self.kernels:
                seen[kern.name] = seen.get(kern.name, 0) + 1
                first = len(self.records)
                self.progress(f"{kern.name} {m}×{n}×{k}")
                if not kern.supports(self.s.dtype):
                    continue
                ok, why = kern.runnable()
                if not ok:
                    self.records.append(_record(kern.name, kern.label, kern.backend, shape, self.s.dtype,
                                                note=f"not run: {why}"))
                    continue
                runner = {"simt": self.run_simt, "cpu": self.run_cpu}.get(kern.backend)
                if runner is None:
                    self.records.append(_record(kern.name, kern.label, kern.backend, shape, self.s.dtype,
                                                note="not run: tensor-core kernels have their own benchmark"))
                    continue
                try:
                    self.records.append(runner(kern, shape, a, b, ref))
                except Exception as e:  # noqa: BLE001  (one kernel's failure must not end the lab)
                    self.records.append(_record(kern.name, kern.label, kern.backend, shape, self.s.dtype,
                                                ok=False, note=f"error: {type(e).__name__}: {e}"))
                for r in self.records[first:]:  # a kernel named twice is timed twice: repeatability
                    r["repeat"] = seen[kern.name]
                    if seen[kern.name] > 1:
                        r["column"] = f"{kern.name}#{seen[kern.name]}"
                        r["label"] = f"{kern.label} (timing #{seen[kern.name]})"
            if do_cublas:
                self.progress(f"cuBLAS {m}×{n}×{k}")
                self.records.append(self.run_cublas(shape, a, b, ref))
            if self.s.e2e:
                self.progress(f"matmul() end-to-end {m}×{n}×{k}")
                e2e = self.run_e2e(shape, a, b)
                if e2e:
                    for r in self.records:
                        if r["kernel"] == e2e["kernel"] and (r["m"], r["n"], r["k"]) == shape \
                                and r.get("repeat", 1) == 1:
                            r["e2e_ms"] = e2e["median_ms"]
                            r["e2e_time"] = e2e["time"]
        _add_relative(self.records)
        return self.records


def _check_host_memory(shape, dtype: str) -> None:
    """A shape whose operands (drawn in float64, then cast), float64 reference and result do not fit
    in the host's available memory: OutOfHostMemory, naming it. Where the kernel allows
    overcommit, NumPy's allocation of them succeeds, and filling it takes the machine's memory from
    every process until the kernel kills one."""
    from ..arrays import dims, refuse_past_host_memory

    m, n, k = shape
    need = (m * k + k * n + m * n) * (8 + np.dtype(dtype).itemsize)
    refuse_past_host_memory(need, f"{dims(shape)} in {dtype} needs about",
                            " (its operands, float64 reference and result)", "; ask for a smaller size")


def _reference(a, b) -> np.ndarray:
    """float64 A@B: on the GPU through torch when there is one (large sizes), else NumPy."""
    if cublas_available() and a.shape[0] * a.shape[1] * b.shape[1] > 512**3:
        import torch

        return (torch.from_numpy(a).cuda().double() @ torch.from_numpy(b).cuda().double()).cpu().numpy()
    return validate.reference(a, b)


def _add_relative(records: list[dict]) -> None:
    """% of cuBLAS and speed-up over the CPU naive loop, per shape (where both were measured)."""
    by_shape: dict = {}
    for r in records:
        by_shape.setdefault((r["m"], r["n"], r["k"], r["dtype"]), []).append(r)
    for rs in by_shape.values():
        cub = next((r for r in rs if r["kernel"] == "cublas" and r["median_ms"]), None)
        cpu = next((r for r in rs if r["kernel"] == "cpu_naive" and r["median_ms"]), None)
        for r in rs:
            if r["median_ms"]:
                r["pct_cublas"] = 100 * cub["median_ms"] / r["median_ms"] if cub else None
                r["speedup_cpu_naive"] = cpu["median_ms"] / r["median_ms"] if cpu else None
