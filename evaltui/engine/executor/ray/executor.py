"""RayExecutor: the run's K workers as Ray actors spread over a cluster (docs/pool.md).

Dealing, retries, cancel and the hung-step watch are the dealing core's
(:class:`~evaltui.engine.executor.dealing.SlotExecutor`), as for the local pool; this is
its slot side. Ray never re-runs anything by itself (``max_restarts=0``,
``max_task_retries=0``); an episode is never dealt ahead (each is one remote call).

Each slot is an :class:`~evaltui.engine.executor.ray.actors.EpisodeWorkerActor` (SPREAD
over the nodes, one CPU each). The run dir stays on this machine and this process stays
its only writer: while an episode runs, its actor's node-local log.jsonl/frames.bin
bytes are pulled every :data:`PULL_EVERY_SEC` and appended to the real ep dir
(:class:`~evaltui.engine.executor.ray.sink.EpisodeSink`), so the live view and the
hung-step watch work as locally. Shared nodesets without a given URL are hosted by
NodesetActors (:mod:`.hosts`); where actors go, and following the run when its node
leaves, is :mod:`.placement`.

Faults: an actor that dies, or stops answering pulls for :data:`UNREACHABLE_SEC`, is
killed and its episode is ``error`` "worker died (node, pid, cause)". Whether its *node*
was lost is the run's own rule (:mod:`.liveness`: the node's raylet checked twice a
second, lost after 2 s without an answer; Ray would take ~15 s to say so): the busy
actors of a lost node are given up at once, an actor that died is node loss when its
raylet does not answer now, and node loss is retried elsewhere without counting against
``max_episode_retries`` (the core's ``node_loss_retries``); a node raising is ``error``
with the remote traceback (the loop records it); a stalled log is ``timeout``. Cancel
asks the busy actors to stop at the next step. The actors are owned by this process: if
it dies, Ray kills them.
"""

from __future__ import annotations

import logging
import pickle
import re
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, Unpack

from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.loop import EpisodeOutcome
from evaltui.engine.executor.dealing import DealingOptions, SlotExecutor
from evaltui.engine.executor.errors import ExecutorError
from evaltui.engine.executor.ray.actors import EpisodeWorkerActor
from evaltui.engine.executor.ray.hosts import RayHosts
from evaltui.engine.executor.ray.liveness import NodeLiveness
from evaltui.engine.executor.ray.placement import ActorPlacement, alive_nodes
from evaltui.engine.executor.ray.resources import place_timeout_sec, unplaceable
from evaltui.engine.executor.ray.slot import RaySlot, death_cause, remote_error
from evaltui.engine.executor.slots import Died, Finished, Ready, SlotEvent, StartFailed
from evaltui.engine.graph.specchecks import CheckedSpec
from evaltui.engine.hosting.channel import SharedEndpoint

PULL_EVERY_SEC = 0.1
UNREACHABLE_SEC = 4.0
"""A pull unanswered this long means the actor's node is gone (a pull takes ~1 ms)."""
WORKER_RESOURCES = {"num_cpus": 1}
NODE_DEATH = re.compile(r"node (?:has |was )?(?:died|dead|removed|terminated)|node.{0,60}"
                        r"(?:died|is dead|was terminated)", re.IGNORECASE)
"""An actor-death error that blames the node (Ray may still list the node alive then)."""


