"""The per-episode body every executor runs: a worker's own nodesets and its loop.

A local worker (:mod:`evaltui.engine.executor.local.worker`, a fork of the zygote) and a Ray worker
actor (:mod:`evaltui.engine.executor.ray.actors`) both build one :class:`WorkerSession` and call
:meth:`WorkerSession.run_episode` per dealt episode: lease the worker's nodesets in front
of the shared ones, reset the env, run the loop, log into the episode's dir and score
the trajectory. Sharing this one body is what keeps the rows of the two executors equal.
"""

from __future__ import annotations

import threading
import traceback
from collections import ChainMap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.engine.episode.logger import ExecutionLogger
from evaltui.engine.episode.loop import EpisodeOutcome, LoopRunner
from evaltui.engine.graph.specchecks import CheckedSpec
from evaltui.engine.hosting.stacking import BatchOfOne, has_batched_nodes
from evaltui.engine.usererrors import build_nodeset


class WorkerHandle:
    """A worker's own nodesets, leased to each episode in front of the global registry.

    ``overrides`` hold this worker's replicas of the replicated nodesets and its
    instances of the inline ones; the LoopRunner looks a nodeset up there first, then in
    the global registry of shared proxies.
    """

    def __init__(self, worker_id: int, checked: CheckedSpec) -> None:
        self.worker_id = worker_id
        self.overrides: dict[str, Any] = {}
        try:
            for name, ns in checked.graph.nodesets.items():
                if ns.parallelism == "shared":
                    continue
                cls = checked.classes[name]
                instance = build_nodeset(name, cls, ns.params)
                self.overrides[name] = BatchOfOne(instance) if has_batched_nodes(cls) else instance
        except BaseException:
            self.close()
            raise

    def lease(self, shared: Mapping[str, Any]) -> ChainMap[str, Any]:
        """The registry one episode runs against."""
        return ChainMap(self.overrides, dict(shared))

    def close(self) -> None:
        for instance in self.overrides.values():
            try:
                instance.close()
            except Exception:  # closing must go on for the others; the error is logged
                traceback.print_exc()
        self.overrides.clear()


class WorkerSession:
    """One worker's nodesets plus the loop that runs whole episodes on them.

    ``shared`` maps each shared nodeset to something with the nodeset's ``call`` /
    ``set_episode`` / ``begin_episode`` / ``trajectory`` (a channel proxy locally, a Ray
    actor proxy on a cluster). ``stop`` ends the episode in flight ``cancelled`` at its
    next step boundary. The session does not own ``shared``.
    """

    def __init__(self, slot: int, checked: CheckedSpec, shared: Mapping[str, Any],
                 stop: threading.Event) -> None:
        self.shared = dict(shared)
        self.handle = WorkerHandle(slot, checked)
        try:
            specs = {n: checked.classes[nd.nodeset].node_specs()[nd.op]
                     for n, nd in checked.graph.nodes.items()}
            ev = checked.spec.eval
            assert ev.step_budget is not None  # check_spec resolved it
            self.loop = LoopRunner(checked.graph, specs, step_budget=ev.step_budget,
                                   per_step_budget_sec=ev.per_step_budget_sec, stop=stop)
        except BaseException:
            self.handle.close()
            raise

    def run_episode(self, episode: Mapping[str, Any], ep_dir: Path) -> EpisodeOutcome:
        """Run one episode, logging into ``ep_dir`` (log.jsonl, frames.bin, assets/)."""
        with ExecutionLogger(ep_dir) as logger:
            return self.loop.run_episode(episode, self.handle.lease(self.shared), logger)

    def close(self) -> None:
        self.handle.close()
