"""What did the compiler make of a Numba kernel? Registers, spills, shared memory, occupancy and an
instruction census of the SASS (FFMA, shared/global loads by width, local-memory traffic).

Two routes to the same record:

- on a GPU: Numba compiles for the device and reports `get_regs_per_thread`,
  `get_local_mem_per_thread`, `get_shared_mem_per_block`, and `inspect_sass` disassembles;
- offline (no GPU needed): `numba.cuda.compile_ptx(py_func, sig, cc=(9, 0))` with this machine's
  libnvvm, then `ptxas -arch=sm_90 -v` (resources) and `nvdisasm` (SASS). The PTX comes from the
  local libnvvm and ptxas, which may differ slightly from the device's: the record says which
  route and which tools produced it (`provenance`).

    resource_table([registry.get("register_blocked")])  -> [ {kernel, registers, spill_bytes, ...} ]

Occupancy uses Hopper's per-SM limits (65536 registers, 228 KiB shared memory with 1 KiB reserved
per block, 2048 threads, 32 blocks) and register allocation in 256-register units per warp.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

import numpy as np

# Hopper (sm_90) per-SM limits.
REGS_PER_SM = 65536
SMEM_PER_SM = 228 * 1024
SMEM_RESERVED_PER_BLOCK = 1024
THREADS_PER_SM = 2048
BLOCKS_PER_SM = 32
REG_ALLOC_UNIT = 256  # registers, per warp

_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)")
_PTXAS_REGS = re.compile(r"Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


# ---------------------------------------------------------------------------------------------
# SASS census


def _width(op: str) -> int:
    for w in (128, 64):
        if f".{w}" in op:
            return w
    return 32


def sass_census(sass: str) -> dict:
    """Count the instructions that matter for a GEMM in a SASS listing."""
    ops = Counter(m.group(1) for m in _INSN.finditer(sass))
    out = {"instructions": sum(ops.values()), "FFMA": 0, "DFMA": 0, "LDL": 0, "STL": 0,
           "LDS": {}, "STS": {}, "LDG": {}, "STG": {}, "RED": {}, "LD_generic": 0, "ST_generic": 0, "BAR": 0}
    for op, n in ops.items():
        head = op.split(".")[0]
        if head in ("FFMA", "DFMA", "LDL", "STL"):
            out[head] += n
        elif head in ("RED", "ATOM", "REDG", "ATOMG"):  # global atomic adds (split-K's partial sums), by width
            w = "128" if "x4" in op or ".128" in op else str(_width(op))
            out["RED"][w] = out["RED"].get(w, 0) + n
        elif head in ("LDS", "STS", "LDG", "STG"):
            w = str(_width(op))
            out[head][w] = out[head].get(w, 0) + n
        elif head == "LD":
            out["LD_generic"] += n
        elif head == "ST":
            out["ST_generic"] += n
        elif head == "BAR":
            out["BAR"] += n
    return out


# ---------------------------------------------------------------------------------------------
# occupancy


def occupancy(threads: int | None, registers: int | None, smem_bytes: int | None) -> dict:
    """Resident blocks per SM and what limits them (Hopper limits above)."""
    if not threads or registers is None or smem_bytes is None:
        return {"blocks_per_sm": None, "limited_by": "unknown (threads per block not known)"}
    warps = -(-threads // 32)
    regs_warp = -(-max(registers, 1) * 32 // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    limits = {
        "threads": THREADS_PER_SM // (warps * 32),
        "registers": (REGS_PER_SM // regs_warp) // warps,
        "shared memory": SMEM_PER_SM // (smem_bytes + SMEM_RESERVED_PER_BLOCK),
        "blocks": BLOCKS_PER_SM,
    }
    blocks = min(limits.values())
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps,
            "occupancy": blocks * warps * 32 / THREADS_PER_SM,
            "limited_by": min(limits, key=limits.get)}


def threads_per_block(kernel) -> int | None:
    """The block size a registered SIMT kernel launches with, from its module's constants (a list,
    one per compiled kernel, where the module's `threads_for` says so)."""
    import importlib

    mod = importlib.import_module(kernel.module)
    if hasattr(mod, "threads_for"):
        return mod.threads_for(kernel)
    for attr in ("NT", "NTHREADS"):
        if isinstance(getattr(mod, attr, None), int):
            return getattr(mod, attr)
    if isinstance(getattr(mod, "THREADS", None), tuple):
        return int(np.prod(mod.THREADS))
    if isinstance(getattr(mod, "BLOCK", None), int):
        return mod.BLOCK ** 2
    if isinstance(getattr(mod, "TILE", None), int):
        return mod.TILE ** 2
    m = re.search(r"_(\d+)$", kernel.name)
    return int(m.group(1)) ** 2 if m else None