class RayExecutor(SlotExecutor[RaySlot]):
    """K worker actors on the Ray cluster at ``address``; see the module docstring."""

    wait_slice_sec = 0.05

    def __init__(self, checked: CheckedSpec, episodes: list[dict[str, Any]],
                 worker_count: int, *, address: str | None,
                 shared: Mapping[str, SharedEndpoint], run_key: str,
                 **dealing: Unpack[DealingOptions]) -> None:
        super().__init__([RaySlot(i) for i in range(worker_count)], **dealing)
        self.checked, self.episodes = checked, episodes
        self.address = address or "auto"
        self.hosts = RayHosts(checked, shared, worker_count)
        self.run_key = run_key
        self._lost_nodes: set[str] = set()
        self._checked_ref: Any = None
        self.liveness = NodeLiveness()

    # ---- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> RayExecutor:
        # optional: ray (the ray extra)
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
        self.where = ActorPlacement()
        try:
            self.liveness.start()
            self.hosts.start(self.where)
            self._checked_ref = ray.put(pickle.dumps(self.checked))
            for slot in self.slots:
                self.start_worker(slot)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        # optional: ray (the ray extra)
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
        self.liveness.close()
        ray.shutdown()

    # ---- the slot interface ----------------------------------------------------------------
    def start_worker(self, slot: RaySlot) -> None:
        """Start the slot's actor, unless the run's node left and it was not moved yet
        (the slot stays parked: :meth:`_start_parked` tries again)."""
        # optional: ray (the ray extra)
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
        slot.run_ref = slot.pull_ref = None

    def send_episode(self, slot: RaySlot, index: int, attempt: int) -> None:
        assert self.episode_log is not None
        slot.deal(index, attempt, self.episodes[index], self.episode_log(index))

    def wait_events(self, timeout: float, cancelling: bool) -> list[SlotEvent]:
        # optional: ray (the ray extra)
        import ray

        self._check_placement()
        self._start_parked()
        now = time.monotonic()
        for slot in self.slots:
            if slot.index is not None and slot.run_ref is not None:
                slot.pull_if_due(now, PULL_EVERY_SEC)
        waiting = {ref: (s, kind) for s in self.slots
                   for kind, ref in (("setup", s.setup_ref), ("run", s.run_ref),
                                     ("pull", s.pull_ref)) if ref is not None}
        ready: list[Any] = []
        if waiting:
            ready, _ = ray.wait(list(waiting), num_returns=1, timeout=timeout)
            if ready:
                ready, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=0)
        else:
            time.sleep(timeout)
        events: list[SlotEvent] = []
        for ref in sorted(ready, key=lambda r: waiting[r][1] != "pull"):
            slot, kind = waiting[ref]
            if kind == "setup" and slot.setup_ref is ref:
                events.append(self._on_setup(slot))
            elif kind == "pull" and slot.pull_ref is ref:
                slot.on_pull()
            elif kind == "run" and slot.run_ref is ref:
                events.append(self._on_run(slot))
        if not cancelling:
            events.extend(self._on_lost_nodes())
            events.extend(self._unreachable())
        return events

    def kill_worker(self, slot: RaySlot) -> str:
        pid = str((slot.info or {}).get("pid", "?"))
        self._kill(slot)
        return pid

    def cancel_worker(self, slot: RaySlot) -> None:
        if slot.index is not None and slot.actor is not None:
            slot.actor.cancel.remote()

    # ---- actors ----------------------------------------------------------------------------
    def _placement(self) -> dict[str, Any]:
        """The run's placement, minus the nodes this run found lost: Ray still lists them
        (and SPREAD may pick them) until its own ~15 s death timeout."""
        lost_nodes = self._lost_nodes | self.liveness.lost()
        if not lost_nodes or self.where.pinned:
            return self.where.options
        lost = ",".join(sorted(lost_nodes))
        return {**self.where.options, "label_selector": {"ray.io/node-id": f"!in({lost})"}}

    def _start_parked(self) -> None:
        """Slots left without an actor while the run waited to be moved."""
        if self.stop.is_set():
            return
        for slot in self.slots:
            if slot.actor is None:
                self.start_worker(slot)

    def _kill(self, slot: RaySlot) -> None:
        # optional: ray (the ray extra)
        import ray

        if slot.actor is not None:
            ray.kill(slot.actor, no_restart=True)
        slot.actor = slot.setup_ref = slot.run_ref = slot.pull_ref = None
        slot.info = None

    def _check_placement(self) -> None:
        now, timeout = time.monotonic(), place_timeout_sec()
        for slot in self.slots:
            if slot.setup_ref is not None and now - slot.started_at > timeout:
                raise unplaceable(f"worker actor {slot.worker_id}", WORKER_RESOURCES, timeout)

    def _on_setup(self, slot: RaySlot) -> SlotEvent:
        # optional: ray (the ray extra)
        import ray

        try:
            slot.info = ray.get(slot.setup_ref)
        except ray.exceptions.RayError as exc:
            self._kill(slot)
            self.where.suspect()
            # Not the actor's fault when its node left: no start failure counted.
            return StartFailed(slot, remote_error(exc), node_lost=self.where.lost_at is not None)
        slot.setup_ref = None
        info = slot.info
        slot.node = str(info["node_ip"])  # the rows' node
        print(f"evaltui: worker {slot.worker_id} is Ray actor pid {info['pid']} on node "
              f"{info['node_ip']} ({info['node_id'][:8]}), scratch {info['scratch']}",
              file=sys.stderr, flush=True)
        return Ready(slot)

    def _on_run(self, slot: RaySlot) -> SlotEvent:
        # optional: ray (the ray extra)
        import ray

        assert slot.index is not None and slot.sink is not None
        try:
            outcome: EpisodeOutcome = ray.get(slot.run_ref)
        except ray.exceptions.RayActorError as exc:
            cause, node = death_cause(exc), (slot.info or {}).get("node_id")
            alive = alive_nodes() if node else None
            node_lost = bool(NODE_DEATH.search(str(exc))) or (
                alive is not None and node not in alive)
            if not node_lost and node and not self.liveness.check_now(node):
                # Ray still lists the node (it would for ~15 s) but its raylet is silent:
                # e.g. "actor is temporarily unavailable ... rpc_code: 14" after a SIGKILL.
                self._take_node_lost(node)
                cause = f"{cause}; {self.liveness.why(node)}: its node is lost"
                node_lost = True
            return self._died(slot, cause, node_lost=node_lost)
        except ray.exceptions.RayError as exc:  # the body itself raised (not a node)
            outcome = EpisodeOutcome(status=EpisodeStatus.ERROR, step_count=0,
                                     elapsed_sec=time.monotonic() - slot.dealt_at,
                                     error=remote_error(exc))
        else:
            slot.pull_rest()
        slot.run_ref = None
        return Finished(slot, slot.index, outcome)

    def _take_node_lost(self, node_id: str) -> None:
        """The run's rule found ``node_id`` lost: no actor goes there, said once."""
        if node_id in self._lost_nodes:
            return
        self._lost_nodes.add(node_id)
        self.where.lost(node_id)
        why = self.liveness.why(node_id)
        print(f"evaltui: node {node_id[:8]} is lost ({why}); its episodes are retried on "
              "other nodes", file=sys.stderr, flush=True)

    def _on_lost_nodes(self) -> list[SlotEvent]:
        """Deaths of the actors on nodes the run's rule finds lost (busy or not: nothing
        of theirs will answer), before Ray says anything about them."""
        lost = self.liveness.lost()
        if not lost:
            return []
        events: list[SlotEvent] = []
        for slot in self.slots:
            node = (slot.info or {}).get("node_id")
            if slot.actor is None or node not in lost:
                continue
            self._take_node_lost(node)
            events.append(self._died(slot, f"{self.liveness.why(node)}: its node is lost",
                                     node_lost=True))
        return events

    def _unreachable(self) -> list[SlotEvent]:
        """Deaths of busy actors whose pulls stopped being answered: their node is lost."""
        now, events = time.monotonic(), []
        for slot in self.slots:
            if slot.index is None or slot.pull_ref is None:
                continue
            if now - slot.pull_sent > UNREACHABLE_SEC:
                if slot.info is not None:
                    self._take_node_lost(slot.info["node_id"])
                events.append(self._died(slot, f"unreachable for {UNREACHABLE_SEC:.0f} s: "
                                               "its node is lost", node_lost=True))
        return events

    def _died(self, slot: RaySlot, cause: str, node_lost: bool) -> Died:
        """The actor is gone (or given up on): kill it for good; its death for the core."""
        self.where.suspect()
        info = slot.info or {}
        where = (f"node {info.get('node_ip', '?')} {str(info.get('node_id', '?'))[:8]}, "
                 f"pid {info.get('pid', '?')}")
        self._kill(slot)
        return Died(slot, f"{where}, {cause}", node_lost=node_lost)
