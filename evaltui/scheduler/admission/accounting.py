"""What the ledger's reservations still hold back, set against measured usage.

A reservation is a promise of memory a run *will* use. The part of it already visible in
the measured usage of its own processes must not be counted twice, so on each resource:

    outstanding(r) = max(0, reserved(r) - measured usage of r's processes)

when usage can be attributed to processes (NVML per-process usage, the run's process tree
for RSS), and the whole ``reserved(r)`` otherwise. A process belongs to a reservation when
it is the holder or in the holder's session (runs and hosted nodesets are session
leaders, so their workers are found without walking the process tree).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaltui.contract.views import LedgerEntry
from evaltui.scheduler import procs
from evaltui.scheduler.admission.cores import oversubscription
from evaltui.scheduler.admission.gpukey import GpuKey
from evaltui.scheduler.admission.resources import GpuSnapshot, ResourceSnapshot

IDLE_GPU_MB = 512
"""Unattributable usage above this (and 2% of the device) reads as a foreign process."""


@dataclass(frozen=True)
class GpuView:
    """One GPU as admission sees it (MiB)."""

    index: GpuKey
    total_mb: int
    free_mb: int
    """Measured free memory."""
    outstanding_mb: int
    """Reservations not yet visible in measured usage."""
    runs: int
    """Reservations placed on this GPU plus processes on it that belong to none."""
    foreign: int
    """Processes (or unattributed usage) on this GPU that no reservation accounts for."""
    exclusive_run: str | None
    """The run holding this GPU exclusively, if any."""

    @property
    def available_mb(self) -> int:
        return self.free_mb - self.outstanding_mb


@dataclass(frozen=True)
class HostView:
    """Host RAM as admission sees it (MiB)."""

    ram_total_mb: int
    ram_available_mb: int
    outstanding_mb: int
    cpu_total: float = 0.0
    """Cores reservations may add up to (the machine's x the oversubscription factor);
    0: cores are not admitted on."""
    cpu_reserved: float = 0.0
    """Cores the ledger's reservations hold (whole: a run's cores are not set against its
    measured use)."""

    @property
    def available_mb(self) -> int:
        return self.ram_available_mb - self.outstanding_mb


@dataclass
class Usage:
    """Measured usage of one reservation's processes."""

    vram_mb: int | None = None
    """Summed over every GPU; None when the GPUs cannot attribute usage."""
    ram_mb: float = 0.0
    vram_by_gpu: dict[GpuKey, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Accounting:
    """Views for admission plus the measured usage of each reservation (by ledger key)."""

    gpus: tuple[GpuView, ...] | None
    """None when GPUs are not measured (no NVML, no device): admit on host resources only."""
    host: HostView
    usage: dict[str, Usage]
    taken_at: float
    """When the resource reading behind it was taken (``time.time()``)."""


class RssCache:
    """Process-tree RSS per holder, re-measured at most every ``ttl_sec``."""

    def __init__(self, ttl_sec: float = 2.0, measure: Callable[[int], float] = procs.tree_rss_mb
                 ) -> None:
        self.ttl_sec = ttl_sec
        self._measure = measure
        self._cache: dict[int, tuple[float, float]] = {}

    def get(self, pid: int) -> float:
        now = time.monotonic()
        hit = self._cache.get(pid)
        if hit is not None and now - hit[1] < self.ttl_sec:
            return hit[0]
        value = self._measure(pid)
        self._cache[pid] = (value, now)
        return value

    def forget_except(self, pids: set[int]) -> None:
        for pid in [p for p in self._cache if p not in pids]:
            del self._cache[pid]


def account(entries: Sequence[LedgerEntry], snap: ResourceSnapshot, rss: RssCache) -> Accounting:
    """Set the reservations against the snapshot (see the module docstring)."""
    # A pending reservation is held by a scheduler for a run not started yet: nothing of
    # its usage can be visible, so it counts whole.
    by_holder = {r.holder_pid: r for r in entries if not r.pending and not r.part}
    usage = {r.key: Usage(ram_mb=0.0 if r.pending or r.part else rss.get(r.holder_pid))
             for r in entries}
    rss.forget_except(set(by_holder))
    gpus: tuple[GpuView, ...] | None = None
    if snap.gpu.available:
        attributable = all(g.processes is not None for g in snap.gpu.gpus)
        if attributable:
            for r in entries:
                if not r.pending:
                    usage[r.key].vram_mb = 0
        # A run with replicas holds one entry per GPU: what its processes use on a GPU
        # counts against its entry there.
        by_gpu = {(r.holder_pid, r.gpu): r for r in entries if not r.pending}
        gpus = tuple(_gpu_view(g, entries, by_holder, by_gpu, usage) for g in snap.gpu.gpus)
    ram_outstanding = sum(max(0, r.ram_mb - int(usage[r.key].ram_mb)) for r in entries)
    cores = snap.host.cpu_cores
    host = HostView(snap.host.ram_total_mb, snap.host.ram_available_mb, ram_outstanding,
                    cpu_total=cores * oversubscription() if cores else 0.0,
                    cpu_reserved=sum(r.cpus for r in entries))
    return Accounting(gpus, host, usage, snap.taken_at)


def _gpu_view(gpu: GpuSnapshot, entries: Sequence[LedgerEntry],
              by_holder: dict[int, LedgerEntry], by_gpu: dict[tuple[int, Any], LedgerEntry],
              usage: dict[str, Usage]) -> GpuView:
    foreign = 0
    if gpu.processes is None:
        idle = max(IDLE_GPU_MB, gpu.total_mb // 50)
        reserved_here = sum(r.vram_mb for r in entries if r.gpu == gpu.index)
        foreign = 1 if gpu.used_mb > idle and reserved_here == 0 else 0
    else:
        for proc in gpu.processes:
            owner = by_holder.get(proc.pid)
            holder = proc.pid
            if owner is None:
                sid = procs.session_of(proc.pid)
                owner = by_holder.get(sid) if sid is not None else None
                holder = sid if sid is not None else proc.pid
            owner = by_gpu.get((holder, gpu.index), owner)
            if owner is None:
                foreign += 1
                continue
            u = usage[owner.key]
            u.vram_mb = (u.vram_mb or 0) + proc.used_mb
            u.vram_by_gpu[gpu.index] = u.vram_by_gpu.get(gpu.index, 0) + proc.used_mb
    outstanding = 0
    runs = foreign
    exclusive_run = None
    for r in entries:
        if r.gpu != gpu.index:
            continue
        runs += 1
        if r.exclusive:
            exclusive_run = r.run_id
        seen = usage[r.key].vram_by_gpu.get(gpu.index, 0) if gpu.processes is not None else 0
        outstanding += max(0, r.vram_mb - seen)
    return GpuView(gpu.index, gpu.total_mb, gpu.free_mb, outstanding, runs, foreign,
                   exclusive_run)
