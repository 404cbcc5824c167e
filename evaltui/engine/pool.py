"""EnvWorkerPool: K worker subprocesses fed from one episode queue (DESIGN §1, §5).

Dealing is dynamic: an idle worker gets the next index from a single queue, so a long
episode never holds other workers idle and no episode is dealt twice unless retried.
The pool owns its workers (``start``/``close``); they are forks of a
:class:`~evaltui.engine.zygote.WorkerZygote` (given, or started by the pool), so K of
them start in milliseconds. It runs from one thread -- the thread that started the
zygote, since the zygote's PR_SET_PDEATHSIG is tied to it.

Faults stay with their episode:
- a worker that dies mid-episode (SIGKILL, segfault, OOM) makes that episode ``error``
  ("worker died (signal 9) ..."); the slot gets a fresh worker;
- after an episode ends ``error`` (a node raised) its worker is replaced before it runs
  another episode, since the raise may have left its simulator in any state;
- an ``error`` episode goes back to the front of the queue up to
  ``max_episode_retries`` times, reaching a fresh worker; every attempt is reported;
- a supervised nodeset host that dies is restarted at the same URL;
- a zygote that dies takes its workers along (their episodes are ``error``); the next
  worker start forks from a fresh zygote, until the zygote has died too often.

With ``hung_step_sec`` set (the runner passes ``per_step_budget_sec``) a busy episode
whose log stopped growing (:mod:`evaltui.engine.watchdog`: a node blocks for good) has
its worker SIGKILLed and is recorded ``timeout``; the slot gets a fresh worker.

Cancel (``stop`` set, e.g. by SIGTERM): dealing stops, busy workers get SIGTERM and end
their episode ``cancelled`` at the next step boundary; those still busy after
``cancel_grace_sec`` are SIGKILLed and their episodes reported ``cancelled``.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from evaltui.engine.hostprocess import HostProcess
from evaltui.engine.loop import EpisodeOutcome
from evaltui.engine.recorder import Recorder
from evaltui.engine.watchdog import LogWatch
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


@dataclass
class _Slot:
    worker_id: int
    child: ForkedChild | None = None
    ready: bool = False
    started_at: float = 0.0
    index: int | None = None
    dealt_at: float = 0.0
    watch: LogWatch | None = None


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
        self.slots = [_Slot(i) for i in range(worker_count)]
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
        self._ever_ready = False
        self._start_failures = 0

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
            try:
                child.conn.send(("stop",))
            except OSError:
                pass  # already gone
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
        try:
            self._run(deque(indices), recorder, Counter(attempts_before or {}))
        except BaseException:
            recorder.close(check=False)  # record what finished; the pool's error wins
            raise
        recorder.close()

    def _run(self, queue: deque[int], recorder: Recorder, attempts: Counter[int]) -> None:
        retries: Counter[int] = Counter()
        cancel_deadline: float | None = None
        if self.episode_log is not None:  # the first deals' dirs, while workers start
            first = [queue[i] for i in range(min(len(queue), 2 * len(self.slots)))]
            recorder.make_dirs(self.episode_log(i).parent for i in first)
        while True:
            recorder.check()
            if self.stop.is_set() and cancel_deadline is None:
                cancel_deadline = time.monotonic() + self.cancel_grace_sec
                self._begin_cancel()
            if cancel_deadline is None:
                self._deal_idle(queue, attempts, recorder)
            busy = [s for s in self.slots if s.index is not None]
            if not busy and (not queue or cancel_deadline is not None):
                return
            if cancel_deadline is not None and time.monotonic() > cancel_deadline:
                for slot in busy:
                    self._kill_busy(slot, attempts, recorder.put)
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
                result = replace(result, attempts=attempts[result.index])
                retry = (result.outcome.status is EpisodeStatus.ERROR
                         and retries[result.index] < self.max_episode_retries
                         and not self.stop.is_set())
                if retry:
                    retries[result.index] += 1
                    queue.appendleft(result.index)
                finished.append(result)
            if finished and cancel_deadline is None:
                self._deal_idle(queue, attempts, recorder)
            if cancel_deadline is None:
                finished.extend(self._kill_hung(attempts))
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
            slot.child.send_signal(signal.SIGKILL)
            slot.child.end(grace_sec=0.5)
            outcome = EpisodeOutcome(
                status=EpisodeStatus.TIMEOUT, step_count=0, elapsed_sec=now - slot.dealt_at,
                error=f"{why}; worker {slot.worker_id} (pid {slot.child.pid}) was killed")
            hung.append(EpisodeResult(slot.index, outcome, slot.worker_id,
                                      attempts[slot.index]))
            slot.child, slot.index = None, None
            self._spawn(slot)
        return hung

    def _deal_idle(self, queue: deque[int], attempts: Counter[int], recorder: Recorder) -> None:
        dealt = False
        for slot in self.slots:
            if queue and slot.ready and slot.index is None and slot.child is not None:
                index = queue.popleft()
                attempts[index] += 1
                self._deal(slot, index)
                dealt = True
        if dealt and self.episode_log is not None:
            # The next episodes' dirs, made while these run.
            ahead = [queue[i] for i in range(min(len(queue), len(self.slots)))]
            recorder.make_dirs(self.episode_log(i).parent for i in ahead)

    def _deal(self, slot: _Slot, index: int) -> None:
        slot.index, slot.dealt_at = index, time.monotonic()
        slot.watch = LogWatch(self.episode_log(index)) if self.episode_log else None
        assert slot.child is not None
        try:
            slot.child.conn.send(("episode", index))
        except OSError:
            pass  # it just died; its closed pipe reports the death on the next wait

    def _on_message(self, slot: _Slot) -> EpisodeResult | None:
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
            if outcome.status is EpisodeStatus.ERROR and not self.stop.is_set():
                # A node raised: its nodesets may be in any state. Fresh worker.
                self._retire(slot)
                self._spawn(slot)
            return EpisodeResult(index, outcome, slot.worker_id, 0)
        return None

    def _on_death(self, slot: _Slot) -> EpisodeResult | None:
        child = slot.child
        assert child is not None
        how = child.describe_exit()
        child.end(grace_sec=0.5)
        slot.child = None
        index, slot.index = slot.index, None
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

    def _on_start_failure(self, slot: _Slot, error: str) -> None:
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

    def _spawn(self, slot: _Slot) -> None:
        slot.ready, slot.index = False, None
        slot.started_at = time.monotonic()
        try:
            slot.child = self.zygote.fork(self.make_config(slot.worker_id),
                                          name=f"worker{slot.worker_id}")
        except ZygoteError as exc:
            raise PoolError(f"workers cannot start: {exc}") from exc

    def _retire(self, slot: _Slot) -> None:
        if slot.child is not None:
            try:
                slot.child.conn.send(("stop",))
            except OSError:
                pass  # already gone
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
                try:
                    slot.child.conn.send(("stop",))
                except OSError:
                    pass  # already gone
            # The group SIGTERM may not have reached it (the run alone was signalled).
            slot.child.send_signal(signal.SIGTERM)

    def _kill_busy(self, slot: _Slot, attempts: Mapping[int, int],
                   on_result: Callable[[EpisodeResult], None]) -> None:
        assert slot.child is not None and slot.index is not None
        slot.child.send_signal(signal.SIGKILL)
        slot.child.end(grace_sec=0.5)
        outcome = EpisodeOutcome(
            status=EpisodeStatus.CANCELLED, step_count=0,
            elapsed_sec=time.monotonic() - slot.dealt_at,
            error=f"run cancelled; worker {slot.worker_id} was killed after the "
                  f"{self.cancel_grace_sec} s grace period")
        on_result(EpisodeResult(slot.index, outcome, slot.worker_id, attempts[slot.index]))
        slot.child, slot.index = None, None
