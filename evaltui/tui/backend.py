"""What the TUI needs from a scheduler, whether embedded or reached over HTTP.

The screens talk to a :class:`Backend` only. Its methods block (file locks, NVML, HTTP),
so the UI calls them from thread workers and never from the event loop. Two kinds
exist: :class:`~evaltui.tui.embedded.EmbeddedBackend` wraps a JobScheduler in this
process; an attached backend (``evaltui --attach URL``) speaks the HTTP API of
``evaltui serve``. Both return the plain dataclasses below.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from evaltui.states import RunState

SchedulerMode = Literal["running", "paused", "locked"]
"""``running``: admitting; ``paused``: admitting nothing by choice; ``locked``: someone
holds the interactive lock, so nothing is admitted until it is released or expires."""


@dataclass(frozen=True)
class RunInfo:
    """One line of the queue screen."""

    run_id: str
    state: RunState
    run_dir: Path | None = None
    graph: str = "?"
    dataset: str = "?"
    split: str = "-"
    episodes_total: int = 0
    episodes_finished: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    worker_count: int = 0
    priority: int = 0
    queued_at: str | None = None
    vram_estimate_mb: float | None = None
    vram_measured_mb: float | None = None
    waiting_reason: str | None = None
    error: str | None = None
    """Why the run failed, or why one of its files could not be used (a badge)."""
    file_error: bool = False
    """True when ``error`` is about an unreadable file (corrupt summary.json…)."""


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the meters show it (MiB; utilisation in percent, None if unknown)."""

    index: int
    name: str
    total_mb: float
    used_mb: float
    reserved_mb: float
    free_mb: float
    util_pct: float | None = None
    fake: bool = False


@dataclass(frozen=True)
class HostInfo:
    """Host CPU and RAM (MiB)."""

    cpu_pct: float
    cpu_count: int
    ram_total_mb: float
    ram_used_mb: float
    ram_reserved_mb: float = 0.0


@dataclass(frozen=True)
class Resources:
    """Everything admission measures. ``gpu_note`` says why there are no GPUs, if so."""

    gpus: tuple[GpuInfo, ...]
    host: HostInfo
    gpu_note: str | None = None


@dataclass(frozen=True)
class SchedulerInfo:
    """The scheduler's own state, for the queue screen's header."""

    mode: SchedulerMode
    label: str
    """Where the scheduler lives: ``embedded`` or the URL of an attached backend."""
    lock_owner: str | None = None
    lock_expires_in_sec: float | None = None
    api_note: str | None = None
    """Where the HTTP API is served, or why it is not."""


@dataclass(frozen=True)
class QueueSnapshot:
    """One poll of the backend: scheduler state, resources and runs (in display order)."""

    scheduler: SchedulerInfo
    resources: Resources
    runs: tuple[RunInfo, ...] = field(default_factory=tuple)


class BackendError(RuntimeError):
    """A backend call failed; the message is meant for the user."""


def resources_view(res: Any) -> Resources:
    """The meters' view of a scheduler ``ResourcesInfo`` or the API's ``Resources`` (same
    field names: the API model mirrors the scheduler view)."""
    gpus = tuple(GpuInfo(index=g.index, name=g.name, total_mb=g.total_mb, used_mb=g.used_mb,
                         reserved_mb=g.reserved_mb, free_mb=max(0, g.available_mb),
                         util_pct=g.utilization_pct, fake=res.fake_gpus) for g in res.gpus)
    h = res.host
    host = HostInfo(cpu_pct=h.cpu_percent, cpu_count=h.cpu_count, ram_total_mb=h.ram_total_mb,
                    ram_used_mb=h.ram_total_mb - h.ram_available_mb,
                    ram_reserved_mb=h.ram_reserved_mb)
    note = None if res.gpu_available else (res.gpu_reason or "no GPU")
    return Resources(gpus=gpus, host=host, gpu_note=note)


def megabytes(value: Any) -> float | None:
    """A MiB figure from a JSON record, or None when absent (bools are not numbers here)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def readable_dir(path: Path) -> bool:
    """True if ``path`` is a directory this process can list and read (a run dir the run
    screen can show)."""
    return path.is_dir() and os.access(path, os.R_OK | os.X_OK)


@runtime_checkable
class Backend(Protocol):
    """The scheduler operations the TUI uses. Every method may block."""

    label: str
    """Shown in the header: ``embedded`` or the attached URL."""
    owner: str
    """The name this UI takes the interactive lock under."""

    def start(self) -> None:
        """Start ticking (embedded) or connect (attached)."""

    def stop(self) -> None:
        """Stop what ``start`` started; running runs are never killed by this."""

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (from any thread) whenever a run changed state."""

    def snapshot(self) -> QueueSnapshot:
        """Scheduler state, resources and all runs: active, queued (admission order), done."""

    def submit(self, spec: dict[str, Any]) -> tuple[str, RunState]:
        """Validate and enqueue a JobSpec; raises ``evaltui.spec.SpecError`` naming the field."""

    def cancel(self, run_id: str) -> RunState:
        """Cancel a queued or running run; returns its state right after the request."""

    def resume(self, run_id: str) -> RunState:
        """Re-run what is not ``ok`` of a finished run, into the same run dir."""

    def set_priority(self, run_id: str, priority: int) -> None:
        """Change a queued run's priority (-100..100)."""

    def lock(self, ttl_sec: float) -> None:
        """Take the interactive lock as ``owner``: admit nothing until unlock or the TTL."""

    def unlock(self) -> None:
        """Release the interactive lock taken as ``owner``."""

    def run_dir(self, run_id: str) -> Path | None:
        """The run's directory when this machine can read it, else None."""
