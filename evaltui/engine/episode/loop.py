"""LoopRunner: runs one episode of a graph, firing its nodes in topological order per step.

The loop owns no processes: it is handed a ``registry`` of nodeset hosts by name (local
instances here; remote proxies or a worker's replicas later) and an ExecutionLogger for
the episode. Exceptions in nodes become the episode's ``error`` status; they never
escape to the caller.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.logger import ExecutionLogger
from evaltui.engine.episode.metrics import episode_metrics, failure_metrics
from evaltui.engine.episode.trajrecord import trajectory_record
from evaltui.engine.graph.definition import GraphDefinition, split_port
from evaltui.engine.nodes import NodeSpec, Trajectory


class LoopNodeset(Protocol):
    """What the loop needs of a nodeset, whether it lives in this process or another."""

    def call(self, op: str, inputs: Mapping[str, Any]) -> dict[str, Any]: ...
    def begin_episode(self, episode: Mapping[str, Any]) -> None: ...


class StepTimeout(Exception):
    """A step took longer than ``per_step_budget_sec``."""


@dataclass
class EpisodeOutcome:
    status: EpisodeStatus
    step_count: int
    elapsed_sec: float
    error: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    trajectory: dict[str, Any] | None = None
    """The trajectory record behind ``metrics`` (written as the ep dir's trajectory.json)."""


class LoopRunner:
    """Fires a checked graph step by step for one episode at a time."""

    def __init__(
        self,
        graph: GraphDefinition,
        specs: Mapping[str, NodeSpec],
        *,
        step_budget: int,
        per_step_budget_sec: float | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.graph = graph
        self.specs = dict(specs)
        self.order = graph.topological_order()
        self.step_budget = step_budget
        self.per_step_budget_sec = per_step_budget_sec
        self.stop = stop or threading.Event()
        # Pre-resolve the edges into per-node input sources: (port, src_node|"@", src_port).
        self._sources: dict[str, list[tuple[str, str, str]]] = {n: [] for n in graph.nodes}
        for src, dst in graph.edges:
            d_node, d_port = split_port(dst, "edges")
            self._sources[d_node].append((d_port, *split_port(src, "edges")))

    def run_episode(
        self, episode: Mapping[str, Any], registry: Mapping[str, Any], logger: ExecutionLogger
    ) -> EpisodeOutcome:
        """Run one episode to its end; never raises for a node's fault."""
        started = time.perf_counter()
        env = registry[self.graph.loop.env]
        step = 0
        status, error = EpisodeStatus.OK, None
        try:
            t0 = time.perf_counter()
            ports = dict(env.set_episode(episode))
            logger.record("episode_start", step=0, node=None, nodeset=self.graph.loop.env,
                          dur_ms=(time.perf_counter() - t0) * 1e3,
                          inputs={"episode_id": episode.get("episode_id")}, outputs=ports)
            for ns_name, ns in self.graph.nodesets.items():
                if ns.parallelism != "shared":
                    registry[ns_name].begin_episode(episode)
            logger.flush()
            while step < self.step_budget:
                if self.stop.is_set():
                    status, error = EpisodeStatus.CANCELLED, "run cancelled"
                    break
                step += 1
                done = self._run_step(step, ports, registry, logger)
                logger.flush()
                if done:
                    break
        except StepTimeout as exc:
            status, error = EpisodeStatus.TIMEOUT, str(exc)
            logger.record("error", step=step, error=error)
        except Exception as exc:  # a node's fault is the episode's, not the run's
            status = EpisodeStatus.ERROR
            error = "".join(traceback.format_exception(exc)).rstrip()
            logger.record("error", step=step, error=error)
        metrics, trajectory, status, error = self._score(env, episode, status, error, logger,
                                                         step)
        elapsed = time.perf_counter() - started
        logger.record("episode_end", step=step, outputs={"status": status.value,
                      "metrics": metrics, "step_count": step}, error=error,
                      dur_ms=elapsed * 1e3)
        logger.flush()
        return EpisodeOutcome(status=status, step_count=step, elapsed_sec=elapsed, error=error,
                              metrics=metrics, trajectory=trajectory)

    def _run_step(self, step: int, ports: dict[str, Any], registry: Mapping[str, LoopNodeset],
                  logger: ExecutionLogger) -> bool:
        step_started = time.perf_counter()
        outputs: dict[str, dict[str, Any]] = {}
        for name in self.order:
            nd = self.graph.nodes[name]
            spec = self.specs[name]
            inputs = {
                port: ports[src_port] if src_node == "@" else outputs[src_node][src_port]
                for port, src_node, src_port in self._sources[name]
            }
            t0 = time.perf_counter()
            try:
                result = registry[nd.nodeset].call(nd.op, inputs)
            except Exception as exc:
                logger.record("error", step=step, node=name, nodeset=nd.nodeset,
                              dur_ms=(time.perf_counter() - t0) * 1e3, inputs=inputs,
                              error="".join(traceback.format_exception_only(exc)).strip())
                raise
            dur_ms = (time.perf_counter() - t0) * 1e3
            missing = [p for p in spec.outputs if p not in result]
            if missing:
                raise ValueError(f"node {name!r} ({nd.nodeset}.{nd.op}) did not return its "
                                 f"outputs {missing}; it returned {sorted(result)}")
            outputs[name] = result
            logger.record("fire", step=step, node=name, nodeset=nd.nodeset, dur_ms=dur_ms,
                          inputs=inputs, outputs=result)
            budget = self.per_step_budget_sec
            if budget is not None and time.perf_counter() - step_started > budget:
                took = time.perf_counter() - step_started
                raise StepTimeout(f"step {step} took {took:.3f} s, over per_step_budget_sec "
                                  f"{budget} (last node: {name})")
        step_out = outputs[self.graph.loop.step]
        for port in ports:
            if port in step_out:
                ports[port] = step_out[port]
        return bool(step_out["done"])

    def _score(self, env: Any, episode: Mapping[str, Any], status: EpisodeStatus,
               error: str | None, logger: ExecutionLogger, step: int
               ) -> tuple[dict[str, float], dict[str, Any] | None, EpisodeStatus, str | None]:
        """Metrics and trajectory record of the episode that just ended (DESIGN §11).

        An ``error`` or ``timeout`` episode is scored as a failure from whatever partial
        trajectory the env can still report; a ``cancelled`` one keeps its trajectory but
        no metrics (it is re-run on resume).
        """
        failed = status in (EpisodeStatus.ERROR, EpisodeStatus.TIMEOUT)
        reference = episode.get("reference_path") or None
        geodesic = episode.get("geodesic_distance")
        d_th = float(getattr(env, "success_distance", 1.0))
        traj: Trajectory | None = None
        try:
            traj = env.trajectory()
            if status is EpisodeStatus.CANCELLED:
                metrics: dict[str, float] = {}
            else:
                metrics = episode_metrics(traj, reference, geodesic, d_th, failed=failed)
        except Exception as exc:
            if not failed and status is not EpisodeStatus.CANCELLED:
                status, failed = EpisodeStatus.ERROR, True
                error = "metrics failed: " + "".join(traceback.format_exception(exc)).rstrip()
                logger.record("error", step=step, error=error)
            traj = None
            metrics = ({} if status is EpisodeStatus.CANCELLED else failure_metrics(
                has_reference=reference is not None, has_geodesic=geodesic is not None))
        record = trajectory_record(episode, status, traj, success_distance=d_th)
        return metrics, record, status, error