# ---------------------------------------------------------------------------------------------
# the two routes


def _signature(dtype, dispatcher=None):
    """(A, B, C) as C-contiguous 2-D arrays, plus any scalar arguments the kernel declares in its
    dispatcher's `extra_args` (Numba types, e.g. (int64, int64))."""
    from numba import from_dtype, types

    arr = types.Array(from_dtype(np.dtype(dtype)), 2, "C")
    return (arr, arr, arr) + tuple(getattr(dispatcher, "extra_args", ()))


def _dispatcher_name(d) -> str:
    return getattr(getattr(d, "py_func", None), "__name__", repr(d))


def _on_gpu(kernel, dtype) -> list[dict]:
    rows = []
    for d in kernel.jit_kernels(np.dtype(dtype)):
        kern = d.compile(_signature(dtype, d))  # the compiled kernel for this device (cached after first use)
        rec = {"function": _dispatcher_name(d),
               "registers": int(kern.regs_per_thread),
               "local_bytes": int(kern.local_mem_per_thread),
               "shared_bytes": int(kern.shared_mem_per_block)}
        try:
            rec.update(sass_census(kern.inspect_sass()))
        except Exception as e:  # nvdisasm missing: resources still useful
            rec["sass_error"] = f"{type(e).__name__}: {e}"
        rows.append(rec)
    return rows


def _tool(name: str) -> str | None:
    asked = os.environ.get(f"TILEGEMM_{name.upper()}", "").strip()
    if asked:  # the caller's tool, or an error: another one would be used without a word
        if not (os.path.isfile(asked) and os.access(asked, os.X_OK)):
            from ..errors import ConfigError

            raise ConfigError(f"TILEGEMM_{name.upper()}={asked!r}: not an executable file")
        return asked
    cands = []
    try:  # the CUDA wheels' own tools first: their ptxas reads what their NVVM writes
        import nvidia

        for base in getattr(nvidia, "__path__", []):
            cands.append(os.path.join(base, "cu13", "bin", name))
    except ImportError:
        pass
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda", "/usr/local/cuda-13.0"):
        if home:
            cands.append(os.path.join(home, "bin", name))
    cands.append(shutil.which(name))
    try:  # Triton wheels ship nvdisasm/ptxas (older than CUDA 13's: ptxas last resort)
        import triton

        cands.append(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name))
    except Exception:
        pass
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


class _no_device:
    """Numba compiles a called device function for the *current device's* compute capability,
    which fails where there is no GPU; offline, answer with the target's capability instead."""

    def __init__(self, cc):
        self.cc = cc

    def __enter__(self):
        from numba.cuda import dispatcher

        self.saved = dispatcher.get_current_device
        cc = self.cc

        class _Target:
            compute_capability = cc

        dispatcher.get_current_device = lambda: _Target()

    def __exit__(self, *exc):
        from numba.cuda import dispatcher

        dispatcher.get_current_device = self.saved


