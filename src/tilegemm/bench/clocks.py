"""SM and memory clocks, read (never set) before and after a run, with a warning when they moved.

A GPU that heats up or hits its power cap lowers its clocks mid-run, and every later sample is
slower for reasons that have nothing to do with the kernel. We read the clocks and the active
"throttle" (clock-event) reasons before and after a sweep and say so when the SM or memory clock
moved by more than 5% or a throttle reason other than idle/application settings was active.

Sources, in order: NVML through `pynvml` (the nvidia-ml-py package, optional), then
`nvidia-smi --query-gpu=...`, else "unavailable". This module only queries; it never changes a
clock, a power limit or any other setting of the card.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import subprocess

MOVED = 0.05  # relative change of a clock between before and after that earns a warning

# NVML clock-event ("throttle") reason bits (nvml.h: nvmlClocksEventReason*/nvmlClocksThrottleReason*).
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
BENIGN = {"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"}


def decode_reasons(mask: int) -> list[str]:
    names = [name for bit, name in REASONS.items() if mask & bit]
    unknown = mask & ~sum(REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def _nvml_index() -> int:
    """NVML numbers GPUs in PCI order, ignoring CUDA_VISIBLE_DEVICES; follow its first entry."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _read_nvml(index: int) -> dict | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  (no driver, no device: fall through to the next source)
        return None
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        sm = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)
        mem = pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)
        get = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = int(get(h))
        return dict(source="nvml", sm_mhz=float(sm), mem_mhz=float(mem), reasons_mask=mask,
                    reasons=decode_reasons(mask), time=_now())
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def parse_smi_line(line: str) -> tuple[float, float, int]:
    """'1980, 3201, 0x0000000000000000' -> (sm MHz, memory MHz, reason mask)."""
    parts = [p.strip() for p in line.strip().split(",")]
    if len(parts) != 3:
        raise ValueError(f"unexpected nvidia-smi output {line!r}")
    return float(parts[0]), float(parts[1]), int(parts[2], 16) if parts[2].lower().startswith("0x") else int(parts[2])


def _read_smi(index: int) -> dict | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    for reasons_field in ("clocks_throttle_reasons.active", "clocks_event_reasons.active"):
        try:
            out = subprocess.run(
                [exe, f"--id={index}", f"--query-gpu=clocks.sm,clocks.mem,{reasons_field}",
                 "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            continue
        try:
            sm, mem, mask = parse_smi_line(out.stdout.strip().splitlines()[0])
        except (ValueError, IndexError):
            continue
        return dict(source="nvidia-smi", sm_mhz=sm, mem_mhz=mem, reasons_mask=mask,
                    reasons=decode_reasons(mask), time=_now())
    return None


def read(index: int | None = None) -> dict:
    """One reading: {'source', 'sm_mhz', 'mem_mhz', 'reasons_mask', 'reasons', 'time'},
    or {'source': 'unavailable', 'time'}."""
    idx = _nvml_index() if index is None else index
    return _read_nvml(idx) or _read_smi(idx) or dict(source="unavailable", time=_now())


def warning(before: dict, after: dict, moved: float = MOVED) -> str:
    """'' when clocks held steady; otherwise one line saying what moved or which throttle was on."""
    if before.get("source") == "unavailable" or after.get("source") == "unavailable":
        return ""
    msgs = []
    for key, what in (("sm_mhz", "SM clock"), ("mem_mhz", "memory clock")):
        b, a = before.get(key), after.get(key)
        if b and a and abs(a - b) / b > moved:
            msgs.append(f"{what} moved {b:.0f} → {a:.0f} MHz ({100 * (a - b) / b:+.1f}%)")
    active = sorted({r for s in (before, after) for r in s.get("reasons", []) if r not in BENIGN})
    if active:
        msgs.append("throttle reason active: " + ", ".join(active))
    return "; ".join(msgs)


def during(readings: list[tuple[str, dict]]) -> str:
    """One line on the clocks of a measurement's parts, from a reading taken at each ((what was
    measured, reading)): the SM and memory clocks' range, and the parts measured under a throttle
    reason (the lowest SM clock among them). '' where no reading has a clock."""
    read = [(what, r) for what, r in readings if isinstance(r, dict) and isinstance(r.get("sm_mhz"), (int, float))]
    if not read:
        return ""
    span = lambda v: f"{min(v):.0f}" if min(v) == max(v) else f"{min(v):.0f}–{max(v):.0f}"  # noqa: E731
    mem = [r["mem_mhz"] for _, r in read if isinstance(r.get("mem_mhz"), (int, float))]
    said = f"GPU clocks at each of {len(read)} readings: SM {span([r['sm_mhz'] for _, r in read])} MHz" + \
        (f", memory {span(mem)} MHz" if mem else "")
    held = [(what, r) for what, r in read if [x for x in r.get("reasons", []) if x not in BENIGN]]
    if not held:
        return said + "; no throttle reason at any."
    low_what, low = min(held, key=lambda x: x[1]["sm_mhz"])
    why = sorted({x for _, r in held for x in r.get("reasons", []) if x not in BENIGN})
    return (said + f"; a throttle reason ({', '.join(why)}) at {len(held)} of them, the lowest SM clock "
            f"{low['sm_mhz']:.0f} MHz at {low_what} (each read as its figure was done, both sides' runs under it).")


class ClockWatch:
    """with ClockWatch() as w: run(); w.to_dict() -> {'source', 'before', 'after', 'warning'}."""

    def __init__(self, index: int | None = None, reader=read):
        self.index = index
        self._read = reader
        self.before: dict | None = None
        self.after: dict | None = None

    def __enter__(self):
        self.before = self._read(self.index)
        return self

    def __exit__(self, *exc):
        self.after = self._read(self.index)
        return False

    def to_dict(self) -> dict:
        before = self.before or dict(source="unavailable")
        after = self.after or dict(source="unavailable")
        src = before.get("source", "unavailable")
        return dict(source=src, before=before, after=after, warning=warning(before, after),
                    moved_threshold=MOVED)
