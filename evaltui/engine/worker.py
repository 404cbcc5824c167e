"""The worker subprocess: runs whole episodes, each with its own ExecutionLogger.

A worker is forked by the run's zygote (:mod:`evaltui.engine.zygote`), which calls
:func:`serve` in the fresh child. It builds its own copies of the graph's replicated
(env) and inline nodesets -- its :class:`WorkerHandle` -- and connects to the shared ones
(client proxies of hosted nodesets). Then it waits for episode indices on its control
pipe and answers each with the episode's outcome; the LoopRunner, the env and the
per-episode log all live here, so CPU-bound simulators scale with the worker count.

Control pipe protocol (pickled tuples; the pipe is inherited, so it needs no secret):
run -> worker ``("episode", index)`` | ``("stop",)``;
worker -> run ``("ready", pid)`` | ``("failed", traceback)`` | ``("outcome", index,
EpisodeOutcome)``. SIGTERM (or SIGINT) ends the episode in flight as ``cancelled`` at its
next step boundary, reports it, and exits.
"""

from __future__ import annotations

import os
import signal
import threading
import traceback
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from evaltui.engine.datasets import load_episodes
from evaltui.engine.logger import ExecutionLogger
from evaltui.engine.loop import LoopRunner
from evaltui.engine.proxy import RemoteNodeset
from evaltui.engine.specchecks import CheckedSpec
from evaltui.engine.stacking import BatchOfOne, has_batched_nodes
from evaltui.rundir import episode_dir

IDLE_POLL_SEC = 0.1


@dataclass(frozen=True)
class SharedEndpoint:
    """Where a shared nodeset is hosted, and the secret its host expects."""

    url: str
    secret: bytes = field(repr=False)


@dataclass(frozen=True)
class WorkerConfig:
    """What one worker subprocess needs (sent through its control pipe)."""

    run_dir: Path
    slot: int
    checked: CheckedSpec
    shared: dict[str, SharedEndpoint]
    call_timeout: float | None = None


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
                instance = cls(**ns.params)
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


def run_worker(conn: Connection, config: WorkerConfig, stop: threading.Event) -> int:
    """Serve episodes until told to stop; returns the exit code."""
    checked = config.checked
    shared: dict[str, RemoteNodeset] = {}
    handle: WorkerHandle | None = None
    try:
        handle = WorkerHandle(config.slot, checked)
        for name, endpoint in config.shared.items():
            shared[name] = RemoteNodeset(endpoint.url, endpoint.secret,
                                         timeout=config.call_timeout).connect()
        episodes = load_episodes(checked.dataset_path)
        specs = {n: checked.classes[nd.nodeset].node_specs()[nd.op]
                 for n, nd in checked.graph.nodes.items()}
        ev = checked.spec.eval
        assert ev.step_budget is not None  # check_spec resolved it
        loop = LoopRunner(checked.graph, specs, step_budget=ev.step_budget,
                          per_step_budget_sec=ev.per_step_budget_sec, stop=stop)
    except Exception as exc:
        _close(handle, shared)
        conn.send(("failed", "".join(traceback.format_exception(exc)).rstrip()))
        return 1
    conn.send(("ready", os.getpid()))
    try:
        while not stop.is_set():
            if not conn.poll(IDLE_POLL_SEC):
                continue
            try:
                message = conn.recv()
            except EOFError:
                break  # the run is gone
            if message[0] != "episode":
                break
            index = message[1]
            with ExecutionLogger(episode_dir(config.run_dir, index)) as logger:
                outcome = loop.run_episode(episodes[index], handle.lease(shared), logger)
            conn.send(("outcome", index, outcome))
    finally:
        _close(handle, shared)
    return 0


def _close(handle: WorkerHandle | None, shared: Mapping[str, RemoteNodeset]) -> None:
    if handle is not None:
        handle.close()
    for proxy in shared.values():
        proxy.close()


def serve(conn: Connection, config: WorkerConfig) -> int:
    """The worker's main, in a freshly forked child; returns its exit code."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return run_worker(conn, config, stop)
