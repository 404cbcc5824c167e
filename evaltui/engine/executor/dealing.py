"""SlotExecutor: the dealing core every executor runs on (docs/pool.md, "Executors").

Dealing is dynamic: an idle slot gets the next index from a single queue, so a long
episode never holds other workers idle and no episode is dealt twice unless retried.
With ``deal_ahead`` (the local pool) and while plenty is queued (more than two a worker
besides the one dealt), a busy worker is also dealt one episode *ahead*: it waits in the
worker's pipe and starts the moment the episode before it ends, so the worker never
idles through its result's round trip to the run. Near the end of the queue nothing is
dealt ahead, so the last episodes still go to whichever worker is free. An episode dealt
ahead that never started -- its worker died, was killed, raised in the episode before
it, or was cancelled -- goes back to the front of the queue uncounted.

Faults stay with their episode (docs/pool.md, "Faults and retries"): a worker that dies,
hangs in a step (``hung_step_sec``: its log stopped growing, :mod:`.watchdog`) or raises
is replaced, its episode recorded ``error``/``timeout`` and re-queued up to
``max_episode_retries`` times (plus ``node_loss_retries`` when its machine left). Workers
that keep failing to start end the run (:class:`NodesetBuildError`). Cancel (``stop``
set, e.g. by SIGTERM): dealing stops, busy workers end their episode ``cancelled`` at
the next step boundary, and those still busy after ``cancel_grace_sec`` are killed.

An executor subclasses :class:`SlotExecutor` and defines the six slot methods at the top
of the class; everything else is here, the same for every executor.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Generic, TypedDict, TypeVar

from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.loop import EpisodeOutcome
from evaltui.engine.executor.dealqueue import DealQueue
from evaltui.engine.executor.errors import NodesetBuildError
from evaltui.engine.executor.protocol import EpisodeResult
from evaltui.engine.executor.recorder import Recorder
from evaltui.engine.executor.slots import (
    Died,
    Finished,
    Ready,
    Skipped,
    Slot,
    SlotEvent,
    StartFailed,
)
from evaltui.engine.executor.watchdog import LogWatch
from evaltui.rundir.diskfull import DISK

S = TypeVar("S", bound=Slot)


class DealingOptions(TypedDict, total=False):
    """The dealing core's keyword arguments, as an executor passes them on."""

    max_episode_retries: int
    stop: threading.Event | None
    cancel_grace_sec: float
    hung_step_sec: float | None
    hung_reset_sec: float | None
    episode_log: Callable[[int], Path] | None