def _offline_inprocess(kernel, dtype, cc=(9, 0), only: int | None = None) -> list[dict]:
    """Records of the kernel's dispatchers (of dispatcher `only` alone, where given), compiled offline."""
    from numba import cuda

    ptxas, nvdisasm = _tool("ptxas"), _tool("nvdisasm")
    if not ptxas:
        raise RuntimeError("ptxas not found (set CUDA_HOME or TILEGEMM_PTXAS)")
    arch = f"sm_{cc[0]}{cc[1]}"
    rows = []
    dispatchers = kernel.jit_kernels(np.dtype(dtype))
    for d in dispatchers if only is None else [dispatchers[only]]:
        sig = _signature(dtype, d)
        opts = {o: d.targetoptions[o] for o in ("launch_bounds", "fastmath")
                if getattr(d, "targetoptions", {}).get(o)}
        cap = getattr(d, "targetoptions", {}).get("max_registers")  # ptxas's to apply, not NVVM's
        with _no_device(cc):
            ptx, _ = cuda.compile_ptx(d.py_func, sig, cc=cc, **opts)
        with tempfile.TemporaryDirectory() as tmp:
            p = os.path.join(tmp, "k.ptx")
            cubin = os.path.join(tmp, "k.cubin")
            with open(p, "w") as f:
                f.write(ptx)
            cap_args = [f"--maxrregcount={cap}"] if cap else []
            r = subprocess.run([ptxas, f"-arch={arch}", "-v", *cap_args, p, "-o", cubin], capture_output=True,
                               text=True)
            if r.returncode:
                raise RuntimeError(f"ptxas failed (exit {r.returncode}): "
                                   f"{(r.stderr.strip() or r.stdout.strip() or 'it printed nothing')[-400:]}")
            info = r.stderr + r.stdout
            mr, ms = _PTXAS_REGS.search(info), _PTXAS_STACK.search(info)
            rec = {"function": _dispatcher_name(d),
                   "registers": int(mr.group(1)) if mr else None,
                   "shared_bytes": int(mr.group(2) or 0) if mr else None,
                   "stack_bytes": int(ms.group(1)) if ms else None,
                   "spill_store_bytes": int(ms.group(2)) if ms else None,
                   "spill_load_bytes": int(ms.group(3)) if ms else None}
            rec["local_bytes"] = rec["stack_bytes"]
            if nvdisasm:
                s = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True)
                if s.returncode == 0:
                    rec.update(sass_census(s.stdout))
                else:
                    rec["sass_error"] = s.stderr.strip()[-300:]
        rows.append(rec)
    return rows


def _versions(route: str) -> str:
    import numba

    try:
        from numba.cuda.cudadrv import nvvm

        nv = ".".join(map(str, nvvm.NVVM().get_version()))
    except Exception:
        nv = "?"
    if route == "gpu":
        from numba import cuda

        dev = cuda.get_current_device()
        return f"device {dev.name.decode() if isinstance(dev.name, bytes) else dev.name}; numba {numba.__version__}; libnvvm {nv}"
    ptxas = _tool("ptxas")
    pv = "?"
    if ptxas:
        r = subprocess.run([ptxas, "--version"], capture_output=True, text=True)
        pv = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "?"
    return f"offline sm_90: this machine's libnvvm {nv}, numba {numba.__version__}, ptxas {pv} (the device's may differ)"


def resources(kernel, dtype="float32", route: str = "auto") -> list[dict]:
    """One record per Numba dispatcher of `kernel` (registers, spills, smem, SASS census, occupancy).

    route: 'gpu' (needs a device), 'offline' (PTX -> ptxas -> nvdisasm), or 'auto' (gpu if present).
    Under the simulator the offline route runs in a subprocess with the simulator off.
    """
    from .. import _cuda

    if kernel.backend != "simt" or kernel.jit_kernels is None:
        return [{"kernel": kernel.name, "dtype": dtype, "error": "not a Numba kernel"}]
    if route == "auto":
        route = "gpu" if _cuda.has_gpu() else "offline"
    try:
        if route == "gpu":
            rows = _on_gpu(kernel, dtype)
        elif _cuda.SIMULATOR:
            rows = _offline_subprocess(kernel.name, dtype)
        else:
            rows = _offline_inprocess(kernel, dtype)
        prov = _versions(route) if not (_cuda.SIMULATOR and route == "offline") else rows[0].pop("_provenance", "")
    except Exception as e:
        return [_error(kernel, dtype, route, e)]
    return _records(kernel, dtype, route, rows, prov)


def _error(kernel, dtype: str, route: str, e: Exception) -> dict:
    return {"kernel": kernel.name, "dtype": dtype, "route": route, "error": f"{type(e).__name__}: {e}"}


