"""JobScheduler: the queue, the admission tick, run lifecycles, cancel and resume (DESIGN §6).

The scheduler keeps only a queue entry, a process handle and refcounts per run; each
run's state lives in its run dir. ``submit`` validates and writes the run dir and
enqueues; ``tick`` (once a second on the scheduler's thread, and at once when nudged by a
submit or a run's exit) reaps finished runs, then admits queued jobs against measured
resources minus the machine-wide ledger's reservations, spawning each admitted run in
its own session. A new scheduler on the same outputs root takes over the queue and the
running runs from disk, so killing or restarting it never kills a run (unless the spec
asked for ``tie_to_backend``). Several live schedulers may share an outputs root: each
run has one owner (ownership.py), and any of them can cancel any run.

Threads: the caller's (submit, cancel, reads), the scheduler loop (``start``/``stop``:
ticks, episode scans, deferred record writes, other backends' changes), one short-lived
thread per cancel of a running run and one per shared nodeset being loaded. Admission and
spawning happen on the loop thread: a run with ``tie_to_backend`` is tied to the thread
that spawned it (PR_SET_PDEATHSIG), and that thread lives until ``stop``.

Locks, always taken in this order: the ledger's file lock, ``self._lock``, a job's write
lock, a run dir's record lock (launch.scheduler_record_lock); the event list's lock is
taken alone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evaltui import fakegpu
from evaltui.engine.summary import now_iso
from evaltui.launch import scheduler_record_lock, spawn_run, spawned_ref, write_run
from evaltui.process import terminate_group
from evaltui.rundir import (
    DONE_FILENAME,
    SCHEDULER_FILENAME,
    SUMMARY_FILENAME,
    PidRef,
    derive_run_state,
    episode_dir,
    is_run_id,
    outputs_root,
    read_json,
    runs_root,
    state_dir,
    write_json_atomic,
)
from evaltui.scheduler import procs
from evaltui.scheduler.accounting import Accounting, RssCache, account
from evaltui.scheduler.admission import Candidate, Wait, WaitKind, decide
from evaltui.scheduler.calibration import Calibration, NodesetPart, nodeset_key, nodeset_parts
from evaltui.scheduler.episodes import EpisodeWatcher
from evaltui.scheduler.events import (
    Listener,
    Listeners,
    NodesetsChanged,
    RunStateChanged,
    SchedulerEvent,
)
from evaltui.scheduler.handles import RunHandle
from evaltui.scheduler.hostlauncher import SubprocessLauncher
from evaltui.scheduler.jobs import Job, JobQueue, Loading, RecordWriter, parse_iso
from evaltui.scheduler.ledger import Ledger, LedgerTxn, Reservation, holder_key
from evaltui.scheduler.lock import InteractiveLock, LockInfo
from evaltui.scheduler.loop import SchedulerLoop
from evaltui.scheduler.ownership import new_owner, owner_alive, retire, revive
from evaltui.scheduler.resources import (
    FakeGpuProbe,
    GpuProbe,
    HostProbe,
    ResourceSnapshot,
    make_gpu_probe,
    visible_gpu_indices,
)
from evaltui.scheduler.restore import (
    Claimed,
    Found,
    classify,
    load_spec,
    queue_order,
    read_record,
    record_ref,
)
from evaltui.scheduler.runindex import RunIndex, strip_rows
from evaltui.scheduler.shared import NodesetLauncher, SharedNodeset, SharedNodesets
from evaltui.scheduler.views import (
    GpuInfo,
    HostInfo,
    NodesetInfo,
    QueuedJob,
    ResourcesInfo,
    RunInfo,
)
from evaltui.spec import JobSpec, SpecError, validate_spec
from evaltui.states import EpisodeStatus, RunState

log = logging.getLogger(__name__)

Spawner = Callable[[Path, Mapping[str, str]], "subprocess.Popen[bytes]"]
"""Starts a run subprocess for a run dir with the given environment (own session)."""

RESUMABLE = frozenset({RunState.ABORTED, RunState.CANCELLED, RunState.FAILED, RunState.DONE})
_EPISODE_SCAN_SEC = 0.5
UNOWNED_GRACE_SEC = 10.0
"""A queued run dir no scheduler owns is taken over once it has waited this long."""
MIN_CALIBRATION_SAMPLES = 5
"""Usage readings a run must have had while running before its peak calibrates."""


class RunNotFound(KeyError):
    """No run dir with that run id (also for ids that are not run ids at all)."""


class NotResumable(ValueError):
    """The run cannot be resumed (still active, or nothing left to re-run)."""


class NotQueued(ValueError):
    """The run is not waiting in this scheduler's queue (so its priority is fixed)."""


def default_spawner(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """``python -m evaltui.engine.main RUN_DIR`` in a new session (evaltui.launch)."""
    return spawn_run(run_dir, env, record=False)


class JobScheduler:
    """Queue, admission and lifecycle of eval runs under one outputs root."""

    def __init__(
        self,
        outputs: str | os.PathLike[str] | None = None,
        *,
        gpu_probe: GpuProbe | None = None,
        host_probe: HostProbe | None = None,
        ledger: Ledger | None = None,
        calibration: Calibration | None = None,
        interactive_lock: InteractiveLock | None = None,
        lock_check: Callable[[], str | None] | None = None,
        spawner: Spawner | None = None,
        nodeset_launcher: NodesetLauncher | None = None,
        host_shared: bool = True,
        tick_interval: float = 1.0,
        probe_interval: float = 1.0,
        cancel_grace_sec: float = 10.0,
        claim_after_sec: float = 120.0,
        disk_sync_sec: float = 5.0,
        restore: bool = True,
    ) -> None:
        self.outputs = outputs_root(outputs)
        self.runs_root = runs_root(self.outputs)
        self._gpu_probe = gpu_probe or make_gpu_probe()
        self._fake = isinstance(self._gpu_probe, FakeGpuProbe)
        self._host_probe = host_probe or HostProbe()
        self._ledger = ledger or Ledger()
        self._calibration = calibration or Calibration()
        self._ilock = interactive_lock or InteractiveLock()
        self._lock_check = lock_check
        self._spawner = spawner or default_spawner
        self.probe_interval = probe_interval
        self.cancel_grace_sec = cancel_grace_sec
        self.claim_after_sec = claim_after_sec
        self.disk_sync_sec = disk_sync_sec
        self._allowed_gpus = visible_gpu_indices() if not self._fake else None

        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._tick_lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._queue = JobQueue()
        self._running: dict[str, Job] = {}
        self._seq = 0
        self._tick_no = 0
        self._snapshot: ResourceSnapshot | None = None
        self._snapshot_at = -1e9
        self._rss = RssCache()
        self._writer = RecordWriter(self._lock)
        self._episodes = EpisodeWatcher()
        self._listeners = Listeners()
        self._events: list[SchedulerEvent] = []
        self._events_lock = threading.Lock()  # taken alone: any thread may report events
        self._index = RunIndex(self.runs_root)
        registry = state_dir() / "shared" / f"{_digest(str(self.outputs))}.json"
        if nodeset_launcher is None and host_shared:
            nodeset_launcher = SubprocessLauncher()
        self._shared = SharedNodesets(nodeset_launcher, registry, self._nodeset_changed)
        self._host_peaks: dict[str, int] = {}
        self._loading: dict[str, Job] = {}
        self._me = PidRef.current()
        self._next_scan = 0.0
        self._loop = SchedulerLoop(self.tick, self._between_ticks, self._pidfds, tick_interval)
        self._owner = new_owner(self)
        self._seen: dict[str, tuple[int, str | None]] = {}  # run_id -> (mtime, watch)
        self._next_sync = 0.0
        if restore:
            for ns in self._shared.restore():
                log.info("adopted shared nodeset %s at %s", ns.name, ns.hosted.url)
            self._claim_orphans()

    # =========================================================================================
    # lifecycle of the scheduler itself
    # =========================================================================================
    def start(self) -> JobScheduler:
        """Start the loop thread (ticks, episode events, deferred writes)."""
        revive(self._owner)
        self._loop.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop thread and give up ownership of this scheduler's runs.

        Runs keep running (their own sessions) and the queue stays on disk: the next
        scheduler on this outputs root (or one already running) takes them over.
        """
        self._loop.stop(timeout)
        retire(self._owner)
        self._writer.flush(budget_sec=60.0)
        self._gpu_probe.close()
        with self._lock:
            pending = [j.loading.pending_key for j in self._loading.values() if j.loading]
            children = [j.handle.proc for j in self._running.values()
                        if j.handle is not None and j.handle.proc is not None
                        and j.handle.proc.returncode is None]
        if pending:
            # Their jobs are still "queued" on disk and the next scheduler queues them
            # again; this process lives on, so its pending reservations would not die.
            with self._ledger.transaction() as txn:
                for key in pending:
                    txn.remove(key)
        for ns in self._shared.stop_unheld():
            # No tick will come to unload them: an idle model must not hold VRAM after
            # its scheduler has gone.
            log.info("unloaded idle shared nodeset %s on stop", ns.name)
        for proc in children:
            # Runs outlive the scheduler; whoever stays in this process still reaps them,
            # so no zombie is left when they end.
            threading.Thread(target=proc.wait, name=f"evaltui-reap-{proc.pid}",
                             daemon=True).start()

    @property
    def tick_interval(self) -> float:
        """Seconds between ticks when nothing nudges the loop."""
        return self._loop.interval

    @tick_interval.setter
    def tick_interval(self, value: float) -> None:
        self._loop.interval = value

    def __enter__(self) -> JobScheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def nudge(self) -> None:
        """Tick as soon as possible instead of at the next second."""
        self._loop.nudge()

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on run state changes, finished episodes, nodeset changes."""
        self._listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    # =========================================================================================
    # submit, cancel, resume
    # =========================================================================================
    def submit(self, spec: Mapping[str, Any]) -> tuple[str, RunState]:
        """Validate ``spec``, write its run dir and enqueue it; returns ``(run_id, queued)``.

        Raises SpecError (naming the field) before anything is written. Never spawns: the
        next tick does, at once if the machine has room.
        """
        _importable_workspace(spec)
        checked = validate_spec(spec)
        parts = nodeset_parts(checked.spec)
        estimate = self._calibration.estimate(checked.spec, parts, self._shared_keys())
        initial = "queued: admission at the next tick"
        run_dir = write_run(checked, self.outputs, record_extra={
            **_estimate_fields(estimate), "measured_peak_mb": None, "gpu": None,
            "waiting_reason": initial, "waiting_kind": None,
            "scheduler_pid": os.getpid(), "owner": str(self._owner)})
        record = read_json(run_dir / SCHEDULER_FILENAME)
        with self._lock:
            job = self._new_job(run_dir, record, checked.spec, RunState.QUEUED)
            job.estimate, job.estimate_version = estimate, self._estimate_version()
            self._queue.add(job)
            self._set_state(job, RunState.QUEUED, None)
        self._emit_pending()
        self.nudge()
        return job.run_id, RunState.QUEUED

    def cancel(self, run_id: str) -> RunState:
        """Cancel a queued or running run; returns its state right after the request.

        A queued job is cancelled at once. A running one gets SIGTERM on its process group
        and SIGKILL after ``cancel_grace_sec``; its state turns ``cancelled`` when it is
        gone (listen for the event, or ``wait``). A finished run is left as it is.
        """
        state: RunState
        with self._lock:
            job = self._jobs.get(run_id)
        if job is None:
            return self._cancel_foreign(run_id)  # takes the ledger lock: not under ours
        with self._lock:
            if job.state is RunState.QUEUED:
                self._queue.remove(job)
                job.set(cancel_requested_at=now_iso(), state=RunState.CANCELLED.value,
                        waiting_reason=None, waiting_kind=None)
                self._writer.write(job)
                self._set_state(job, RunState.CANCELLED, None)
                self._jobs.pop(run_id, None)
                state = job.state
            elif job.state.terminal or job.handle is None:
                state = job.state
            else:
                if not job.cancelling:
                    job.cancelling = True
                    job.set(cancel_requested_at=now_iso())
                    self._writer.write(job)
                    self._terminate_later(job.handle.ref)
                state = job.state
        self._emit_pending()
        return state

    def resume(self, run_id: str) -> RunState:
        """Re-run the episodes that are not ``ok`` of a finished run, in the same run dir.

        Episodes already ``ok`` are kept (their attempts too); the run is queued again.
        Raises RunNotFound, NotResumable (still active, or nothing to re-run) or SpecError
        (its spec.json no longer validates, e.g. an impl cannot be imported any more).
        """
        run_dir = self._run_dir(run_id)
        with self._lock:
            if run_id in self._jobs:
                raise NotResumable(f"run {run_id} is {self._jobs[run_id].state.value}")
        state = derive_run_state(run_dir)
        if state not in RESUMABLE:
            raise NotResumable(f"run {run_id} is {state.value}; only finished runs resume")
        try:
            spec_data = read_json(run_dir / "spec.json")
        except (OSError, ValueError) as exc:
            raise SpecError("spec.json", f"cannot read the run's spec: {exc}") from None
        _importable_workspace(spec_data)
        checked = validate_spec(spec_data)
        left = [i for i in checked.episode_indices if not _episode_ok(run_dir, i)]
        if not left:
            raise NotResumable(f"run {run_id}: every selected episode is ok already")
        parts = nodeset_parts(checked.spec)
        estimate = self._calibration.estimate(checked.spec, parts, self._shared_keys())
        with scheduler_record_lock(run_dir):
            state = derive_run_state(run_dir)  # again: another backend may have resumed it
            record = read_record(run_dir)
            if state not in RESUMABLE or record is None:
                raise NotResumable(f"run {run_id} is {state.value}; only finished runs resume")
            record.update(
                state=RunState.QUEUED.value, queued_at=now_iso(), admitted_at=None, pid=None,
                pid_create_time=None, reservation=None, gpu=None, cancel_requested_at=None,
                exit_code=None, finished_at=None, error=None, measured_peak_mb=None,
                measured_peak_ram_mb=None, resumed_at=now_iso(),
                resume_count=int(record.get("resume_count") or 0) + 1,
                waiting_reason="queued (resume): admission at the next tick", waiting_kind=None,
                scheduler_pid=os.getpid(), owner=str(self._owner), **_estimate_fields(estimate))
            # _DONE goes first: with it present the run would read as finished while it
            # re-runs. summary.json stays (the run rewrites it), so the UI keeps numbers.
            (run_dir / DONE_FILENAME).unlink(missing_ok=True)
            write_json_atomic(run_dir / SCHEDULER_FILENAME, record)
        with self._lock:
            job = self._new_job(run_dir, record, checked.spec, RunState.QUEUED)
            job.estimate, job.estimate_version = estimate, self._estimate_version()
            self._queue.add(job)
            self._set_state(job, RunState.QUEUED, state)
        self._emit_pending()
        self.nudge()
        return RunState.QUEUED

    def set_priority(self, run_id: str, priority: int) -> RunState:
        """Move a queued job in the queue by giving it another priority (-100..100).

        Raises RunNotFound, NotQueued (it started already) or ValueError (out of range).
        """
        if not isinstance(priority, int) or not -100 <= priority <= 100:
            raise ValueError(f"priority must be an integer in [-100, 100], got {priority!r}")
        self._run_dir(run_id)
        with self._lock:
            job = self._jobs.get(run_id)
            if job is None or job.state is not RunState.QUEUED or job.loading is not None:
                state = job.state.value if job is not None else "not queued here"
                raise NotQueued(f"run {run_id} is {state}; only a queued job changes priority")
            self._queue.remove(job)
            job.set(priority=priority)
            self._queue.add(job)
            self._writer.write(job)
        self.nudge()
        return RunState.QUEUED

    def wait(self, run_id: str, timeout: float | None = None) -> RunState:
        """Block until the run is in a terminal state, or ``timeout``; returns its state.

        A run this scheduler tracks is followed by its events (``start`` it first); any
        other run (another backend's) is read from disk twice a second.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                job = self._jobs.get(run_id)
                state = job.state if job is not None else self.get_run(run_id).state
                left = None if deadline is None else deadline - time.monotonic()
                if state.terminal or (left is not None and left <= 0):
                    return state
                self._changed.wait(left if job is not None else min(left or 0.5, 0.5))

    # =========================================================================================
    # status reads
    # =========================================================================================
    def get_run(self, run_id: str) -> RunInfo:
        """State, scheduler record and summary (without rows) of one run."""
        run_dir = self._run_dir(run_id)
        with self._lock:
            job = self._jobs.get(run_id)
            if job is not None:
                record = dict(job.record)
                state, wait = job.state, job.wait
        if job is None:
            info = self._index.read(run_id)
            if info is None:
                raise RunNotFound(run_id)
            return info
        summary = None
        if state is not RunState.QUEUED or (run_dir / SUMMARY_FILENAME).exists():
            try:
                summary = strip_rows(read_json(run_dir / SUMMARY_FILENAME))
            except (OSError, ValueError):
                summary = None
        reason = wait.reason if wait is not None else record.get("waiting_reason")
        return RunInfo(run_id, run_dir, state, record, summary,
                       reason if state is RunState.QUEUED else None)

    def list_runs(self, state: RunState | str | None = None) -> list[RunInfo]:
        """Every run under the outputs root, newest first, optionally of one state."""
        wanted = RunState(state) if state is not None else None
        out = []
        for run_id in self._index.run_ids():
            with self._lock:
                job = self._jobs.get(run_id)
                known = job.state if job is not None else None
            if wanted is not None and known is not None and known is not wanted:
                continue
            try:
                info = self.get_run(run_id)
            except RunNotFound:
                continue  # deleted while listing
            if wanted is None or info.state is wanted:
                out.append(info)
        return out

    def queue(self) -> list[QueuedJob]:
        """Queued jobs in admission order, each with its waiting_reason."""
        with self._lock:
            out = []
            for position, job in enumerate(self._queue):
                est = job.estimate
                wait = job.wait
                out.append(QueuedJob(
                    run_id=job.run_id, position=position, priority=job.priority,
                    queued_at=job.record.get("queued_at"),
                    waiting_reason=wait.reason if wait else str(job.record.get("waiting_reason")),
                    waiting_kind=wait.kind.value if wait else "new",
                    estimate_mb=est.vram_mb if est else 0, ram_estimate_mb=est.ram_mb if est else 0,
                    estimate_source=est.source if est else "unknown", exclusive=job.exclusive,
                    graph_name=_graph_name(job.spec)))
            return out

    def resources(self) -> ResourcesInfo:
        """Per-GPU total/used/free/reserved, host RAM/CPU, the ledger and the lock."""
        entries = self._ledger.entries()
        live = [r for r in entries if procs.alive(r.holder_pid, r.holder_create_time)]
        with self._probe_lock:
            snap = self._fresh_snapshot()
            acct = account(live, snap, self._rss)
        gpus = []
        views = {v.index: v for v in acct.gpus or ()}
        for g in snap.gpu.gpus:
            v = views.get(g.index)
            reserved = v.outstanding_mb if v else 0
            gpus.append(GpuInfo(g.index, g.name, g.total_mb, g.used_mb, g.free_mb, reserved,
                                g.free_mb - reserved, g.utilization_pct, v.runs if v else 0,
                                v.exclusive_run if v else None, g.processes))
        h = snap.host
        host = HostInfo(h.ram_total_mb, h.ram_available_mb, acct.host.outstanding_mb,
                        h.cpu_percent, h.cpu_count, h.load_avg_1m)
        return ResourcesInfo(snap.gpu.available, snap.gpu.reason, snap.gpu.fake, tuple(gpus),
                             host, tuple(live), self._ilock.current(), snap.taken_at)

    # =========================================================================================
    # interactive lock and shared nodesets
    # =========================================================================================
    def lock(self, owner: str, ttl_sec: float = 300.0) -> LockInfo:
        """Take (or extend) the machine-wide interactive lock; raises LockHeldError."""
        return self._ilock.acquire(owner, ttl_sec)

    def unlock(self, owner: str | None = None) -> bool:
        """Release the interactive lock (only ``owner``'s, unless None); admits at once."""
        released = self._ilock.release(owner)
        self.nudge()
        return released

    def nodesets(self) -> list[NodesetInfo]:
        """Shared nodesets hosted by this scheduler, with refcounts."""
        return [_nodeset_info(ns) for ns in self._shared.all()]

    def load_nodeset(self, name: str, impl: str, params: Mapping[str, Any] | None = None,
                     gpu: int | None = None) -> NodesetInfo:
        """Load a shared nodeset by hand; it stays loaded until ``unload_nodeset``."""
        params = dict(params or {})
        key = nodeset_key(impl, params)
        fresh = key not in self._shared.loaded_keys()
        ns = self._shared.load(name, impl, params, self._run_env(gpu), gpu)
        if fresh:  # reserved, so its memory is accounted to it and not to "someone else"
            ref = ns.hosted.ref
            with self._ledger.transaction() as txn:
                txn.add(Reservation(f"nodeset:{ns.name}", ref.pid, ref.create_time,
                                    os.getpid(), str(self.outputs), gpu,
                                    self._calibration.peak("vram", key) or 0, 0, False,
                                    time.time()))
        self._emit_pending()
        self.nudge()
        return _nodeset_info(ns)

    def unload_nodeset(self, name: str, force: bool = False) -> NodesetInfo:
        """Stop a shared nodeset (refused while runs use it, unless ``force``)."""
        ns = self._shared.unload(name, force=force)
        self._emit_pending()
        self.nudge()
        return _nodeset_info(ns)

    # =========================================================================================
    # the tick
    # =========================================================================================
    def tick(self) -> None:
        """Reap finished runs, then admit what fits; never raises for a resource problem."""
        with self._tick_lock:
            self._tick_no += 1
            self._calibration.refresh()
            self._reap()
            self._observe_started()
            self._finish_loading()
            for ns in self._shared.tick(self._tick_no):
                log.info("unloaded shared nodeset %s", ns.name)
                self._learn_host(ns)
            if len(self._queue) or self._running or self._shared.all():
                self._admit_and_sample()
        self._emit_pending()

    def _admit_and_sample(self) -> None:
        lock_reason = self._lock_reason()
        if len(self._queue) and lock_reason is None:
            with self._ledger.transaction() as txn:
                acct = self._account(txn.entries)
                self._sample(acct)
                self._admission(acct, txn)
            return
        if self._running or self._shared.all():
            self._sample(self._account(self._ledger.entries()))
        if lock_reason is not None:
            with self._lock:
                for job in self._queue:
                    if job.loading is None:  # admitted already: it only waits for its load
                        self._set_wait(job, Wait(job.run_id, WaitKind.LOCK, lock_reason))

    def _admission(self, acct: Accounting, txn: LedgerTxn) -> None:
        gpus = acct.gpus
        if gpus is not None and self._allowed_gpus is not None:
            gpus = tuple(g for g in gpus if g.index in self._allowed_gpus)
        with self._lock:
            jobs = [job for job in self._queue if job.loading is None]
            version = self._estimate_version()
            candidates = [self._candidate(job, version) for job in jobs]
            admits, waits = decide(candidates, gpus, acct.host, now=time.time(),
                                   claim_after_sec=self.claim_after_sec)
            for job in jobs:
                wait = waits.get(job.run_id)
                if wait is not None:
                    self._set_wait(job, wait)
            for admit in admits:
                job = self._jobs[admit.run_id]
                record = read_record(job.run_dir)
                if record is None or not self._still_ours(record):
                    self._drop(job)  # cancelled or taken over by another backend meanwhile
                    continue
                self._admit(job, admit.gpu, txn)

    def _candidate(self, job: Job, version: tuple[int, int]) -> Candidate:
        if job.estimate is None or job.estimate_version != version or job.candidate is None:
            if job.spec is not None:
                job.estimate = self._calibration.estimate(job.spec, job.parts,
                                                          self._shared_keys())
            job.estimate_version = version
            est = job.estimate
            job.candidate = Candidate(
                job.run_id, est.vram_mb if est else 0, est.ram_mb if est else 0, job.exclusive,
                est.needs_gpu if est else False, job.queued_epoch)
        return job.candidate

    def _admit(self, job: Job, gpu: int | None, txn: LedgerTxn) -> None:
        """Start an admitted job (ledger lock and self._lock held).

        If a shared nodeset it uses is not hosted yet, loading it may take minutes: that
        happens on a loader thread under a *pending* reservation held by this scheduler,
        and the run is spawned by the tick after the load (``_finish_loading``). The job
        stays ``queued`` on disk meanwhile, so a crash then re-queues it rather than losing
        it. Otherwise the run is spawned now.
        """
        est = job.estimate
        vram, ram = (est.vram_mb, est.ram_mb) if est else (0, 0)
        env = self._run_env(gpu)
        missing = []
        for part in self._shared_parts(job):
            if part.key in self._shared.loaded_keys():
                self._attach(job, self._shared.acquire(job.run_id, part, env, gpu), part)
            else:
                missing.append(part)
        if not missing:
            self._spawn(job, gpu, vram, ram, txn, fresh=())
            return
        me = self._me
        pending = Reservation(job.run_id, me.pid, me.create_time, os.getpid(),
                              str(self.outputs), gpu, vram, ram, job.exclusive, time.time(),
                              pending=True)
        txn.add(pending)
        job.loading = Loading(gpu, pending.key)
        self._loading[job.run_id] = job
        where = f" on GPU{gpu}" if gpu is not None else ""
        names = ", ".join(p.name for p in missing)
        self._set_wait(job, Wait(job.run_id, WaitKind.LOADING,
                                 f"admitted{where}; loading shared nodeset {names}"))
        threading.Thread(target=self._load_shared, args=(job, missing, env, gpu),
                         name=f"evaltui-load-{job.run_id}", daemon=True).start()

    def _load_shared(self, job: Job, parts: list[NodesetPart], env: Mapping[str, str],
                     gpu: int | None) -> None:
        """Loader thread: host the job's missing shared nodesets, then nudge the tick."""
        loading = job.loading
        assert loading is not None
        try:
            for part in parts:
                ns = self._shared.acquire(job.run_id, part, env, gpu)
                loading.started.append((part, ns))
        except Exception as exc:  # reported on the job; the scheduler carries on
            loading.error = f"cannot host shared nodeset: {exc}"
        finally:
            loading.done = True
            self.nudge()

    def _finish_loading(self) -> None:
        """Spawn the runs whose shared nodesets finished loading (or fail them)."""
        with self._lock:
            done = [j for j in self._loading.values() if j.loading and j.loading.done]
        if not done:
            return
        with self._ledger.transaction() as txn, self._lock:
            for job in done:
                loading = job.loading
                assert loading is not None
                job.loading = None
                self._loading.pop(job.run_id, None)
                txn.remove(loading.pending_key)
                if job.state is not RunState.QUEUED:  # cancelled while loading
                    self._shared.release(job.run_id, self._tick_no)
                    continue
                if loading.error is not None:
                    self._fail_unstarted(job, loading.error)
                    continue
                for part, ns in loading.started:
                    self._attach(job, ns, part)
                est = job.estimate
                vram, ram = (est.vram_mb, est.ram_mb) if est else (0, 0)
                self._spawn(job, loading.gpu, vram, ram, txn, fresh=loading.started)

    def _spawn(self, job: Job, gpu: int | None, vram: int, ram: int, txn: LedgerTxn,
               fresh: Sequence[tuple[NodesetPart, SharedNodeset]]) -> None:
        """Spawn the run and reserve for it (ledger lock and self._lock held).

        Hosts started for this job get their own reservation (their share of the
        estimate), which outlives the run if the nodeset stays loaded.
        """
        for part, ns in fresh:
            mb = job.estimate.per_nodeset_mb.get(part.name, 0) if job.estimate else 0
            ref = ns.hosted.ref
            txn.add(Reservation(f"nodeset:{ns.name}", ref.pid, ref.create_time, os.getpid(),
                                str(self.outputs), gpu, mb, 0, False, time.time()))
            vram = max(0, vram - mb)
        if job.spec is not None:
            # Rewritten at every start: a resumed run must not find the URLs of hosts that
            # served its earlier attempt. spec.json keeps only what the client gave.
            write_json_atomic(job.run_dir / "shared_urls.json",
                              {**job.spec.shared_urls, **job.shared_urls})
        job.set(state=RunState.STARTING.value, admitted_at=now_iso(), gpu=gpu,
                reservation={"gpu": gpu, "mb": vram, "ram_mb": ram},
                waiting_reason=None, waiting_kind=None, scheduler_pid=os.getpid())
        # On disk before the spawn: a crash in between reads as aborted (resumable), never
        # as a job still queued that a restarted scheduler would start a second time.
        self._writer.write(job)
        try:
            proc = self._spawner(job.run_dir, self._run_env(gpu))
        except OSError as exc:
            self._fail_unstarted(job, f"cannot start the run subprocess: {exc}")
            return
        ref = spawned_ref(proc)
        txn.add(Reservation(job.run_id, ref.pid, ref.create_time, os.getpid(),
                            str(self.outputs), gpu, vram, ram, job.exclusive, time.time()))
        job.reservation_key = holder_key(ref.pid, ref.create_time, job.run_id)
        job.set(pid=ref.pid, pid_create_time=ref.create_time)
        self._writer.write(job)
        job.handle = RunHandle(ref, proc)
        job.wait = None
        self._queue.remove(job)
        self._running[job.run_id] = job
        self._episodes.watch(job.run_id, job.run_dir)
        self._set_state(job, RunState.STARTING, RunState.QUEUED)

    def _shared_parts(self, job: Job) -> list[NodesetPart]:
        """The job's shared nodesets this scheduler hosts (not given a URL by the spec)."""
        if not self._shared.enabled or job.spec is None:
            return []
        return [p for p in job.parts
                if p.parallelism == "shared" and p.name not in job.spec.shared_urls]

    def _attach(self, job: Job, ns: SharedNodeset, part: NodesetPart) -> None:
        if ns.name not in job.shared:
            job.shared.append(ns.name)
        job.shared_urls[part.name] = ns.hosted.url

    def _fail_unstarted(self, job: Job, error: str) -> None:
        log.error("run %s: %s", job.run_id, error)
        self._shared.release(job.run_id, self._tick_no)
        job.set(state=RunState.FAILED.value, error=error, finished_at=now_iso(),
                waiting_reason=None, waiting_kind=None)
        self._writer.write(job)
        self._queue.remove(job)
        self._jobs.pop(job.run_id, None)
        self._set_state(job, RunState.FAILED, RunState.QUEUED)

    # ---- finished runs --------------------------------------------------------------------
    def _reap(self) -> None:
        with self._lock:
            done = [j for j in self._running.values() if j.handle is not None
                    and j.handle.exited()]
        for job in done:
            self._finalize(job)

    def _finalize(self, job: Job) -> None:
        assert job.handle is not None
        code = job.handle.finish()
        with self._lock:
            job.set(finished_at=now_iso(), measured_peak_mb=job.peak_vram_mb,
                    measured_peak_ram_mb=round(job.peak_ram_mb) or None)
            if code is not None:
                job.set(exit_code=code)
        self._writer.write(job)  # the exit code on disk first: the state derives from it
        state = derive_run_state(job.run_dir)
        if not state.terminal:  # its PID is dead: only a race with the files gets here
            state = RunState.ABORTED
        with self._lock:
            job.set(state=state.value)
        self._writer.write(job)  # on disk before anyone is told (wait() returns, events)
        with self._lock:
            self._running.pop(job.run_id, None)
            self._jobs.pop(job.run_id, None)
            self._shared.release(job.run_id, self._tick_no)
            self._report(*self._episodes.unwatch(job.run_id))
            self._set_state(job, state, job.state)
        if state is RunState.DONE:
            self._learn(job)

    def _learn(self, job: Job) -> None:
        """Calibrate the nodesets that ran inside the run from its measured peaks.

        Only from runs sampled often enough while running: a run too short to be seen at
        its peak would teach an estimate lower than its real need.
        """
        if job.samples < MIN_CALIBRATION_SAMPLES:
            return
        in_run = [p for p in job.parts
                  if not (p.parallelism == "shared" and p.name in job.shared)]
        if job.peak_vram_mb is not None:
            self._calibration.record_run("vram", in_run, job.peak_vram_mb)
        if job.peak_ram_mb > 0:
            self._calibration.record_run("ram", in_run, job.peak_ram_mb)

    def _learn_host(self, ns: SharedNodeset) -> None:
        """A host ran one nodeset alone: its measured peak is that nodeset's, exactly."""
        peak = self._host_peaks.pop(ns.key, None)
        if peak is not None:
            part = NodesetPart(ns.name, ns.key, ns.impl, ns.params, "shared", 1)
            self._calibration.record_nodeset("vram", part, peak)

    def _observe_started(self) -> None:
        with self._lock:
            for job in self._running.values():
                if job.state is RunState.STARTING and os.path.exists(
                        os.path.join(job.run_dir, SUMMARY_FILENAME)):
                    job.set(state=RunState.RUNNING.value)
                    self._writer.schedule(job)
                    self._set_state(job, RunState.RUNNING, RunState.STARTING)

    # ---- measuring --------------------------------------------------------------------------
    def _fresh_snapshot(self) -> ResourceSnapshot:
        now = time.monotonic()
        if self._snapshot is None or now - self._snapshot_at >= self.probe_interval:
            self._snapshot = ResourceSnapshot(self._gpu_probe.read(), self._host_probe.read(),
                                              time.time())
            self._snapshot_at = now
        return self._snapshot

    def _account(self, entries: list[Reservation]) -> Accounting:
        # A snapshot up to probe_interval old is safe here: free memory and per-process
        # usage come from the same reading, so a reservation is never both missing from
        # "used" and discounted as "already used" (see accounting.py).
        with self._probe_lock:
            return account(entries, self._fresh_snapshot(), self._rss)

    def _sample(self, acct: Accounting) -> None:
        with self._lock:
            for job in self._running.values():
                usage = acct.usage.get(job.reservation_key or "")
                if usage is None:
                    continue
                if job.state is RunState.RUNNING and acct.taken_at != job.last_sample_at:
                    job.samples += 1
                    job.last_sample_at = acct.taken_at
                changed = False
                if usage.vram_mb is not None and usage.vram_mb > (job.peak_vram_mb or -1):
                    job.peak_vram_mb, changed = usage.vram_mb, True
                if usage.ram_mb > job.peak_ram_mb:
                    job.peak_ram_mb = usage.ram_mb
                if changed:
                    job.set(measured_peak_mb=job.peak_vram_mb)
                    self._writer.schedule(job)
        for ns in self._shared.all():
            ref = ns.hosted.ref
            usage = acct.usage.get(holder_key(ref.pid, ref.create_time, f"nodeset:{ns.name}"))
            if usage is not None and usage.vram_mb is not None:
                self._host_peaks[ns.key] = max(self._host_peaks.get(ns.key, 0), usage.vram_mb)

    def _lock_reason(self) -> str | None:
        if self._lock_check is not None:
            try:
                reason = self._lock_check()
            except Exception:
                log.exception("lock_check failed; treating the lock as held")
                reason = "interactive lock check failed (see the log)"
            if reason:
                return reason
        held = self._ilock.current()
        return held.reason if held is not None else None

    # ---- cancel -----------------------------------------------------------------------------
    def _terminate_later(self, ref: PidRef) -> None:
        def run() -> None:
            terminate_group(ref, self.cancel_grace_sec)
            self.nudge()

        threading.Thread(target=run, name=f"evaltui-cancel-{ref.pid}", daemon=True).start()

    def _cancel_foreign(self, run_id: str) -> RunState:
        """Cancel a run this scheduler does not track (another backend's, or ``evaltui eval``'s).

        Under the ledger lock, which every admission holds from its last look at the
        record to the spawn: the owner either has not started the run (and will see the
        request) or has recorded its PID (and the run gets the signal).
        """
        run_dir = self._run_dir(run_id)
        with self._ledger.transaction(), scheduler_record_lock(run_dir):
            state = derive_run_state(run_dir)
            if state.terminal:
                return state
            record = read_record(run_dir) or {}
            record["cancel_requested_at"] = now_iso()
            if state is RunState.QUEUED:
                record["state"] = RunState.CANCELLED.value
            write_json_atomic(run_dir / SCHEDULER_FILENAME, record)
        ref = record_ref(record)
        if state in (RunState.STARTING, RunState.RUNNING) and ref is not None:
            self._terminate_later(ref)
        return derive_run_state(run_dir)

    # ---- restore and claim ------------------------------------------------------------
    def _claim_orphans(self) -> None:
        """Take over the queued and live runs of the outputs root that no live scheduler
        owns: all of them at start, later those whose owner died (checked every few s)."""
        wanted: list[tuple[tuple[int, float, str], Path]] = []
        for run_id in self._index.run_ids():
            with self._lock:
                if run_id in self._jobs:
                    continue
            run_dir = self.runs_root / run_id
            try:
                mtime = (run_dir / SCHEDULER_FILENAME).stat().st_mtime_ns
            except OSError:
                continue
            seen = self._seen.get(run_id)
            if seen is not None and seen[0] == mtime:
                watch = seen[1]
                if watch is None or (watch and owner_alive(watch)):
                    continue  # unchanged: nothing to claim there, or its owner lives
            record = read_record(run_dir)
            found = classify(run_dir, record) if record is not None else None
            # What to re-check while the file does not change: None = nothing, the owner
            # (claim when it dies), "" = no owner (claim when its grace period is over).
            watch = None if found is None or record is None else str(record.get("owner") or "")
            self._seen[run_id] = (mtime, watch)
            if found is not None and record is not None and self._may_claim(record):
                wanted.append((queue_order(record, run_id), run_dir))
        if wanted:
            self._claim([run_dir for _, run_dir in sorted(wanted)])

    def _may_claim(self, record: Mapping[str, Any]) -> bool:
        owner = record.get("owner")
        if owner is None and record.get("pid") is None:
            # Written by a script (``evaltui eval``: prepare, then spawn at once): an orphan
            # only if it stayed queued for a while, else both might start it.
            return time.time() - parse_iso(record.get("queued_at"), 0.0) > UNOWNED_GRACE_SEC
        return owner == str(self._owner) or not owner_alive(owner)

    def _claim(self, run_dirs: list[Path]) -> None:
        """Own the runs (under the ledger lock: one claimant wins), queue or adopt them."""
        claimed: list[Claimed] = []
        with self._ledger.transaction() as txn:
            for run_dir in run_dirs:
                with scheduler_record_lock(run_dir):
                    record = read_record(run_dir)
                    found = classify(run_dir, record) if record is not None else None
                    if found is None or record is None or not self._may_claim(record):
                        continue
                    record["owner"] = str(self._owner)
                    write_json_atomic(run_dir / SCHEDULER_FILENAME, record)
                claimed.append(Claimed(run_dir, record, found))
            with self._lock:
                adopted = [self._take(c, txn) for c in claimed]
        if any(c.found is Found.LIVE for c in claimed):
            self._shared.expire_unheld(self._tick_no)
        for job in adopted:
            if job is not None and job.record.get("cancel_requested_at") is not None \
                    and job.handle is not None:
                # The scheduler that asked died before the SIGKILL deadline: finish the job.
                job.cancelling = True
                self._terminate_later(job.handle.ref)

    def _take(self, claimed: Claimed, txn: LedgerTxn) -> Job | None:
        """Queue a claimed queued run, or adopt a live one; returns an adopted job."""
        run_dir, record = claimed.run_dir, claimed.record
        spec = load_spec(run_dir)
        if claimed.found is Found.QUEUED:
            self._queue.add(self._new_job(run_dir, record, spec, RunState.QUEUED))
            return None
        ref = record_ref(record)
        assert ref is not None
        state = RunState.RUNNING if (run_dir / SUMMARY_FILENAME).exists() else RunState.STARTING
        job = self._new_job(run_dir, record, spec, state)
        job.handle = RunHandle(ref)
        job.reservation_key = holder_key(ref.pid, ref.create_time, job.run_id)
        job.peak_vram_mb = record.get("measured_peak_mb")
        self._running[job.run_id] = job
        self._episodes.watch(job.run_id, run_dir)
        self._rereserve(job, record, ref, txn)
        self._rehold_shared(job)
        return job

    def _sync_queue(self) -> None:
        """Drop queued jobs that someone else cancelled or took over (checked every few s)."""
        with self._lock:
            jobs = [j for j in self._queue if j.loading is None]
        gone = []
        for job in jobs:
            record = read_record(job.run_dir)
            if record is None or not self._still_ours(record):
                gone.append(job)
        if gone:
            with self._lock:
                for job in gone:
                    self._drop(job)

    def _still_ours(self, record: Mapping[str, Any]) -> bool:
        return (record.get("state") == RunState.QUEUED.value
                and record.get("cancel_requested_at") is None and record.get("pid") is None
                and record.get("owner") == str(self._owner))

    def _drop(self, job: Job) -> None:
        """Forget a queued job that is no longer ours to run (self._lock held)."""
        self._queue.remove(job)
        self._jobs.pop(job.run_id, None)
        self._set_state(job, derive_run_state(job.run_dir), RunState.QUEUED)

    def _rereserve(self, job: Job, record: dict[str, Any], ref: PidRef, txn: LedgerTxn) -> None:
        key = holder_key(ref.pid, ref.create_time, job.run_id)
        if txn.get(key) is not None:
            return
        res = record.get("reservation") or {}
        txn.add(Reservation(job.run_id, ref.pid, ref.create_time, os.getpid(), str(self.outputs),
                            res.get("gpu"), int(res.get("mb") or 0), int(res.get("ram_mb") or 0),
                            job.exclusive, time.time()))

    def _rehold_shared(self, job: Job) -> None:
        try:
            urls = read_json(job.run_dir / "shared_urls.json")
        except (OSError, ValueError):
            return
        for url in (urls.values() if isinstance(urls, dict) else ()):
            if isinstance(url, str) and self._shared.hold(job.run_id, url):
                ns = next(n for n in self._shared.all() if n.hosted.url == url)
                if ns.name not in job.shared:
                    job.shared.append(ns.name)

    # ---- between ticks ------------------------------------------------------------------
    def _between_ticks(self) -> None:
        """Episode events (every half second), other backends' changes to the queue (every
        few seconds) and deferred scheduler.json writes."""
        now = time.monotonic()
        if now >= self._next_scan:
            self._next_scan = now + _EPISODE_SCAN_SEC
            with self._lock:
                self._report(*self._episodes.scan())
            self._emit_pending()
        if now >= self._next_sync:
            self._next_sync = now + self.disk_sync_sec
            self._sync_queue()
            self._claim_orphans()
            self._emit_pending()
        self._writer.flush()

    def _pidfds(self) -> set[int]:
        with self._lock:
            return {j.handle.pidfd for j in self._running.values()
                    if j.handle is not None and j.handle.pidfd is not None}

    # ---- helpers ------------------------------------------------------------------------
    def _new_job(self, run_dir: Path, record: dict[str, Any], spec: JobSpec | None,
                 state: RunState) -> Job:
        self._seq += 1
        job = Job(run_dir.name, run_dir, record, spec,
                  nodeset_parts(spec) if spec is not None else [], self._seq, state)
        self._jobs[job.run_id] = job
        return job

    def _set_state(self, job: Job, state: RunState, previous: RunState | None) -> None:
        job.state = state
        self._report(RunStateChanged(job.run_id, state, previous, time.time()))
        self._changed.notify_all()

    def _report(self, *events: SchedulerEvent) -> None:
        with self._events_lock:
            self._events.extend(events)

    def _set_wait(self, job: Job, wait: Wait) -> None:
        job.wait = wait
        if job.record.get("waiting_kind") != wait.kind:  # a StrEnum: equal to its value
            # On disk only when the kind of reason changes: the live text (numbers that
            # move every second) is served by queue(); see RecordWriter.
            job.set(waiting_reason=wait.reason, waiting_kind=str(wait.kind))
            self._writer.schedule(job)

    def _emit_pending(self) -> None:
        with self._events_lock:
            events, self._events = self._events, []
        for event in events:
            self._listeners.emit(event)

    def _estimate_version(self) -> tuple[int, int]:
        return (self._calibration.version, self._shared.version)

    def _shared_keys(self) -> set[str]:
        return self._shared.loaded_keys() if self._shared.enabled else set()

    def _run_env(self, gpu: int | None) -> dict[str, str]:
        env = dict(os.environ)
        env.pop(fakegpu.FAKE_GPU_INDEX_ENV, None)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
            if self._fake:
                env[fakegpu.FAKE_GPU_INDEX_ENV] = str(gpu)
            else:
                env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # NVML numbers GPUs in PCI order
        return env

    def _run_dir(self, run_id: str) -> Path:
        if not is_run_id(run_id):
            raise RunNotFound(run_id)
        run_dir = self.runs_root / run_id
        if not run_dir.is_dir():
            raise RunNotFound(run_id)
        return run_dir

    def _nodeset_changed(self, ns: SharedNodeset, loaded: bool) -> None:
        self._report(NodesetsChanged(ns.name, loaded, ns.refcount, time.time()))


# ---- module helpers ---------------------------------------------------------------------------


def _estimate_fields(estimate: Any) -> dict[str, Any]:
    return {"estimate_mb": estimate.vram_mb, "ram_estimate_mb": estimate.ram_mb,
            "estimate_source": estimate.source}


def _importable_workspace(spec: Any) -> None:
    """Put the spec's workspace on sys.path so its nodesets import during validation."""
    workspace = spec.get("active_workspace_dir") if isinstance(spec, Mapping) else None
    if isinstance(workspace, str) and workspace and workspace not in sys.path:
        sys.path.insert(0, workspace)


def _episode_ok(run_dir: Path, index: int) -> bool:
    try:
        row = read_json(episode_dir(run_dir, index) / "episode.json")
    except (OSError, ValueError):
        return False
    return isinstance(row, dict) and row.get("status") == EpisodeStatus.OK.value


def _graph_name(spec: JobSpec | None) -> str | None:
    if spec is None:
        return None
    name = spec.eval.graph_name or spec.graph.get("name")
    return name if isinstance(name, str) else None


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _nodeset_info(ns: SharedNodeset) -> NodesetInfo:
    return NodesetInfo(ns.name, ns.key, ns.impl, dict(ns.params), ns.hosted.url,
                       ns.hosted.ref.pid, ns.origin, ns.refcount, tuple(sorted(ns.holders)),
                       ns.gpu, ns.loaded_at)


_visible_gpu_indices = visible_gpu_indices  # the name evaltui.scheduler.admits imports
