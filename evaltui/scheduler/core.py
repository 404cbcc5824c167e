"""What every part of the scheduler shares, and the one place a run's state changes.

A :class:`Core` holds the scheduler's collaborators (probes, ledger, calibration, shared
nodesets, record writer) and its in-memory view of the runs it owns: ``jobs`` (every run
it tracks), ``queue`` (queued ones in admission order), ``running`` and ``loading``. The
parts built on it each hold one idea: lifecycle.py (submit, cancel, resume, finalize),
starting.py (spawn an admitted job), claims.py (take over runs from disk), sampling.py
(measure and calibrate), admits.py (``evaltui run`` entries), ticking.py (the admission
tick) and reads.py (status reads); scheduler.py composes them.

:meth:`Core.transition` is the only way a known run changes state: the record in memory,
scheduler.json and the ``RunStateChanged`` event change together, so they cannot drift.

Locks, always taken in this order: the ledger's file lock, ``lock``, a job's write lock,
a run dir's record lock (launch.scheduler_record_lock); the event list's lock is taken
alone.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from evaltui.contract.pidref import PidRef
from evaltui.contract.records import SchedulerRecord
from evaltui.contract.spec import JobSpec
from evaltui.contract.states import RunState
from evaltui.contract.views import LedgerEntry
from evaltui.gpu import fakegpu
from evaltui.gpu.env import gpu_env
from evaltui.procs.groups import terminate_group
from evaltui.rundir.layout import is_run_id, outputs_root, runs_root
from evaltui.scheduler.admission.accounting import RssCache
from evaltui.scheduler.admission.calibration import Calibration, nodeset_parts
from evaltui.scheduler.admission.decision import Wait
from evaltui.scheduler.admission.ledger import Ledger
from evaltui.scheduler.admission.resources import (
    FakeGpuProbe,
    GpuProbe,
    HostProbe,
    visible_gpu_indices,
)
from evaltui.scheduler.cluster.placement import placement_for
from evaltui.scheduler.events import Listeners, NodesetsChanged, RunStateChanged, SchedulerEvent
from evaltui.scheduler.lock import InteractiveLock
from evaltui.scheduler.runs.episodes import EpisodeWatcher
from evaltui.scheduler.runs.fairshare import ServedClock
from evaltui.scheduler.runs.jobs import Job, JobQueue, RecordWriter
from evaltui.scheduler.runs.ownership import new_owner
from evaltui.scheduler.runs.runindex import RunIndex
from evaltui.scheduler.shared.launcher import SubprocessLauncher, hosts_dir
from evaltui.scheduler.shared.nodesets import NodesetLauncher, SharedNodeset, SharedNodesets

log = logging.getLogger(__name__)


class RunNotFound(KeyError):
    """No run dir with that run id (also for ids that are not run ids at all)."""


class NotResumable(ValueError):
    """The run cannot be resumed (still active, or nothing left to re-run)."""


class NotQueued(ValueError):
    """The run is not waiting in this scheduler's queue (so its priority is fixed)."""


class Write(Enum):
    """When :meth:`Core.transition` puts the change on disk."""

    NOW = "now"
    """Before anyone is told (lifecycle changes others act on)."""
    SOON = "soon"
    """Within the loop's next flush (starting -> running)."""
    ALREADY = "already"
    """Not at all: another process wrote it (a cancel or a take-over seen on disk)."""
    MUST = "must"
    """Before anyone is told, or OSError with nothing changed (a spawn depends on it)."""


