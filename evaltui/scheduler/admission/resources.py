"""What the machine has: GPUs through NVML (or fake ones), host RAM and CPU through psutil.

Every probe returns plain frozen snapshots and never raises: a machine without NVML or
without a GPU reads as ``available=False`` with the reason, and admission then uses host
resources only (DESIGN §6). Per-process GPU memory is reported when the driver gives it
(``processes``), so that a reservation can be set against what its run already uses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
import psutil

from evaltui.contract.settings import settings
from evaltui.gpu import fakegpu
from evaltui.gpu.nvml import pynvml
from evaltui.scheduler import procs
from evaltui.scheduler.admission.cores import machine_cores
from evaltui.scheduler.admission.gpukey import GpuKey

MIB = 1 << 20
_NVML_RETRY_SEC = 60.0


@dataclass(frozen=True)
class ProcessUsage:
    """One process's memory on a GPU."""

    pid: int
    used_mb: int


@dataclass(frozen=True)
class GpuSnapshot:
    """One GPU at one moment (MiB)."""

    index: GpuKey
    """NVML index; a NodeGpu when read across a Ray cluster (cluster/probe.py)."""
    name: str
    total_mb: int
    used_mb: int
    free_mb: int
    utilization_pct: float | None
    processes: tuple[ProcessUsage, ...] | None
    """Per-process usage; None when the driver cannot attribute memory to processes."""
    runs: Mapping[str, int] | None = None
    """On a Ray node (cluster/probe.py): usage per run id of the processes that carry
    one (``EVALTUI_RAY_RUN_ID``); None where processes cannot be attributed."""


@dataclass(frozen=True)
class GpuReading:
    """All GPUs, or why there are none to measure."""

    available: bool
    reason: str | None
    """Why GPUs are not measured ("NVML unavailable: ..."), or None."""
    fake: bool
    gpus: tuple[GpuSnapshot, ...]


@dataclass(frozen=True)
class HostSnapshot:
    """Host memory (MiB) and CPU load."""

    ram_total_mb: int
    ram_available_mb: int
    cpu_percent: float
    cpu_count: int
    load_avg_1m: float | None
    cpu_cores: float | None = None
    """The cores admission counts on (cores.py: ``EVALTUI_CPUS``, the cgroup limit, the
    affinity); None where not probed: CPU cores are then not admitted on."""


@dataclass(frozen=True)
class ResourceSnapshot:
    """GPUs and host, read together."""

    gpu: GpuReading
    host: HostSnapshot
    taken_at: float
    """``time.time()`` of the reading."""


class GpuProbe(Protocol):
    """Anything that can read the GPUs: NVML, fake devices, a test double."""

    def read(self) -> GpuReading:
        """The GPUs now; never raises."""
        ...

    def close(self) -> None:
        """Release the driver handle (if any)."""
        ...


# --- NVML ------------------------------------------------------------------------------------


