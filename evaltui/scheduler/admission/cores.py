"""CPU cores as admission counts them: the machine's, and what a run reserves.

The machine's cores are ``EVALTUI_CPUS`` when set, else the cgroup's CPU limit (v2
``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``) where there is one, capped by
the CPUs this process may run on (its affinity). Reservations may add up to that times
``EVALTUI_CPU_OVERSUBSCRIBE`` (default 1.0).

A run reserves ``workers x cores per worker``: per worker, the measured CPU use of
earlier runs of the same graph (calibration.py, ``cpu``), else the spec's declared
``scheduling.cpus_per_worker``, else 1. The probe never raises: a bad setting is said
once in the log and the probe is used.
"""

from __future__ import annotations

import logging
import math
import os
from contextlib import suppress
from pathlib import Path

from evaltui.contract.settings import settings

DEFAULT_CPUS_PER_WORKER = 1.0
CGROUP_ROOT = Path("/sys/fs/cgroup")

log = logging.getLogger(__name__)
_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning("%s", message)


def _positive(name: str, raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        _say_once(f"{name}={raw!r} is not a positive number of cores; ignored")
        return None
    return value


def cgroup_cores(root: Path = CGROUP_ROOT) -> float | None:
    """The CPU limit of this process's cgroup in cores, or None where there is none."""
    with suppress(OSError, ValueError):
        quota, period = (root / "cpu.max").read_text().split()[:2]  # v2: "max 100000"
        return None if quota == "max" else int(quota) / int(period)
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())  # v1: -1 = none
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def machine_cores() -> float:
    """The cores admission counts on (see the module docstring)."""
    override = _positive("EVALTUI_CPUS", settings().cpus)
    if override is not None:
        return override
    try:
        usable = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        usable = float(os.cpu_count() or 1)
    limit = cgroup_cores()
    return min(usable, limit) if limit is not None else usable


def oversubscription() -> float:
    """``EVALTUI_CPU_OVERSUBSCRIBE``: reserved cores each core may carry (default 1.0)."""
    return _positive("EVALTUI_CPU_OVERSUBSCRIBE", settings().cpu_oversubscribe) or 1.0


def run_cores(workers: int, declared: float | None, measured: float | None) -> float:
    """Cores a run of ``workers`` reserves: per worker the measured use, else the
    declared ``cpus_per_worker``, else :data:`DEFAULT_CPUS_PER_WORKER`."""
    per_worker = measured if measured is not None else declared
    return workers * (per_worker if per_worker is not None else DEFAULT_CPUS_PER_WORKER)


def cores_text(cores: float) -> str:
    """``4 cores``, ``1 core``, ``0.5 cores``."""
    shown = f"{cores:.1f}".rstrip("0").rstrip(".") if cores % 1 else f"{int(cores)}"
    return f"{shown} core" + ("" if shown == "1" else "s")


def auto_workers(held: float, per_worker: float = DEFAULT_CPUS_PER_WORKER) -> int:
    """``--workers auto``: as many workers as the cores free of ``held`` (what the
    ledger's live reservations hold) carry, at least 1."""
    free = machine_cores() * oversubscription() - held
    return max(1, math.floor(free / per_worker + 1e-9))