class SlotExecutor(ABC, Generic[S]):
    """K slots fed from one queue; see the module docstring."""

    deal_ahead = False
    """Whether a busy worker can hold one more episode behind the one it runs."""
    node_loss_retries = 3
    """Retries, not counted against ``max_episode_retries``, of an episode whose worker's
    machine left (a :class:`Died` or :class:`StartFailed` with ``node_lost``): the episode
    did nothing wrong, so it is not scored as an error while machines remain. Which
    machine a slot is on, and when one is lost, is the executor's rule (Ray's:
    executor/ray/liveness.py); where the retry runs is its placement."""
    wait_slice_sec = 0.1
    """The longest :meth:`wait_events` waits before the core looks again."""

    # ---- the slot interface: what an executor defines --------------------------------------
    @abstractmethod
    def start_worker(self, slot: S) -> None:
        """Start a worker for ``slot`` (it reports :class:`Ready` or :class:`StartFailed`
        later). Raise :class:`NodesetBuildError` if workers cannot be started at all."""
        ...

    @abstractmethod
    def send_episode(self, slot: S, index: int, attempt: int) -> None:
        """Have the slot's ready worker run episode ``index`` (its ``attempt``-th try)."""
        ...

    @abstractmethod
    def wait_events(self, timeout: float, cancelling: bool) -> Sequence[SlotEvent]:
        """What happened to the workers, waiting up to ``timeout`` for something to."""
        ...

    @abstractmethod
    def kill_worker(self, slot: S) -> str:
        """Kill the slot's worker now and clean it up; its pid, for the episode's error."""
        ...

    @abstractmethod
    def cancel_worker(self, slot: S) -> None:
        """The run is cancelled: ask the worker to end its episode at the next step."""
        ...

    def retire_worker(self, slot: S) -> None:
        """The worker's episode raised (its nodesets may be in any state): let it go."""
        self.kill_worker(slot)

    # ---- the core --------------------------------------------------------------------------
    def __init__(self, slots: Sequence[S], *, max_episode_retries: int = 0,
                 stop: threading.Event | None = None, cancel_grace_sec: float = 5.0,
                 hung_step_sec: float | None = None, hung_reset_sec: float | None = None,
                 episode_log: Callable[[int], Path] | None = None) -> None:
        self.slots: list[S] = list(slots)
        self.max_episode_retries = max_episode_retries
        self.stop = stop or threading.Event()
        self.cancel_grace_sec = cancel_grace_sec
        self.hung_step_sec, self.hung_reset_sec = hung_step_sec, hung_reset_sec
        self.episode_log = episode_log
        self._queue = DealQueue(())  # the run's, while it runs
        self._ever_ready = False
        self._start_failures = 0
        self._node_lost: set[int] = set()
        """Episodes whose last attempt ended because its worker's machine left."""
        self._dealing_stopped = threading.Event()

    def run(self, indices: Iterable[int], on_result: Callable[[EpisodeResult], None],
            attempts_before: Mapping[int, int] | None = None) -> None:
        """Run every index once (plus retries); ``on_result`` gets each attempt's result.

        ``on_result`` is called on the recorder thread (in order, one at a time), so that
        this thread keeps dealing while results are written.
        """
        recorder = Recorder(on_result)
        self._queue = DealQueue(indices, attempts_before)
        try:
            self._run(self._queue, recorder)
        except BaseException:
            recorder.close(check=False)  # record what finished; the executor's error wins
            raise
        recorder.close()

    def stop_dealing(self) -> None:
        """Deal nothing more; ``run`` returns once the episodes running are recorded
        (called from any thread, e.g. the recorder's when a stop rule is met)."""
        self._dealing_stopped.set()

    def _run(self, queue: DealQueue, recorder: Recorder) -> None:
        cancel_deadline: float | None = None
        if self.episode_log is not None:  # the first deals' dirs, while workers start
            first = queue.first(2 * len(self.slots))
            recorder.make_dirs(self.episode_log(i).parent for i in first)
        while True:
            recorder.check()
            if self.stop.is_set() and cancel_deadline is None:
                cancel_deadline = time.monotonic() + self.cancel_grace_sec
                for slot in self.slots:
                    self.cancel_worker(slot)
            cancelling = cancel_deadline is not None
            if not cancelling:
                self._deal_idle(queue, recorder)
            busy = [s for s in self.slots if s.index is not None]
            if not busy and (not queue or cancelling or self._dealing_stopped.is_set()):
                return
            if cancel_deadline is not None and time.monotonic() > cancel_deadline:
                for slot in busy:
                    self.kill_worker(slot)
                    killed = self._killed(slot, EpisodeStatus.CANCELLED, (
                        f"run cancelled; worker {slot.worker_id} was killed after the "
                        f"{self.cancel_grace_sec} s grace period"))
                    if not self._cut_before_start(slot, killed.index):
                        recorder.put(killed)
                    slot.ahead = None  # the run ends: no requeue
                return
            finished: list[EpisodeResult] = []
            for event in self.wait_events(self.wait_slice_sec, cancelling):
                result = self._on_event(event)
                if result is not None:
                    finished.append(self._settle(result))
            if finished and not cancelling:
                self._deal_idle(queue, recorder)
            if not cancelling:
                finished.extend(self._settle(r) for r in self._kill_hung())
            for result in finished:
                recorder.put(result)

    def _settle(self, result: EpisodeResult) -> EpisodeResult:
        """The attempt number on an ended attempt, and its retry, if it gets one."""
        index = result.index
        node_lost = index in self._node_lost
        self._node_lost.discard(index)
        retried = False
        if result.outcome.status is EpisodeStatus.ERROR and not self.stop.is_set():
            retried = node_lost and self._queue.retry(index, self.node_loss_retries, "node")
            if not retried:
                retried = self._queue.retry(index, self.max_episode_retries)
        return replace(result, attempts=self._queue.attempts[index],
                       will_retry=retried)

    # ---- dealing ---------------------------------------------------------------------------
    def _deal_idle(self, queue: DealQueue, recorder: Recorder) -> None:
        if DISK.waiting() is not None or self._dealing_stopped.is_set():
            return  # the disk is full (deal once the run's writes go through), or enough
        dealt = False
        for slot in self.slots:
            if queue and slot.ready and slot.index is None:
                index = queue.take()
                self._begin(slot, index)
                self.send_episode(slot, index, queue.attempts[index])
                dealt = True
        # Then one ahead to each busy worker, while more is queued than the last episodes
        # free workers should get (2 a worker; with one worker, anything queued).
        for slot in self.slots if self.deal_ahead else ():
            if (len(queue) > 2 * (len(self.slots) - 1) and slot.index is not None
                    and slot.ahead is None and slot.ready):
                slot.ahead = queue.take()
                self.send_episode(slot, slot.ahead, queue.attempts[slot.ahead])
                dealt = True
        if dealt and self.episode_log is not None:
            # The next episodes' dirs, made while these run.
            ahead = queue.first(len(self.slots))
            recorder.make_dirs(self.episode_log(i).parent for i in ahead)

    def _begin(self, slot: S, index: int) -> None:
        """``index`` is the episode the worker runs from now (its log watched, if any)."""
        slot.index, slot.dealt_at = index, time.monotonic()
        slot.watch = LogWatch(self.episode_log(index)) if self.episode_log else None

    def _undeal_ahead(self, slot: S) -> None:
        """The episode dealt ahead never started: back to the front of the queue."""
        if slot.ahead is not None:
            self._queue.undeal(slot.ahead)
            slot.ahead = None

    def _restart(self, slot: S) -> None:
        assert slot.ahead is None
        slot.ready, slot.index = False, None
        self.start_worker(slot)

    # ---- events ----------------------------------------------------------------------------
    def _on_event(self, event: SlotEvent) -> EpisodeResult | None:
        """Apply one event to its slot; the episode result it ends, if any."""
        slot = event.slot
        if isinstance(event, Ready):
            slot.ready, self._ever_ready, self._start_failures = True, True, 0
        elif isinstance(event, StartFailed):
            self._on_start_failure(slot, event.error, event.node_lost)
        elif isinstance(event, Finished):
            return self._on_finished(slot, event.index, event.outcome)
        elif isinstance(event, Died):
            return self._on_death(slot, event)
        elif isinstance(event, Skipped) and slot.index == event.index:
            slot.index, slot.ahead = slot.ahead, None
            self._queue.undeal(event.index)
        return None

    def _on_finished(self, slot: S, index: int, outcome: EpisodeOutcome) -> EpisodeResult:
        slot.index = None
        if outcome.status is EpisodeStatus.ERROR:
            # A node raised: its nodesets may be in any state. The worker starts nothing
            # more, and the slot gets a fresh one.
            self._undeal_ahead(slot)
            if not self.stop.is_set():
                self.retire_worker(slot)
                self._restart(slot)
        elif slot.ahead is not None:  # already running in the worker
            self._begin(slot, slot.ahead)
            slot.ahead = None
        return EpisodeResult(index, outcome, slot.worker_id, 0, slot.node)

    def _on_death(self, slot: S, death: Died) -> EpisodeResult | None:
        index, slot.index = slot.index, None
        self._undeal_ahead(slot)
        if not slot.ready:
            self._on_start_failure(slot, f"worker {slot.worker_id} died while starting "
                                         f"({death.how})", death.node_lost)
            return None
        slot.ready = False
        if not self.stop.is_set():
            self._restart(slot)
        if index is None:
            return None
        if death.node_lost:
            self._node_lost.add(index)
        cancelled = self.stop.is_set()
        if cancelled and self._cut_before_start(slot, index):
            return None
        error = (f"worker died ({death.how}) while running this episode "
                 f"(worker {slot.worker_id}{death.where})")
        if cancelled:
            error = f"run cancelled; {error}"
        outcome = EpisodeOutcome(
            status=EpisodeStatus.CANCELLED if cancelled else EpisodeStatus.ERROR,
            step_count=0, elapsed_sec=time.monotonic() - slot.dealt_at, error=error)
        return EpisodeResult(index, outcome, slot.worker_id, 0, slot.node)

    def _on_start_failure(self, slot: S, error: str, node_lost: bool = False) -> None:
        slot.ready = False
        if self.stop.is_set():
            return  # a worker killed by the cancel while it was starting
        if not node_lost:
            self._start_failures += 1
            # Before any worker came up, K failures mean the graph cannot be built at all;
            # afterwards, a run of failures means something broke for good (a host is gone).
            limit = len(self.slots) if not self._ever_ready else 3 * len(self.slots)
            if self._start_failures >= limit:
                raise NodesetBuildError(f"workers cannot start: {error}")
        self._restart(slot)

    # ---- kills -----------------------------------------------------------------------------
    def _kill_hung(self) -> list[EpisodeResult]:
        """Timeout results for busy episodes whose log stopped growing (a node blocks)."""
        if self.hung_step_sec is None and self.hung_reset_sec is None:
            return []
        now = time.monotonic()
        hung: list[EpisodeResult] = []
        for slot in self.slots:
            if slot.index is None or slot.watch is None:
                continue
            why = slot.watch.hung_reason(now, step_sec=self.hung_step_sec,
                                         reset_sec=self.hung_reset_sec)
            if why is None:
                continue
            pid = self.kill_worker(slot)
            hung.append(self._killed(slot, EpisodeStatus.TIMEOUT,
                                     f"{why}; worker {slot.worker_id} (pid {pid}) was killed"))
            self._undeal_ahead(slot)
            if not self.stop.is_set():
                self._restart(slot)
        return hung

    def _cut_before_start(self, slot: S, index: int) -> bool:
        """A cancel (a Slurm requeue, ``evaltui cancel``) that cut the episode before it
        started is no attempt: it goes back undealt, with no row (a resumed run then
        counts its first start as attempt 1). Attempts count starts, not deals."""
        if slot.watch is None or slot.watch.started():
            return False  # begun (or no log to tell): an attempt, recorded as cancelled
        self._queue.undeal(index)
        return True

    def _killed(self, slot: S, status: EpisodeStatus, error: str) -> EpisodeResult:
        """The result of the episode whose worker was just killed; the slot is left empty."""
        assert slot.index is not None
        index = slot.index
        outcome = EpisodeOutcome(status=status, step_count=0,
                                 elapsed_sec=time.monotonic() - slot.dealt_at, error=error)
        slot.ready, slot.index = False, None
        return EpisodeResult(index, outcome, slot.worker_id, self._queue.attempts[index],
                             slot.node)
