"""EnvWorkerPool: K worker subprocesses fed from one episode queue (DESIGN §1, §5).

Dealing is dynamic: an idle worker gets the next index from a single queue, so a long
episode never holds other workers idle and no episode is dealt twice unless retried.
While plenty is queued (more than two a worker besides the one dealt), a busy worker is
also dealt one episode *ahead*: it waits in the worker's pipe and starts the moment the
episode before it ends, so the worker never idles through its result's round trip to
the run (0.4-1.3 ms an episode here; a GoToLocal episode is ~3 ms). Near the end of the
queue nothing is dealt ahead, so the last episodes still go to whichever worker is free.
An episode dealt ahead that never started -- its worker died, was killed, raised in the
episode before it, or was cancelled -- goes back to the front of the queue uncounted.
The pool owns its workers (``start``/``close``); they are forks of a
:class:`~evaltui.engine.zygote.WorkerZygote` (given, or started by the pool), so K of
them start in milliseconds. It runs from one thread -- the thread that started the
zygote, since the zygote's PR_SET_PDEATHSIG is tied to it.

Faults stay with their episode (docs/pool.md, "Faults and retries"): a worker that dies,
hangs in a step (``hung_step_sec``: its log stopped growing, :mod:`.watchdog`) or raises
is replaced, its episode recorded ``error``/``timeout`` and re-queued up to
``max_episode_retries`` times; a dead nodeset host is restarted at its URL; a dead zygote
is replaced. Cancel (``stop`` set, e.g. by SIGTERM): dealing stops, busy workers end
their episode ``cancelled`` at the next step boundary, and those still busy after
``cancel_grace_sec`` are SIGKILLed.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from evaltui.diskfull import DISK
from evaltui.engine.dealqueue import DealQueue
from evaltui.engine.hostprocess import HostProcess
from evaltui.engine.loop import EpisodeOutcome
from evaltui.engine.oomkills import OOM_KILLED, OomKills
from evaltui.engine.poolslot import WorkerSlot, tell
from evaltui.engine.recorder import Recorder
from evaltui.engine.worker import WorkerConfig
from evaltui.engine.zygote import ForkedChild, WorkerZygote, ZygoteError
from evaltui.states import EpisodeStatus

WAIT_SLICE_SEC = 0.1


class PoolError(RuntimeError):
    """The pool cannot go on: workers fail to start, or a host cannot be restarted."""


@dataclass(frozen=True)
class EpisodeResult:
    """One finished attempt at an episode, as the run records it (attempts: 1 = first)."""

    index: int
    outcome: EpisodeOutcome
    worker_id: int
    attempts: int


class EnvWorkerPool:
    """K worker slots, each one subprocess at a time; see the module docstring."""

    def __init__(self, make_config: Callable[[int], WorkerConfig], worker_count: int, *,
                 max_episode_retries: int = 0, stop: threading.Event | None = None,
                 cancel_grace_sec: float = 5.0, hosts: Sequence[HostProcess] = (),
                 hung_step_sec: float | None = None,
                 hung_reset_sec: float | None = None,
                 episode_log: Callable[[int], Path] | None = None,
                 zygote: WorkerZygote | None = None) -> None:
        if worker_count < 1:
            raise ValueError(f"worker_count must be >= 1, got {worker_count}")
        self.make_config = make_config
        self.slots = [WorkerSlot(i) for i in range(worker_count)]
        self.max_episode_retries = max_episode_retries
        self.stop = stop or threading.Event()
        self.cancel_grace_sec = cancel_grace_sec
        self.hosts = list(hosts)
        self.hung_step_sec = hung_step_sec
        self.hung_reset_sec = hung_reset_sec
        self.episode_log = episode_log
        self._owns_zygote = zygote is None
        self.zygote = zygote or WorkerZygote()
        self.start_times: list[float] = []
        """Seconds from each fork request to that worker's ``ready``."""
        self._retiring: list[ForkedChild] = []
        self._queue = DealQueue(())  # the run's, while it runs
        self._ever_ready = False
        self._start_failures = 0
        self._oom = OomKills()  # a SIGKILL of the OOM killer reads as memory, not by hand

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> EnvWorkerPool:
        if self.zygote.child is None and self.zygote.starts == 0:
            self.zygote.start()
        for slot in self.slots:
            self._spawn(slot)
        return self

    def close(self, grace_sec: float = 2.0) -> None:
        """Stop every worker (``stop`` message, SIGTERM, then SIGKILL) and reap them."""
        children = [s.child for s in self.slots if s.child is not None] + self._retiring
        for child in children:
            tell(child, "stop")
        deadline = time.monotonic() + grace_sec
        for child in children:
            child.exit_code(max(deadline - time.monotonic(), 0.01))
            child.end(grace_sec=0.5)
        for slot in self.slots:
            slot.child = None
        self._retiring.clear()
        if self._owns_zygote:
            self.zygote.close()

    def __enter__(self) -> EnvWorkerPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- dealing ---------------------------------------------------------------------------
    def run(self, indices: Iterable[int], on_result: Callable[[EpisodeResult], None],
            attempts_before: Mapping[int, int] | None = None) -> None:
        """Run every index once (plus retries); ``on_result`` gets each attempt's result.

        ``on_result`` is called on the pool's recorder thread (in order, one at a time),
        so that this thread keeps dealing while results are written.
        """
        recorder = Recorder(on_result)
        self._queue = DealQueue(indices, attempts_before)
        try:
            self._run(self._queue, recorder)
        except BaseException:
            recorder.close(check=False)  # record what finished; the pool's error wins
            raise
        recorder.close()

    def _run(self, queue: DealQueue, recorder: Recorder) -> None:
        cancel_deadline: float | None = None
        if self.episode_log is not None:  # the first deals' dirs, while workers start
            first = queue.first(2 * len(self.slots))
            recorder.make_dirs(self.episode_log(i).parent for i in first)
        while True:
            recorder.check()
            if self.stop.is_set() and cancel_deadline is None:
                cancel_deadline = time.monotonic() + self.cancel_grace_sec
                self._begin_cancel()
            if cancel_deadline is None:
                self._deal_idle(queue, recorder)
            busy = [s for s in self.slots if s.index is not None]
            if not busy and (not queue or cancel_deadline is not None):
                return
            if cancel_deadline is not None and time.monotonic() > cancel_deadline:
                for slot in busy:
                    self._kill_busy(slot, queue.attempts, recorder.put)
                return
            self._reap_retired()
            watched: dict[Any, Any] = {s.child.conn: s for s in self.slots if s.child}
            if cancel_deadline is None:
                watched.update({h.child.conn: h for h in self.hosts if h.child})
            if self.zygote.child is not None:
                watched[self.zygote.child.conn] = self.zygote
            finished: list[EpisodeResult] = []
            for conn in wait(list(watched), timeout=WAIT_SLICE_SEC):
                owner = watched[conn]
                if isinstance(owner, HostProcess):
                    self._check_host(owner)
                    continue
                if owner is self.zygote:
                    self.zygote.pump(0)  # exit reports; or its death
                    continue
                result = self._on_message(owner)
                if result is None:
                    continue
                result = replace(result, attempts=queue.attempts[result.index])
                if result.outcome.status is EpisodeStatus.ERROR and not self.stop.is_set():
                    queue.retry(result.index, self.max_episode_retries)
                finished.append(result)
            if finished and cancel_deadline is None:
                self._deal_idle(queue, recorder)
            if cancel_deadline is None:
                finished.extend(self._kill_hung(queue.attempts))
            for result in finished:
                recorder.put(result)

    def _kill_hung(self, attempts: Mapping[int, int]) -> list[EpisodeResult]:
        """Timeout results for busy episodes whose log stopped growing (a node blocks)."""
        if (self.hung_step_sec is None and self.hung_reset_sec is None) \
                or self.episode_log is None:
            return []
        now = time.monotonic()
        hung: list[EpisodeResult] = []
        for slot in self.slots:
            if slot.index is None or slot.child is None or slot.watch is None:
                continue
            why = slot.watch.hung_reason(now, step_sec=self.hung_step_sec,
                                         reset_sec=self.hung_reset_sec)
            if why is None:
                continue
            killed = slot.kill()
            outcome = EpisodeOutcome(
                status=EpisodeStatus.TIMEOUT, step_count=0, elapsed_sec=now - slot.dealt_at,
                error=f"{why}; worker {slot.worker_id} (pid {killed.pid}) was killed")
            hung.append(EpisodeResult(slot.index, outcome, slot.worker_id,
                                      attempts[slot.index]))
            slot.index = None
            self._undeal_ahead(slot)
            self._spawn(slot)
        return hung

    def _deal_idle(self, queue: DealQueue, recorder: Recorder) -> None:
        if DISK.waiting() is not None:
            return  # the disk is full: deal nothing until the run's writes go through
        dealt = False
        for slot in self.slots:
            if queue and slot.ready and slot.index is None and slot.child is not None:
                index = queue.take()
                slot.begin(index, self.episode_log)
                slot.send_episode(index)
                dealt = True
        # Then one ahead to each busy worker, while more is queued than the last episodes
        # free workers should get (2 a worker; with one worker, anything queued).
        for slot in self.slots:
            if (len(queue) > 2 * (len(self.slots) - 1) and slot.index is not None
                    and slot.ahead is None and slot.child is not None):
                slot.ahead = queue.take()
                slot.send_episode(slot.ahead)
                dealt = True
        if dealt and self.episode_log is not None:
            # The next episodes' dirs, made while these run.
            ahead = queue.first(len(self.slots))
            recorder.make_dirs(self.episode_log(i).parent for i in ahead)

    def _undeal_ahead(self, slot: WorkerSlot) -> None:
        """The episode dealt ahead never started: back to the front of the queue."""
        if slot.ahead is not None:
            self._queue.undeal(slot.ahead)
            slot.ahead = None

    def _on_message(self, slot: WorkerSlot) -> EpisodeResult | None:
        """Handle one message (or the death) of a slot's worker; an episode result or None."""
        child = slot.child
        assert child is not None
        try:
            message = child.conn.recv()
        except (EOFError, OSError):
            return self._on_death(slot)
        kind = message[0]
        if kind == "ready":
            slot.ready, self._ever_ready, self._start_failures = True, True, 0
            self.start_times.append(time.monotonic() - slot.started_at)
        elif kind == "failed":
            self._on_start_failure(slot, message[1])
        elif kind == "outcome":
            _, index, outcome = message
            slot.index = None
            if outcome.status is EpisodeStatus.ERROR:
                # A node raised: its nodesets may be in any state. The worker starts
                # nothing more (worker.py), and the slot gets a fresh one.
                self._undeal_ahead(slot)
                if not self.stop.is_set():
                    self._retire(slot)
                    self._spawn(slot)
            elif slot.ahead is not None:  # already running in the worker
                slot.begin(slot.ahead, self.episode_log)
                slot.ahead = None
            return EpisodeResult(index, outcome, slot.worker_id, 0)
        elif kind == "skipped":  # dealt, never started: the worker stopped before it
            if slot.index == message[1]:
                slot.index, slot.ahead = slot.ahead, None
                self._queue.undeal(message[1])
        return None

    def _on_death(self, slot: WorkerSlot) -> EpisodeResult | None:
        child = slot.child
        assert child is not None
        how = child.describe_exit()
        if how.startswith("signal 9") and self._oom.since_last():
            how = f"signal 9, {OOM_KILLED}"  # not by hand: memory
        child.end(grace_sec=0.5)
        slot.child = None
        index, slot.index = slot.index, None
        self._undeal_ahead(slot)
        if not slot.ready:
            self._on_start_failure(slot, f"worker {slot.worker_id} died while starting ({how})")
            return None
        slot.ready = False
        if not self.stop.is_set():
            self._spawn(slot)
        if index is None:
            return None
        cancelled = self.stop.is_set()
        error = (f"worker died ({how}) while running this episode "
                 f"(worker {slot.worker_id}, pid {child.pid})")
        if cancelled:
            error = f"run cancelled; {error}"
        outcome = EpisodeOutcome(
            status=EpisodeStatus.CANCELLED if cancelled else EpisodeStatus.ERROR,
            step_count=0, elapsed_sec=time.monotonic() - slot.dealt_at, error=error)
        return EpisodeResult(index, outcome, slot.worker_id, 0)

    def _on_start_failure(self, slot: WorkerSlot, error: str) -> None:
        if slot.child is not None:
            slot.child.end(grace_sec=0.5)
            slot.child = None
        slot.ready = False
        if self.stop.is_set():
            return  # a worker killed by the cancel while it was starting
        self._start_failures += 1
        # Before any worker came up, K failures mean the graph cannot be built at all;
        # afterwards, a run of failures means something broke for good (a host is gone).
        limit = len(self.slots) if not self._ever_ready else 3 * len(self.slots)
        if self._start_failures >= limit:
            raise PoolError(f"workers cannot start: {error}")
        self._spawn(slot)

    def _spawn(self, slot: WorkerSlot) -> None:
        assert slot.ahead is None
        slot.ready, slot.index = False, None
        slot.started_at = time.monotonic()
        try:
            slot.child = self.zygote.fork(self.make_config(slot.worker_id),
                                          name=f"worker{slot.worker_id}")
        except ZygoteError as exc:
            raise PoolError(f"workers cannot start: {exc}") from exc

    def _retire(self, slot: WorkerSlot) -> None:
        if slot.child is not None:
            tell(slot.child, "stop")
            self._retiring.append(slot.child)
            slot.child = None
        slot.ready = False

    def _reap_retired(self) -> None:
        still = []
        for child in self._retiring:
            if child.exit_code() is None:
                still.append(child)
            else:
                child.end()
        self._retiring = still

    def _check_host(self, host: HostProcess) -> None:
        if not host.died():
            return
        assert host.child is not None
        how = host.child.describe_exit()
        print(f"evaltui: host of shared nodeset {host.name!r} died ({how}); restarting it",
              file=sys.stderr, flush=True)
        try:
            host.restart()
        except Exception as exc:
            raise PoolError(f"the host of shared nodeset {host.name!r} died ({how}) and "
                            f"could not be restarted: {exc}") from exc

    # ---- cancel ----------------------------------------------------------------------------
    def _begin_cancel(self) -> None:
        for slot in self.slots:
            if slot.child is None:
                continue
            if slot.index is None:
                tell(slot.child, "stop")
            # The group SIGTERM may not have reached it (the run alone was signalled).
            slot.child.send_signal(signal.SIGTERM)

    def _kill_busy(self, slot: WorkerSlot, attempts: Mapping[int, int],
                   on_result: Callable[[EpisodeResult], None]) -> None:
        assert slot.index is not None
        slot.kill()
        outcome = EpisodeOutcome(
            status=EpisodeStatus.CANCELLED, step_count=0,
            elapsed_sec=time.monotonic() - slot.dealt_at,
            error=f"run cancelled; worker {slot.worker_id} was killed after the "
                  f"{self.cancel_grace_sec} s grace period")
        on_result(EpisodeResult(slot.index, outcome, slot.worker_id, attempts[slot.index]))
        slot.index, slot.ahead = None, None  # the run ends: no requeue
