"""RayExecutor: the run's K workers as Ray actors spread over a cluster (docs/pool.md).

Same contract as :class:`~evaltui.engine.executor.local.pool.EnvWorkerPool`: dynamic dealing
from one queue, every attempt reported through the pool's recorder thread, ``error`` episodes
retried up to ``max_episode_retries`` on a fresh actor, ``worker_id`` the slot 0..K-1.
Ray never re-runs anything by itself (``max_restarts=0``, ``max_task_retries=0``).

Each slot is an :class:`~evaltui.engine.executor.ray.actors.EpisodeWorkerActor` (SPREAD over the
nodes, one CPU each). The run dir stays on this machine and this process stays its only
writer: while an episode runs, its actor's node-local log.jsonl/frames.bin bytes are
pulled every :data:`PULL_EVERY_SEC` and appended to the real ep dir
(:class:`~evaltui.engine.executor.ray.sink.EpisodeSink`), so the live view and the hung-step
watch (:class:`~evaltui.engine.executor.watchdog.LogWatch`) work as locally. Shared nodesets
without a given URL are hosted by NodesetActors (ray_hosts.py); where actors go, and
following the run when its node leaves, is ray_placement.py.

Faults: an actor that dies, or stops answering pulls for :data:`UNREACHABLE_SEC` (its
node is gone: Ray would take ~15 s to say so), is killed and its episode is ``error``
"worker died (node, pid, cause)"; a node raising is ``error`` with the remote traceback
(the loop records it); a stalled log is ``timeout``. Cancel asks the busy actors to stop
at the next step, then kills those still busy after the grace. The actors are owned by
this process: if it dies, Ray kills them.
"""

from __future__ import annotations

import logging
import pickle
import re
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from evaltui.engine.episode.loop import EpisodeOutcome
from evaltui.engine.executor.local.pool import EpisodeResult, PoolError
from evaltui.engine.executor.local.worker import SharedEndpoint
from evaltui.engine.executor.protocol import ExecutorError
from evaltui.engine.executor.ray.actors import EpisodeWorkerActor
from evaltui.engine.executor.ray.hosts import RayHosts
from evaltui.engine.executor.ray.placement import Placement, alive_nodes
from evaltui.engine.executor.ray.resources import place_timeout_sec, unplaceable
from evaltui.engine.executor.ray.slot import RaySlot, death_cause, remote_error
from evaltui.engine.executor.recorder import Recorder
from evaltui.engine.graph.specchecks import CheckedSpec
from evaltui.states import EpisodeStatus

WAIT_SLICE_SEC = 0.05
PULL_EVERY_SEC = 0.1
UNREACHABLE_SEC = 4.0
"""A pull unanswered this long means the actor's node is gone (a pull takes ~1 ms)."""
WORKER_RESOURCES = {"num_cpus": 1}
NODE_DEATH = re.compile(r"node (?:has |was )?(?:died|dead|removed|terminated)|node.{0,60}"
                        r"(?:died|is dead|was terminated)", re.IGNORECASE)
"""An actor-death error that blames the node (Ray may still list the node alive then)."""
NODE_LOSS_RETRIES = 3
"""Retries of an episode whose node left mid-episode, on top of ``max_episode_retries``:
the episode did nothing wrong, so it is not scored as an error while nodes remain."""