def _records(kernel, dtype: str, route: str, rows: list[dict], prov: str) -> list[dict]:
    """The compiler's raw rows of a kernel's dispatchers (in jit_kernels order) as table records."""
    threads = threads_per_block(kernel)  # one number, or one per compiled kernel (in jit_kernels order)
    out = []
    for i, r in enumerate(rows):
        r.pop("_provenance", None)
        t = threads[i] if isinstance(threads, (list, tuple)) else threads
        rec = {"kernel": kernel.name, "rung": kernel.rung, "dtype": dtype, "route": route, "threads": t}
        rec.update(r)
        rec.update(occupancy(t, rec.get("registers"), rec.get("shared_bytes")))
        rec["provenance"] = prov
        out.append(rec)
    return out


def _offline_env() -> dict:
    """The environment of a process that compiles offline: the simulator off, this package first."""
    env = dict(os.environ, TILEGEMM_SIMULATOR="0", NUMBA_ENABLE_CUDASIM="0")
    env.setdefault("CUDA_HOME", "/usr/local/cuda-13.0" if os.path.isdir("/usr/local/cuda-13.0") else "/usr/local/cuda")
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _offline_subprocess(name: str, dtype: str, only: int | None = None) -> list[dict]:
    """_offline_inprocess in a process of its own, with the simulator off (the caller runs it)."""
    which = [] if only is None else [str(only)]
    r = subprocess.run([sys.executable, "-m", "tilegemm.bench.sass", name, dtype, *which], capture_output=True,
                       text=True, env=_offline_env())
    if r.returncode:
        raise RuntimeError(r.stderr.strip()[-600:])
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    return rows


_REPLY = "@tilegemm.sass "  # a worker's reply line; anything else on its stdout is the compiler's