class NvmlProbe:
    """Real GPUs through NVML; re-tries a failed init once a minute (a driver may load late)."""

    def __init__(self, nvml: Any | None = None) -> None:
        self._nvml = nvml
        self._ready = False
        self._reason: str | None = None
        self._next_try = 0.0

    def read(self) -> GpuReading:
        if not self._ensure_init():
            return GpuReading(False, self._reason, False, ())
        nvml = self._nvml
        assert nvml is not None
        try:
            count = nvml.nvmlDeviceGetCount()
            gpus = tuple(self._device(nvml, i) for i in range(count))
        except Exception as exc:  # a driver error must never stop the scheduler
            return GpuReading(False, f"NVML error: {exc}", False, ())
        if not gpus:
            return GpuReading(False, "no GPU: NVML reports 0 devices", False, ())
        return GpuReading(True, None, False, gpus)

    def close(self) -> None:
        if self._ready and self._nvml is not None:
            with suppress(Exception):  # shutting down a broken driver: nothing left to do
                self._nvml.nvmlShutdown()
            self._ready = False

    def _ensure_init(self) -> bool:
        if self._ready:
            return True
        now = time.monotonic()
        if now < self._next_try:
            return False
        self._next_try = now + _NVML_RETRY_SEC
        try:
            if self._nvml is None:
                self._nvml = pynvml
            self._nvml.nvmlInit()
        except Exception as exc:  # no library, no driver, no permission: all "unavailable"
            self._reason = f"NVML unavailable: {exc or type(exc).__name__}"
            return False
        self._ready, self._reason = True, None
        return True

    @staticmethod
    def _device(nvml: Any, index: int) -> GpuSnapshot:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(handle)
        if isinstance(name, bytes):
            name = name.decode(errors="replace")
        mem = nvml.nvmlDeviceGetMemoryInfo(handle)
        try:
            util: float | None = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except Exception:  # not supported on some boards (e.g. MIG): leave the meter blank
            util = None
        return GpuSnapshot(
            index=index, name=str(name), total_mb=int(mem.total // MIB),
            used_mb=int(mem.used // MIB), free_mb=int(mem.free // MIB),
            utilization_pct=util, processes=_nvml_processes(nvml, handle),
        )


def _nvml_processes(nvml: Any, handle: Any) -> tuple[ProcessUsage, ...] | None:
    """Compute and graphics processes merged by PID; None if any usage is not reported."""
    used: dict[int, int] = {}
    try:
        infos = [*nvml.nvmlDeviceGetComputeRunningProcesses(handle),
                 *nvml.nvmlDeviceGetGraphicsRunningProcesses(handle)]
    except Exception:
        return None
    for info in infos:
        if info.usedGpuMemory is None:  # WDDM, some containers: usage not attributable
            return None
        used[int(info.pid)] = used.get(int(info.pid), 0) + int(info.usedGpuMemory // MIB)
    return tuple(ProcessUsage(pid, mb) for pid, mb in sorted(used.items()))


# --- fake GPUs -------------------------------------------------------------------------------


class FakeGpuProbe:
    """Fake devices from ``EVALTUI_FAKE_GPUS``, charged per live process (see evaltui.gpu.fakegpu).

    Used only when that variable is set, so it never stands in for real GPUs.
    """

    def __init__(self, sizes_mb: list[int]) -> None:
        self.sizes_mb = list(sizes_mb)

    def read(self) -> GpuReading:
        gpus = []
        for index, total in enumerate(self.sizes_mb):
            processes = self._charges(fakegpu.charges_dir(index))
            used = min(total, sum(p.used_mb for p in processes))
            gpus.append(GpuSnapshot(index=index, name=f"fake GPU {index}", total_mb=total,
                                    used_mb=used, free_mb=total - used, utilization_pct=None,
                                    processes=processes))
        return GpuReading(True, None, True, tuple(gpus))

    def close(self) -> None:
        pass

    @staticmethod
    def _charges(directory: Path) -> tuple[ProcessUsage, ...]:
        found: list[ProcessUsage] = []
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return ()
        for entry in entries:
            ref = fakegpu.parse_charge_filename(entry.name)
            if ref is None:
                continue
            if not procs.alive(ref.pid, ref.create_time):
                # The process died without releasing (SIGKILL): its memory is free again.
                Path(entry.path).unlink(missing_ok=True)
                continue
            try:
                mb = int(orjson.loads(Path(entry.path).read_bytes())["mb"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # released between scandir and read
            found.append(ProcessUsage(ref.pid, mb))
        return tuple(sorted(found, key=lambda p: p.pid))


class UnavailableProbe:
    """A probe that only says why there are no GPUs (e.g. a malformed EVALTUI_FAKE_GPUS)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def read(self) -> GpuReading:
        return GpuReading(False, self.reason, False, ())

    def close(self) -> None:
        pass


def make_gpu_probe() -> GpuProbe:
    """FakeGpuProbe when ``EVALTUI_FAKE_GPUS`` is set, else NvmlProbe."""
    try:
        sizes = fakegpu.fake_gpus()
    except ValueError as exc:
        return UnavailableProbe(str(exc))
    return FakeGpuProbe(sizes) if sizes is not None else NvmlProbe()


# --- host ----------------------------------------------------------------------------------


class HostProbe:
    """Host RAM and CPU via psutil."""

    def __init__(self) -> None:
        psutil.cpu_percent(interval=None)  # the first call only sets the baseline

    def read(self) -> HostSnapshot:
        vm = psutil.virtual_memory()
        try:
            load: float | None = os.getloadavg()[0]
        except OSError:
            load = None
        return HostSnapshot(
            ram_total_mb=int(vm.total // MIB), ram_available_mb=int(vm.available // MIB),
            cpu_percent=float(psutil.cpu_percent(interval=None)),
            cpu_count=psutil.cpu_count() or 1, load_avg_1m=load, cpu_cores=machine_cores(),
        )


def visible_gpu_indices() -> frozenset[int] | None:
    """GPUs this process may hand out: its own CUDA_VISIBLE_DEVICES, if that is set.

    None means all. UUIDs or MIG names cannot be mapped to NVML indices here, so they
    also mean all.
    """
    value = settings().cuda_visible_devices
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not all(v.isdigit() for v in items):
        return None
    return frozenset(int(v) for v in items)
