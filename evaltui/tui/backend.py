"""What the TUI needs from a scheduler, whether embedded or reached over HTTP.

The screens talk to a :class:`Backend` only. Its methods block (file locks, NVML, HTTP),
so the UI calls them from thread workers and never from the event loop. Two kinds
exist: :class:`~evaltui.tui.embedded.EmbeddedBackend` wraps a JobScheduler in this
process; an attached backend (``evaltui --attach URL``) speaks the HTTP API of
``evaltui serve``. Both read the same status views (:mod:`evaltui.contract.views`) and turn them
into the display rows below with one :func:`run_row`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from evaltui.contract.states import AdmitState, RunState
from evaltui.contract.views import Admit, QueueEntry, Resources, Run, SpecBrief

ACTIVE = (RunState.STARTING, RunState.RUNNING)

SchedulerMode = Literal["running", "paused", "locked"]
"""``running``: admitting; ``paused``: admitting nothing by choice; ``locked``: someone
holds the interactive lock, so nothing is admitted until it is released or expires."""


@dataclass(frozen=True)
class RunInfo:
    """One line of the queue screen: a run, or an admit entry waiting in the same queue."""

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
    estimate_source: str | None = None
    """Where ``vram_estimate_mb`` came from: ``calibrated``, ``declared``, ``partly
    calibrated`` (the scheduler's word), or None when unknown."""
    vram_asked_mb: int | None = None
    """The spec's ``scheduling.marginal_vram_mb``: what was asked, beside what is used."""
    waiting_reason: str | None = None
    error: str | None = None
    """Why the run failed, or why one of its files could not be used (a badge)."""
    file_error: bool = False
    """True when ``error`` is about an unreadable file (corrupt summary.json…)."""
    kind: Literal["run", "admit", "serve"] = "run"
    """``admit``: a command ``evaltui run`` wraps (``graph`` is its profile), not a run;
    ``serve``: an ``evaltui serve-policy`` (its profile too), queued or serving."""
    command: str | None = None
    """An admit entry's command line."""
    url: str | None = None
    requests_served: int | None = None
    """A serving entry's address and requests answered (as it last reported them)."""
    node: str | None = None
    """The Ray node it runs or ran on (``--ray``); None on one machine and while queued
    (a resumed run's record still names the node of its last attempt)."""


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
    ledger_error: str | None = None
    """Why nothing is admitted although the scheduler runs: its reservations cannot be
    stored (``Resources.ledger_error``)."""
    ledger_note: str | None = None
    """Why the ledger is per-user: other users cannot see these reservations
    (``Resources.ledger_note``)."""


@dataclass(frozen=True)
class QueueSnapshot:
    """One poll of the backend: scheduler state, resources and runs (in display order)."""

    scheduler: SchedulerInfo
    resources: Resources
    """The backend's status view of GPUs, host, ledger and lock (the API's, too)."""
    runs: tuple[RunInfo, ...] = field(default_factory=tuple)


class BackendError(RuntimeError):
    """A backend call failed; the message is meant for the user."""


def run_row(run: Run, queued: QueueEntry | None = None) -> RunInfo:
    """The queue screen's line of a run view (and of its queue entry while queued): the
    summary's numbers, else what its spec asked for."""
    summary, record, brief = run.summary, run.scheduler, run.spec or SpecBrief()
    graph = (summary and summary.graph_name) or brief.graph_name or \
        (queued.graph_name if queued else None)
    total = summary.episodes_total if summary and summary.episodes_total is not None \
        else brief.episodes_total
    estimate = record.estimate_mb if record else None
    source = record.estimate_source if record else None
    if queued is not None and queued.estimate_source != "unknown":
        estimate = queued.estimate_mb  # fresher: recomputed as calibration learns
        source = queued.estimate_source
    failure = (summary and summary.error) or (record and record.error)
    return RunInfo(
        run_id=run.run_id, state=run.state, run_dir=run.run_dir, graph=graph or "?",
        dataset=(summary and summary.dataset) or brief.dataset or "?",
        split=(summary and summary.split) or brief.split or "-",
        episodes_total=total or 0,
        episodes_finished=summary.episodes_finished if summary else 0,
        metrics=dict(summary.metrics) if summary else {},
        worker_count=(summary and summary.worker_count) or brief.worker_count or 1,
        priority=queued.priority if queued else record.priority if record else brief.priority,
        queued_at=queued.queued_at if queued else record.queued_at if record else None,
        vram_estimate_mb=float(estimate) if estimate is not None else None,
        vram_measured_mb=_mb(record.measured_peak_mb if record else None),
        estimate_source=source, vram_asked_mb=brief.marginal_vram_mb if run.spec else None,
        waiting_reason=queued.waiting_reason if queued else run.waiting_reason,
        error=run.error or failure or None, file_error=run.error is not None,
        node=run.node)


def admit_row(entry: QueueEntry) -> RunInfo:
    """The queue screen's line of a waiting admit entry (``evaltui run PROFILE CMD``)."""
    return RunInfo(run_id=entry.run_id, state=RunState.QUEUED, graph=entry.label or "?",
                   priority=entry.priority, queued_at=entry.queued_at,
                   vram_estimate_mb=float(entry.estimate_mb) if entry.estimate_mb else None,
                   estimate_source=entry.estimate_source,
                   waiting_reason=entry.waiting_reason,
                   kind="serve" if entry.admit_kind == "serve" else "admit",
                   command=entry.command)


def held_row(entry: Admit) -> RunInfo:
    """The queue screen's line of an admitted entry: a command ``evaltui run`` runs, or
    an ``evaltui serve-policy`` serving (its URL and requests served)."""
    return RunInfo(run_id=f"admit:{entry.admit_id}", state=RunState.RUNNING,
                   graph=entry.label, priority=entry.priority,
                   vram_estimate_mb=float(entry.reserved_mb) if entry.reserved_mb else None,
                   estimate_source="declared" if entry.vram_mb is not None else "whole_gpu",
                   kind="serve" if entry.kind == "serve" else "admit",
                   command=entry.command, url=entry.url,
                   requests_served=entry.requests_served)


def queue_rows(runs: Sequence[Run], queue: Sequence[QueueEntry],
               admits: Sequence[Admit] = ()) -> list[RunInfo]:
    """Active runs and admitted entries (``admits``: those of them admitted, e.g. a
    serving ``serve-policy``), then the queue in admission order (runs and admit
    entries), then finished runs in the order given (newest first): what both backends
    show. Each run
    once: the queue and the runs are two reads, and a run admitted between them is in
    the queue of the first and active in the second (it shows as active)."""
    by_id = {r.run_id: r for r in runs}
    queued = {q.run_id for q in queue}
    active = [run_row(r) for r in runs if r.state in ACTIVE]
    active += [held_row(a) for a in admits if a.state is AdmitState.ADMITTED]
    shown = {r.run_id for r in active}
    waiting = [admit_row(q) if q.kind == "admit" else run_row(by_id[q.run_id], q)
               for q in queue
               if q.kind == "admit" or (q.run_id in by_id and q.run_id not in shown)]
    rest = [run_row(r) for r in runs if r.state not in ACTIVE and r.run_id not in queued]
    return active + waiting + rest


def scheduler_info(res: Resources, label: str, api_note: str | None, now: float,
                   unlocked: SchedulerMode = "running") -> SchedulerInfo:
    """The header's scheduler state: ``locked`` while ``res``'s lock lasts (measured
    against ``now`` on the backend's own clock), else ``unlocked``."""
    lock = res.lock
    left = lock.expires_at - now if lock is not None else None
    locked = lock is not None and left is not None and left > 0
    return SchedulerInfo(mode="locked" if locked else unlocked, label=label,
                         lock_owner=lock.owner if locked and lock else None,
                         lock_expires_in_sec=left if locked else None,
                         api_note=api_note, ledger_error=res.ledger_error,
                         ledger_note=res.ledger_note)


def _mb(value: int | None) -> float | None:
    return float(value) if value is not None else None


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
        """Validate and enqueue a JobSpec; raises ``evaltui.contract.spec.SpecError`` naming
        the field."""

    def submit_warnings(self, run_id: str) -> list[str]:
        """What submit warned about for this run (step budget, missing references)."""

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