class _Worker:
    """A process with the simulator off that compiles one dispatcher per request (`--serve`): the
    table's jobs share its start (numba's import, 3–4 s) instead of each paying it."""

    def __init__(self):
        self.log = tempfile.TemporaryFile(mode="w+")  # its stderr, read back if it dies
        self.proc = subprocess.Popen([sys.executable, "-m", "tilegemm.bench.sass", "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=_offline_env())

    def compile(self, name: str, dtype: str, only: int) -> list[dict]:
        try:
            self.proc.stdin.write(f"{name} {dtype} {only}\n")
            self.proc.stdin.flush()
            for line in self.proc.stdout:
                if line.startswith(_REPLY):
                    reply = json.loads(line[len(_REPLY):])
                    if "error" in reply:
                        raise RuntimeError(reply["error"])
                    return reply["rows"]
        except BrokenPipeError:
            pass
        self.proc.wait()
        self.log.seek(0)
        raise RuntimeError(f"the compiling process ended (exit {self.proc.returncode}): "
                           + self.log.read().strip()[-600:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def _serve() -> None:
    """A worker's loop: `name dtype index` a line in, a reply line out, until stdin ends."""
    from .. import registry

    prov = _versions("offline")
    for line in sys.stdin:
        name, dtype, only = line.split()
        try:
            rows = _offline_inprocess(registry.get(name), dtype, only=int(only))
            if rows:
                rows[0]["_provenance"] = prov
            reply = {"rows": rows}
        except Exception as e:  # noqa: BLE001  (the job's error record; the worker goes on)
            reply = {"error": f"{type(e).__name__}: {e}"[-600:]}
        print(_REPLY + json.dumps(reply), flush=True)


def resource_table(kernels, dtype="float32", route: str = "auto", progress=None) -> list[dict]:
    """Records for several kernels (registry Kernel objects or names); non-SIMT ones are skipped.
    progress: called with one line before the offline route's compiles (they take minutes)."""
    from .. import _cuda, registry

    ks = [registry.get(k) if isinstance(k, str) else k for k in kernels]
    ks = [k for k in ks if k.backend == "simt" and k.supports(dtype)]
    if route == "auto":
        route = "gpu" if _cuda.has_gpu() else "offline"
    if route == "offline":  # (a TILEGEMM_PTXAS or _NVDISASM that names no tool: said once, not in every rung's row)
        _tool("ptxas"), _tool("nvdisasm")
        if progress is not None:
            progress(f"the SIMT rungs ({len(ks)}) are compiled for sm_90 offline (NVVM, ptxas; no GPU asked) and their "
                     "SASS read with nvdisasm; the table follows when every one is done")
    if route == "offline" and _cuda.SIMULATOR:
        return _table_in_processes(ks, dtype)
    out = []
    for k in ks:
        out += resources(k, dtype, route)
    return out


def _cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        return os.cpu_count() or 1


def _table_in_processes(kernels, dtype: str) -> list[dict]:
    """The offline route from a process that runs the simulator: each dispatcher compiled in a
    worker process (`_Worker`), as many workers as this process has CPUs, each taking the next
    dispatcher when it is done, the last rungs' first (their unrolled kernels take NVVM up to a
    minute each: k16's, k17's), so the longest do not start last. A kernel whose dispatchers cannot
    be listed, or whose compile fails, gets its error record, as in `resources`; an interrupt
    cancels the compiles not yet started."""
    import concurrent.futures
    import threading

    counts, failed = {}, {}
    for k in kernels:
        if k.jit_kernels is None or k.name in counts or k.name in failed:
            continue
        try:
            counts[k.name] = len(k.jit_kernels(np.dtype(dtype)))
        except Exception as e:
            failed[k.name] = e
    jobs = [(name, i) for name, n in counts.items() for i in range(n)]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(_cpus(), len(jobs))))
    mine, workers = threading.local(), []  # a worker per pool thread

    def job(name: str, i: int) -> list[dict]:
        w = getattr(mine, "worker", None)
        if w is None or w.proc.poll() is not None:  # (a worker that died is replaced)
            w = mine.worker = _Worker()
            workers.append(w)
        return w.compile(name, dtype, i)

    try:
        done = {(name, i): pool.submit(job, name, i) for name, i in reversed(jobs)}
        out = []
        for k in kernels:
            if k.name in failed:
                out.append(_error(k, dtype, "offline", failed[k.name]))
            elif k.name not in counts:
                out += resources(k, dtype, "offline")  # (not a Numba kernel: its error record)
            elif not counts[k.name]:
                out.append(_error(k, dtype, "offline", RuntimeError("no Numba dispatchers to compile")))
            else:
                try:  # (copies: a kernel named twice reads the same futures)
                    rows = [dict(r) for i in range(counts[k.name]) for r in done[(k.name, i)].result()]
                except Exception as e:
                    out.append(_error(k, dtype, "offline", e))
                    continue
                out += _records(k, dtype, "offline", rows, rows[0].get("_provenance", ""))
        return out
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for w in workers:
            w.close()


def format_table(rows: list[dict]) -> str:
    """A compact text table of resource records."""
    def w(d):
        return " ".join(f"{k}:{v}" for k, v in sorted(d.items(), key=lambda x: int(x[0]))) if d else "-"

    head = f"{'kernel':24} {'fn':24} {'regs':>4} {'spill':>5} {'smem':>6} {'FFMA':>5} {'LDS':>16} {'LDG':>14} {'STS':>10} {'LDL/STL':>7} {'blk/SM':>6}"
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['kernel']:24} ERROR {r['error'][:90]}")
            continue
        spill = (r.get("spill_store_bytes") or 0) + (r.get("spill_load_bytes") or 0) if "spill_store_bytes" in r else r.get("local_bytes")
        lines.append(f"{r['kernel']:24} {str(r.get('function'))[:24]:24} {r.get('registers')!s:>4} {spill!s:>5} "
                     f"{r.get('shared_bytes')!s:>6} {r.get('FFMA', 0) + r.get('DFMA', 0):>5} {w(r.get('LDS')):>16} "
                     f"{w(r.get('LDG')):>14} {w(r.get('STS')):>10} {str(r.get('LDL', 0)) + '/' + str(r.get('STL', 0)):>7} "
                     f"{'-' if r.get('blocks_per_sm') is None else r['blocks_per_sm']!s:>6}")  # none: no occupancy query
    return "\n".join(lines)


if __name__ == "__main__":  # used by the offline route when the parent process runs the simulator
    from .. import _cuda, registry

    if _cuda.SIMULATOR:
        raise SystemExit("the offline route needs the simulator off (TILEGEMM_SIMULATOR=0)")
    if sys.argv[1] == "--serve":
        _serve()
        raise SystemExit(0)
    k = registry.get(sys.argv[1])
    rows = _offline_inprocess(k, sys.argv[2] if len(sys.argv) > 2 else "float32",
                              only=int(sys.argv[3]) if len(sys.argv) > 3 else None)
    if rows:
        rows[0]["_provenance"] = _versions("offline")
    print(json.dumps(rows))
