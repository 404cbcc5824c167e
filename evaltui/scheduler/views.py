"""What the scheduler's status reads return: frozen, JSON-ready records for the API and TUI."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.scheduler.ledger import Reservation
from evaltui.scheduler.lock import LockInfo
from evaltui.scheduler.resources import GpuProcess
from evaltui.states import RunState


@dataclass(frozen=True)
class RunInfo:
    """One run: its state, its scheduler record and its summary (without episode rows)."""

    run_id: str
    run_dir: Path
    state: RunState
    scheduler: dict[str, Any] | None
    summary: dict[str, Any] | None
    waiting_reason: str | None
    error: str | None = None
    """Why a file in the run dir could not be used (e.g. a corrupt summary.json)."""


@dataclass(frozen=True)
class QueuedJob:
    """A queued job in admission order, with why it waits: an eval run (``kind`` ``run``)
    or a command ``evaltui run`` wraps (``kind`` ``admit``, ``run_id`` ``admit:{id}``)."""

    run_id: str
    position: int
    """0 = next in line."""
    priority: int
    queued_at: str | None
    waiting_reason: str
    waiting_kind: str
    estimate_mb: int
    ram_estimate_mb: int
    estimate_source: str
    exclusive: bool
    graph_name: str | None
    kind: str = "run"
    """``run`` or ``admit``: the one queue holds both, in one order."""
    label: str | None = None
    """An admit entry's profile name (``evaltui run PROFILE``)."""
    command: str | None = None
    """An admit entry's command line."""


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: measured memory, what reservations still hold back, who runs on it."""

    index: int
    name: str
    total_mb: int
    used_mb: int
    free_mb: int
    reserved_mb: int
    """Outstanding reservations (not yet visible in ``used_mb``)."""
    available_mb: int
    """``free_mb - reserved_mb``: what admission can still hand out."""
    utilization_pct: float | None
    runs: int
    exclusive_run: str | None
    processes: tuple[GpuProcess, ...] | None


@dataclass(frozen=True)
class HostInfo:
    """Host RAM (MiB) and CPU."""

    ram_total_mb: int
    ram_available_mb: int
    ram_reserved_mb: int
    cpu_percent: float
    cpu_count: int
    load_avg_1m: float | None


@dataclass(frozen=True)
class ResourcesInfo:
    """Everything the resource meters show."""

    gpu_available: bool
    gpu_reason: str | None
    """Why GPUs are not measured ("NVML unavailable: ..."); admission then uses host RAM."""
    fake_gpus: bool
    gpus: tuple[GpuInfo, ...]
    host: HostInfo
    ledger: tuple[Reservation, ...]
    lock: LockInfo | None
    taken_at: float


@dataclass(frozen=True)
class NodesetInfo:
    """A shared nodeset hosted by the scheduler."""

    name: str
    key: str
    impl: str
    params: dict[str, Any]
    url: str
    pid: int
    origin: str
    """``scheduler`` (auto-unloaded when unused) or ``interactive`` (stays loaded)."""
    refcount: int
    holders: tuple[str, ...]
    gpu: int | None
    loaded_at: float


def to_jsonable(obj: Any) -> Any:
    """Any view above (or a list of them) as plain JSON types."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj
