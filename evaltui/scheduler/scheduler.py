"""JobScheduler: the façade the API, the TUI and the commands use (DESIGN §6).

The scheduler keeps only a queue entry, a process handle and refcounts per run; each
run's state lives in its run dir. ``submit`` validates and writes the run dir and
enqueues; ``tick`` (once a second on the scheduler's thread, and at once when nudged by a
submit or a run's exit) reaps finished runs, then admits queued jobs and waiting admit
entries (``evaltui run``) against measured resources minus the machine-wide ledger's
reservations, spawning each admitted run in its own session. A new scheduler on the
same outputs root takes over the queue, the running runs and the admit entries from
disk, so killing or restarting it never kills a run (unless the spec asked for
``tie_to_backend``). Several live schedulers may share an outputs root: each run has
one owner (ownership.py), and any of them can cancel any run.

The work is done by parts on one :class:`~evaltui.scheduler.core.Core`: lifecycle.py,
starting.py, claims.py, sampling.py, admits.py, ticking.py, reads.py.

Threads: the caller's (submit, cancel, reads), the scheduler loop (``start``/``stop``:
ticks, episode scans, deferred record writes, other backends' changes), one short-lived
thread per cancel of a running run and one per shared nodeset being loaded. Admission and
spawning happen on the loop thread: a run with ``tie_to_backend`` is tied to the thread
that spawned it (PR_SET_PDEATHSIG), and that thread lives until ``stop``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from evaltui.contract.spec import JobSpec
from evaltui.contract.states import RunState
from evaltui.contract.views import Nodeset, QueueEntry, Resources, Run
from evaltui.scheduler.admission.calibration import Calibration, nodeset_key
from evaltui.scheduler.admission.ledger import Ledger
from evaltui.scheduler.admission.resources import GpuProbe, HostProbe, make_gpu_probe
from evaltui.scheduler.admission.sampling import Sampler
from evaltui.scheduler.admits.queue import AdmitQueue
from evaltui.scheduler.core import Core, NotQueued, NotResumable, RunNotFound
from evaltui.scheduler.events import Listener
from evaltui.scheduler.lock import InteractiveLock, LockInfo
from evaltui.scheduler.loop import SchedulerLoop
from evaltui.scheduler.reads import Reads, nodeset_view
from evaltui.scheduler.runs.claims import Claims
from evaltui.scheduler.runs.lifecycle import Lifecycle, Submitted
from evaltui.scheduler.runs.ownership import retire, revive
from evaltui.scheduler.runs.starting import Spawner, Starter, default_spawner
from evaltui.scheduler.shared.nodesets import NodesetLauncher
from evaltui.scheduler.ticking import Ticker

__all__ = ["JobScheduler", "NotQueued", "NotResumable", "RunNotFound", "Spawner",
           "default_spawner"]

log = logging.getLogger(__name__)

_EPISODE_SCAN_SEC = 0.5


class JobScheduler:
    """Queue, admission and lifecycle of eval runs (and admit entries) under one outputs root."""

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
        self._core = c = Core(
            outputs, gpu_probe=gpu_probe or make_gpu_probe(), host_probe=host_probe,
            ledger=ledger, calibration=calibration, interactive_lock=interactive_lock,
            lock_check=lock_check, nodeset_launcher=nodeset_launcher,
            host_shared=host_shared, probe_interval=probe_interval,
            cancel_grace_sec=cancel_grace_sec, claim_after_sec=claim_after_sec,
            disk_sync_sec=disk_sync_sec, owner_of=self)
        self.outputs, self.runs_root = c.outputs, c.runs_root
        self._sampler = Sampler(c)
        self._lifecycle = Lifecycle(c, self._sampler.learn)
        self._starter = Starter(c, spawner)
        self._claims = Claims(c)
        self.admits = AdmitQueue(c)
        """Admit entries of ``evaltui run`` (the API's ``/admits`` routes)."""
        self._ticker = Ticker(c, self._lifecycle, self._starter, self._claims, self._sampler,
                              self.admits)
        self._reads = Reads(c, self._sampler, self.admits)
        self._loop = SchedulerLoop(self.tick, self._between_ticks, self._pidfds, tick_interval)
        c.nudge = self._loop.nudge
        self._next_scan = self._next_sync = 0.0
        if restore:
            for ns in c.shared.restore():
                log.info("adopted shared nodeset %s at %s", ns.name, ns.hosted.url)
            self._claims.claim_orphans()
            self.admits.claim_orphans()

    # ---- the scheduler itself -----------------------------------------------------------
    def start(self) -> JobScheduler:
        """Start the loop thread (ticks, episode events, deferred writes)."""
        revive(self._core.owner)
        self._loop.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop thread and give up ownership of this scheduler's runs.

        Runs keep running (their own sessions) and the queue stays on disk: the next
        scheduler on this outputs root (or one already running) takes them over.
        """
        c = self._core
        self._loop.stop(timeout)
        retire(c.owner)
        c.writer.flush(budget_sec=60.0)
        c.gpu_probe.close()
        self._starter.release_pending()
        with c.lock:
            children = [j.handle.proc for j in c.running.values()
                        if j.handle is not None and j.handle.proc is not None
                        and j.handle.proc.returncode is None]
        for ns in c.shared.stop_unheld():
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
        self._core.listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._core.listeners.remove(listener)

    def tick(self) -> None:
        """Reap finished runs, then admit what fits; never raises for a resource problem."""
        self._ticker.tick()

    # ---- runs ---------------------------------------------------------------------------
    def submit(self, spec: JobSpec | Mapping[str, Any]) -> Submitted:
        """Validate ``spec``, write its run dir and enqueue it; returns ``(run_id, queued)``
        with the validation's ``warnings`` (a :class:`Submitted`).

        Raises SpecError (naming the field) before anything is written. Never spawns: the
        next tick does, at once if the machine has room.
        """
        return self._lifecycle.submit(spec)

    def cancel(self, run_id: str) -> RunState:
        """Cancel a queued or running run; returns its state right after the request.

        A queued job is cancelled at once. A running one gets SIGTERM on its process group
        and SIGKILL after ``cancel_grace_sec``; its state turns ``cancelled`` when it is
        gone (listen for the event, or ``wait``). A finished run is left as it is.
        """
        return self._lifecycle.cancel(run_id)

    def resume(self, run_id: str, more: int | None = None) -> RunState:
        """Re-run the episodes that are not ``ok`` of a finished run, in the same run dir.

        Episodes already ``ok`` are kept (their attempts too); the run is queued again.
        ``more`` (a run stopped by its rule): deal that many more episodes of its order past
        the stop, 0 to the end. Raises RunNotFound, NotResumable (still active, or nothing
        to re-run) or SpecError (its spec.json no longer validates, e.g. an impl cannot be
        imported any more).
        """
        return self._lifecycle.resume(run_id, more)

    def set_priority(self, run_id: str, priority: int) -> RunState:
        """Move a queued job in the queue by giving it another priority (-100..100).

        Raises RunNotFound, NotQueued (it started already) or ValueError (out of range).
        """
        return self._lifecycle.set_priority(run_id, priority)

    def wait(self, run_id: str, timeout: float | None = None) -> RunState:
        """Block until the run is in a terminal state, or ``timeout``; returns its state.

        A run this scheduler tracks is followed by its events (``start`` it first); any
        other run (another backend's) is read from disk twice a second.
        """
        return self._lifecycle.wait(run_id, timeout, lambda rid: self.get_run(rid).state)

    # ---- reads --------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        """State, scheduler record and summary (without rows) of one run."""
        return self._reads.get_run(run_id)

    def list_runs(self, state: RunState | str | None = None) -> list[Run]:
        """Every run under the outputs root, newest first, optionally of one state."""
        return self._reads.list_runs(state)

    def queue(self) -> list[QueueEntry]:
        """Queued runs and waiting admit entries (``kind``) in admission order, each with
        its waiting_reason."""
        return self._reads.queue()

    def resources(self) -> Resources:
        """Per-GPU total/used/free/reserved, host RAM/CPU, the ledger and the lock."""
        return self._reads.resources()

    # ---- interactive lock and shared nodesets -------------------------------------------
    def lock(self, owner: str, ttl_sec: float = 300.0) -> LockInfo:
        """Take (or extend) the machine-wide interactive lock; raises LockHeldError."""
        return self._core.ilock.acquire(owner, ttl_sec)

    def unlock(self, owner: str | None = None) -> bool:
        """Release the interactive lock (only ``owner``'s, unless None); admits at once."""
        released = self._core.ilock.release(owner)
        self.nudge()
        return released

    def nodesets(self) -> list[Nodeset]:
        """Shared nodesets hosted by this scheduler, with refcounts."""
        return self._reads.nodesets()

    def load_nodeset(self, name: str, impl: str, params: Mapping[str, Any] | None = None,
                     gpu: int | None = None) -> Nodeset:
        """Load a shared nodeset by hand; it stays loaded until ``unload_nodeset``."""
        c = self._core
        params = dict(params or {})
        key = nodeset_key(impl, params)
        fresh = key not in c.shared.loaded_keys()
        ns = c.shared.load(name, impl, params, c.run_env(gpu), gpu)
        if fresh:  # reserved, so its memory is accounted to it and not to "someone else"
            ref = ns.hosted.ref
            with c.ledger.transaction() as txn:
                txn.add(c.ledger_entry(f"nodeset:{ns.name}", ref, gpu=gpu,
                                       vram_mb=c.calibration.peak("vram", key) or 0))
        c.emit_pending()
        self.nudge()
        return nodeset_view(ns)

    def unload_nodeset(self, name: str, force: bool = False) -> Nodeset:
        """Stop a shared nodeset (refused while runs use it, unless ``force``)."""
        ns = self._core.shared.unload(name, force=force)
        self._core.emit_pending()
        self.nudge()
        return nodeset_view(ns)

    @property
    def calibration(self) -> Calibration:
        """What the scheduler has learnt of the nodesets' memory."""
        return self._core.calibration

    # ---- the loop's other work ----------------------------------------------------------
    def _between_ticks(self) -> None:
        """Episode events (every half second), other backends' changes to the queue (every
        few seconds) and deferred scheduler.json writes."""
        c = self._core
        now = time.monotonic()
        if now >= self._next_scan:
            self._next_scan = now + _EPISODE_SCAN_SEC
            with c.lock:
                c.report(*c.episodes.scan())
            c.emit_pending()
        if now >= self._next_sync:
            self._next_sync = now + c.disk_sync_sec
            self._claims.sync_queue()
            self._claims.claim_orphans()
            self.admits.claim_orphans()
            c.emit_pending()
        c.writer.flush()

    def _pidfds(self) -> set[int]:
        with self._core.lock:
            return {j.handle.pidfd for j in self._core.running.values()
                    if j.handle is not None and j.handle.pidfd is not None}