class RayExecutor:
    """K worker actors on the Ray cluster at ``address``; see the module docstring."""

    def __init__(self, checked: CheckedSpec, episodes: list[dict[str, Any]],
                 worker_count: int, *, address: str | None,
                 shared: Mapping[str, SharedEndpoint], run_key: str,
                 max_episode_retries: int = 0, stop: threading.Event | None = None,
                 cancel_grace_sec: float = 5.0, hung_step_sec: float | None = None,
                 hung_reset_sec: float | None = None,
                 episode_log: Callable[[int], Path]) -> None:
        self.checked, self.episodes = checked, episodes
        self.slots = [RaySlot(i) for i in range(worker_count)]
        self.address = address or "auto"
        self.hosts = RayHosts(checked, shared, worker_count)
        self.run_key = run_key
        self.max_episode_retries = max_episode_retries
        self.stop = stop or threading.Event()
        self.cancel_grace_sec = cancel_grace_sec
        self.hung_step_sec, self.hung_reset_sec = hung_step_sec, hung_reset_sec
        self.episode_log = episode_log
        self._ever_ready = False
        self._start_failures = 0
        self._lost_nodes: set[str] = set()
        self._node_lost: set[int] = set()
        """Episodes whose last attempt ended because its node left the cluster."""
        self._checked_ref: Any = None

    # ---- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> RayExecutor:
        import ray

        # Ray's core worker installs its own fatal-signal handlers (SIGTERM included),
        # which would turn a cancel into a crash: the run's handlers are put back.
        handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:  # ConnectionError, or a version mismatch
            raise ExecutorError(f"cannot connect to the Ray cluster at {self.address}: "
                                f"{type(exc).__name__}: {exc}") from exc
        finally:
            if threading.current_thread() is threading.main_thread():
                for sig, handler in handlers.items():
                    if handler is not None:
                        signal.signal(sig, handler)
        self.where = Placement()
        try:
            self.hosts.start(self.where)
            self._checked_ref = ray.put(pickle.dumps(self.checked))
            for slot in self.slots:
                self._spawn(slot)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        actors = [s.actor for s in self.slots if s.actor is not None]
        closing = [a.close.remote() for a in actors]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=2.0)
        for actor in actors:
            ray.kill(actor, no_restart=True)
        for slot in self.slots:
            slot.actor = None
        self.hosts.kill()
        ray.shutdown()

    def _spawn(self, slot: RaySlot) -> None:
        """Start the slot's actor, unless the run's node left and it was not moved yet
        (the slot stays parked: ``_start_parked`` tries again)."""
        import ray

        if not self.where.usable():
            return
        if self.where.moved:  # the run's node left: its hosts went with it
            self.where.moved = False
            self.hosts.restart(self.where)
        slot.actor = ray.remote(EpisodeWorkerActor).options(
            **WORKER_RESOURCES, max_restarts=0, max_task_retries=0, max_concurrency=2,
            **self._placement()).remote(slot.worker_id, self.run_key)
        slot.setup_ref = slot.actor.setup.remote(
            self._checked_ref, self.checked.spec.active_workspace_dir, self.hosts.arg(),
            self.checked.spec.eval.per_step_budget_sec)
        slot.info, slot.started_at = None, time.monotonic()
        slot.index = slot.run_ref = slot.pull_ref = None

    def _placement(self) -> dict[str, Any]:
        """The run's placement, minus the nodes this run found lost: Ray still lists them
        (and SPREAD may pick them) until its own ~15 s death timeout."""
        if not self._lost_nodes or self.where.pinned:
            return self.where.options
        lost = ",".join(sorted(self._lost_nodes))
        return {**self.where.options, "label_selector": {"ray.io/node-id": f"!in({lost})"}}

    def _start_parked(self) -> None:
        """Slots left without an actor while the run waited to be moved."""
        if self.stop.is_set():
            return
        for slot in self.slots:
            if slot.actor is None:
                self._spawn(slot)

    def _kill(self, slot: RaySlot) -> None:
        import ray

        if slot.actor is not None:
            ray.kill(slot.actor, no_restart=True)
        slot.actor = slot.setup_ref = slot.run_ref = slot.pull_ref = None
        slot.info, slot.index = None, None

    # ---- dealing ---------------------------------------------------------------------------
    def run(self, indices: Iterable[int], on_result: Callable[[EpisodeResult], None],
            attempts_before: Mapping[int, int] | None = None) -> None:
        """Run every index once (plus retries); ``on_result`` as in the local pool."""
        recorder = Recorder(on_result)
        try:
            self._run(deque(indices), recorder, Counter(attempts_before or {}))
        except BaseException:
            recorder.close(check=False)
            raise
        recorder.close()

    def _run(self, queue: deque[int], recorder: Recorder, attempts: Counter[int]) -> None:
        import ray

        retries: Counter[int] = Counter()
        node_retries: Counter[int] = Counter()
        cancel_deadline: float | None = None
        while True:
            recorder.check()
            if self.stop.is_set() and cancel_deadline is None:
                cancel_deadline = time.monotonic() + self.cancel_grace_sec
                for slot in self.slots:
                    if slot.index is not None and slot.actor is not None:
                        slot.actor.cancel.remote()
            if cancel_deadline is None:
                self._deal_idle(queue, attempts)
            busy = [s for s in self.slots if s.index is not None]
            if not busy and (not queue or cancel_deadline is not None):
                return
            if cancel_deadline is not None and time.monotonic() > cancel_deadline:
                for slot in busy:
                    recorder.put(self._killed(slot, attempts, EpisodeStatus.CANCELLED,
                                              f"run cancelled; worker {slot.worker_id} was "
                                              f"killed after the {self.cancel_grace_sec} s "
                                              "grace period"))
                return
            self._check_placement()
            self._start_parked()
            now = time.monotonic()
            for slot in busy:
                slot.pull_if_due(now, PULL_EVERY_SEC)
            waiting = {ref: (s, kind) for s in self.slots
                       for kind, ref in (("setup", s.setup_ref), ("run", s.run_ref),
                                         ("pull", s.pull_ref)) if ref is not None}
            ready: list[Any] = []
            if waiting:
                ready, _ = ray.wait(list(waiting), num_returns=1, timeout=WAIT_SLICE_SEC)
                if ready:
                    ready, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=0)
            else:
                time.sleep(WAIT_SLICE_SEC)
            finished: list[EpisodeResult] = []
            for ref in sorted(ready, key=lambda r: waiting[r][1] != "pull"):
                slot, kind = waiting[ref]
                if kind == "setup" and slot.setup_ref is ref:
                    self._on_setup(slot)
                elif kind == "pull" and slot.pull_ref is ref:
                    slot.on_pull()
                elif kind == "run" and slot.run_ref is ref:
                    finished.append(replace_attempts(self._on_run(slot), attempts))
            if cancel_deadline is None:
                finished.extend(self._lost_or_hung(attempts))
            for result in finished:
                if self._retried(result, retries, node_retries):
                    queue.appendleft(result.index)
                recorder.put(result)

    def _retried(self, result: EpisodeResult, retries: Counter[int],
                 node_retries: Counter[int]) -> bool:
        """Whether an ended attempt is run again: an ``error`` whose node left gets up to
        NODE_LOSS_RETRIES retries first, any ``error`` then ``max_episode_retries``."""
        index = result.index
        node_lost = index in self._node_lost
        self._node_lost.discard(index)
        if result.outcome.status is not EpisodeStatus.ERROR or self.stop.is_set():
            return False
        for counter, limit in ((node_retries, NODE_LOSS_RETRIES if node_lost else 0),
                               (retries, self.max_episode_retries)):
            if counter[index] < limit:
                counter[index] += 1
                return True
        return False

    def _deal_idle(self, queue: deque[int], attempts: Counter[int]) -> None:
        for slot in self.slots:
            if queue and slot.info is not None and slot.index is None:
                index = queue.popleft()
                attempts[index] += 1
                slot.deal(index, attempts[index], self.episodes[index], self.episode_log(index))

    def _on_setup(self, slot: RaySlot) -> None:
        import ray

        try:
            slot.info = ray.get(slot.setup_ref)
        except ray.exceptions.RayError as exc:
            self._kill(slot)
            self._on_start_failure(slot, remote_error(exc))
            return
        slot.setup_ref = None
        self._ever_ready, self._start_failures = True, 0
        info = slot.info
        print(f"evaltui: worker {slot.worker_id} is Ray actor pid {info['pid']} on node "
              f"{info['node_ip']} ({info['node_id'][:8]}), scratch {info['scratch']}",
              file=sys.stderr, flush=True)

    def _on_start_failure(self, slot: RaySlot, error: str) -> None:
        if self.stop.is_set():
            return
        self.where.suspect()
        if self.where.lost_at is not None:  # not the actor's fault: its node left
            self._spawn(slot)
            return
        self._start_failures += 1
        limit = len(self.slots) if not self._ever_ready else 3 * len(self.slots)
        if self._start_failures >= limit:
            raise PoolError(f"workers cannot start: {error}")
        self._spawn(slot)

    def _check_placement(self) -> None:
        now, timeout = time.monotonic(), place_timeout_sec()
        for slot in self.slots:
            if slot.setup_ref is not None and now - slot.started_at > timeout:
                raise unplaceable(f"worker actor {slot.worker_id}", WORKER_RESOURCES, timeout)

    def _on_run(self, slot: RaySlot) -> EpisodeResult:
        import ray

        assert slot.index is not None and slot.sink is not None
        index = slot.index
        try:
            outcome: EpisodeOutcome = ray.get(slot.run_ref)
        except ray.exceptions.RayActorError as exc:
            cause, node = death_cause(exc), (slot.info or {}).get("node_id")
            alive = alive_nodes() if node else None
            return self._died(slot, cause, node_lost=bool(NODE_DEATH.search(str(exc)))
                              or (alive is not None and node not in alive))
        except ray.exceptions.RayError as exc:  # the body itself raised (not a node)
            outcome = EpisodeOutcome(status=EpisodeStatus.ERROR, step_count=0,
                                     elapsed_sec=time.monotonic() - slot.dealt_at,
                                     error=remote_error(exc))
        else:
            slot.pull_rest()
        slot.index, slot.run_ref = None, None
        if outcome.status is EpisodeStatus.ERROR and not self.stop.is_set():
            self._kill(slot)  # a node raised: its simulator may be in any state
            self._spawn(slot)
        return EpisodeResult(index, outcome, slot.worker_id, 0)

    def _died(self, slot: RaySlot, cause: str, node_lost: bool) -> EpisodeResult:
        self.where.suspect()
        if node_lost and slot.index is not None:
            self._node_lost.add(slot.index)
        info = slot.info or {}
        where = (f"node {info.get('node_ip', '?')} {str(info.get('node_id', '?'))[:8]}, "
                 f"pid {info.get('pid', '?')}")
        status = EpisodeStatus.CANCELLED if self.stop.is_set() else EpisodeStatus.ERROR
        error = (f"worker died ({where}, {cause}) while running this episode "
                 f"(worker {slot.worker_id})")
        if self.stop.is_set():
            error = f"run cancelled; {error}"
        return self._killed(slot, {}, status, error)

    def _killed(self, slot: RaySlot, attempts: Mapping[int, int], status: EpisodeStatus,
                error: str) -> EpisodeResult:
        """Kill the slot's actor, respawn it unless cancelling; the episode's result."""
        assert slot.index is not None
        index = slot.index
        outcome = EpisodeOutcome(status=status, step_count=0,
                                 elapsed_sec=time.monotonic() - slot.dealt_at, error=error)
        self._kill(slot)
        if not self.stop.is_set():
            self._spawn(slot)
        return EpisodeResult(index, outcome, slot.worker_id, attempts.get(index, 0))

    def _lost_or_hung(self, attempts: Mapping[int, int]) -> list[EpisodeResult]:
        now, results = time.monotonic(), []
        for slot in self.slots:
            if slot.index is None or slot.watch is None:
                continue
            if slot.pull_ref is not None and now - slot.pull_sent > UNREACHABLE_SEC:
                if slot.info is not None:
                    self._lost_nodes.add(slot.info["node_id"])
                    self.where.lost(slot.info["node_id"])
                results.append(self._died(slot, f"unreachable for {UNREACHABLE_SEC:.0f} s: "
                                                "its node is lost", node_lost=True))
                continue
            why = slot.watch.hung_reason(now, step_sec=self.hung_step_sec,
                                         reset_sec=self.hung_reset_sec)
            if why is None:
                continue
            pid = (slot.info or {}).get("pid", "?")
            results.append(self._killed(slot, attempts, EpisodeStatus.TIMEOUT,
                                        f"{why}; worker {slot.worker_id} (pid {pid}) was killed"))
        return [replace_attempts(r, attempts) for r in results]


def replace_attempts(result: EpisodeResult, attempts: Mapping[int, int]) -> EpisodeResult:
    return EpisodeResult(result.index, result.outcome, result.worker_id,
                         attempts.get(result.index, 0))