class Core:
    """The scheduler's shared state; methods that change a job need ``lock`` held."""

    def __init__(self, outputs: str | os.PathLike[str] | None, *, gpu_probe: GpuProbe,
                 host_probe: HostProbe | None, ledger: Ledger | None,
                 calibration: Calibration | None, interactive_lock: InteractiveLock | None,
                 lock_check: Callable[[], str | None] | None,
                 nodeset_launcher: NodesetLauncher | None, host_shared: bool,
                 probe_interval: float, cancel_grace_sec: float, claim_after_sec: float,
                 disk_sync_sec: float, owner_of: object) -> None:
        self.outputs = outputs_root(outputs)
        self.runs_root = runs_root(self.outputs)
        self.gpu_probe = gpu_probe
        self.fake = isinstance(gpu_probe, FakeGpuProbe)
        self.host_probe = host_probe or HostProbe()
        self.ledger = ledger or Ledger()
        self.calibration = calibration or Calibration()
        self.ilock = interactive_lock or InteractiveLock()
        self.lock_check = lock_check
        self.probe_interval = probe_interval
        self.cancel_grace_sec = cancel_grace_sec
        self.claim_after_sec = claim_after_sec
        self.disk_sync_sec = disk_sync_sec
        allowed = None if self.fake else visible_gpu_indices()
        self.placement = placement_for(gpu_probe, fake=self.fake, allowed=allowed)
        """Where admitted runs go: this machine, or the Ray cluster ``gpu_probe`` reads."""

        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        """Notified on every state change (run or admit entry): ``wait`` sleeps on it."""
        self.jobs: dict[str, Job] = {}
        self.queue = JobQueue()
        self.running: dict[str, Job] = {}
        self.loading: dict[str, Job] = {}
        self.served = ServedClock()
        """When each set (and the lone runs) last had a job admitted (fairshare.py)."""
        self.tick_no = 0
        self.rss = RssCache()
        self.writer = RecordWriter(self.lock)
        self.episodes = EpisodeWatcher()
        self.listeners: Listeners[SchedulerEvent] = Listeners()
        self.index = RunIndex(self.runs_root)
        self.me = PidRef.current()
        self.owner = new_owner(owner_of)
        if nodeset_launcher is None and host_shared:
            nodeset_launcher = SubprocessLauncher()
        self.shared = SharedNodesets(nodeset_launcher, hosts_dir(), self._nodeset_changed,
                                     runs_root=self.runs_root, owner=self.me)
        self.nudge: Callable[[], None] = lambda: None
        """Tick as soon as possible (the façade points it at its loop)."""
        self._seq = 0
        self._events: list[SchedulerEvent] = []
        self._events_lock = threading.Lock()  # taken alone: any thread may report events

    # ---- jobs ---------------------------------------------------------------------------
    def next_seq(self) -> int:
        """Tie-break of the queue order, shared by runs and admit entries (lock held)."""
        self._seq += 1
        return self._seq

    def new_job(self, run_dir: Path, record: SchedulerRecord, spec: JobSpec | None) -> Job:
        """Track a run whose record (its state included) is on disk already."""
        job = Job(run_dir.name, run_dir, record, spec,
                  nodeset_parts(spec) if spec is not None else [], self.next_seq())
        self.jobs[job.run_id] = job
        return job

    def enqueue(self, job: Job, previous: RunState | None) -> None:
        """Queue a job whose record says ``queued`` on disk already; tell the listeners
        it came from ``previous`` (None: a new run)."""
        self.queue.add(job)
        self._changed_to(job, previous)

    def transition(self, job: Job, state: RunState, *, write: Write = Write.NOW,
                   **fields: Any) -> RunState:
        """Move ``job`` to ``state`` (with record ``fields``): in memory, on disk (``write``)
        and as an event, together. Returns the state it left. Lock held."""
        previous = job.state
        if write is Write.ALREADY:
            job.seen(**fields, state=state)  # not dirty: never written back
        elif write is Write.MUST:
            before = {k: getattr(job.record, k) for k in ("state", *fields)}
            job.set(state=state.value, **fields)
            try:
                self.writer.write(job, must=True)
            except OSError:
                job.set(**before)  # as it was (and as the disk still says)
                raise
        else:
            job.set(state=state.value, **fields)
            if write is Write.NOW:
                self.writer.write(job)
            else:
                self.writer.schedule(job)
        self._changed_to(job, previous)
        return previous

    def set_wait(self, job: Job, wait: Wait) -> None:
        job.wait = wait
        if job.record.waiting_kind != wait.kind:  # a StrEnum: equal to its value
            # On disk only when the kind of reason changes: the live text (numbers that
            # move every second) is served by queue(); see RecordWriter.
            job.set(waiting_reason=wait.reason, waiting_kind=str(wait.kind))
            self.writer.schedule(job)

    def _changed_to(self, job: Job, previous: RunState | None) -> None:
        self.report(RunStateChanged(job.run_id, job.state, previous, time.time()))
        self.changed.notify_all()

    # ---- events -------------------------------------------------------------------------
    def report(self, *events: SchedulerEvent) -> None:
        """Queue events; ``emit_pending`` hands them to the listeners (no lock held)."""
        with self._events_lock:
            self._events.extend(events)

    def emit_pending(self) -> None:
        with self._events_lock:
            events, self._events = self._events, []
        for event in events:
            self.listeners.emit(event)

    def _nodeset_changed(self, ns: SharedNodeset, loaded: bool) -> None:
        self.report(NodesetsChanged(ns.name, loaded, ns.refcount, time.time()))

    # ---- helpers ------------------------------------------------------------------------
    def estimate_version(self) -> tuple[int, int]:
        return (self.calibration.version, self.shared.version)

    def shared_keys(self) -> set[str]:
        return self.shared.loaded_keys() if self.shared.enabled else set()

    def run_env(self, gpu: int | None) -> dict[str, str]:
        """The environment of a process placed on ``gpu`` (a run, a nodeset host)."""
        env = dict(os.environ)  # passed on whole to the child, not read for settings
        env.pop(fakegpu.FAKE_GPU_INDEX_ENV, None)
        env.update(gpu_env(gpu, self.fake))
        return env

    def ledger_entry(self, run_id: str, holder: PidRef, *, gpu: int | None, vram_mb: int,
                     ram_mb: int = 0, exclusive: bool = False, pending: bool = False,
                     part: int = 0, cpus: float = 0.0) -> LedgerEntry:
        """A reservation this scheduler makes now for ``run_id``, held by ``holder``."""
        return LedgerEntry(run_id=run_id, holder_pid=holder.pid,
                           holder_create_time=holder.create_time, scheduler_pid=os.getpid(),
                           outputs=str(self.outputs), gpu=gpu, vram_mb=vram_mb, ram_mb=ram_mb,
                           exclusive=exclusive, admitted_at=time.time(), pending=pending,
                           uid=os.getuid(), part=part, cpus=cpus)

    def run_dir(self, run_id: str) -> Path:
        run_dir = self.runs_root / run_id
        if not is_run_id(run_id) or not run_dir.is_dir():
            raise RunNotFound(run_id)
        return run_dir

    def lock_reason(self) -> str | None:
        """Why nothing may be admitted now (the interactive lock), or None."""
        if self.lock_check is not None:
            try:
                reason = self.lock_check()
            except Exception:
                log.exception("lock_check failed; treating the lock as held")
                reason = "interactive lock check failed (see the log)"
            if reason:
                return reason
        held = self.ilock.current()
        return held.reason if held is not None else None

    def terminate_later(self, ref: PidRef) -> None:
        """SIGTERM the process group, SIGKILL after the grace period (on its own thread)."""
        def run() -> None:
            terminate_group(ref, self.cancel_grace_sec)
            self.nudge()

        threading.Thread(target=run, name=f"evaltui-cancel-{ref.pid}", daemon=True).start()

