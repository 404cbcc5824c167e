"""The worker's episode loop: runs whole episodes, each with its own ExecutionLogger.

Shared by every executor whose worker is a process of its own, talking to the run over a
``multiprocessing`` :class:`~multiprocessing.connection.Connection`: the local pool's
forked workers (their inherited pipe, :mod:`evaltui.engine.executor.local.worker`) and
the Slurm executor's job steps (an authenticated channel back to the run,
:mod:`evaltui.engine.executor.slurm.step`). A worker builds its own copies of the graph's
replicated (env) and inline nodesets -- its
:class:`~evaltui.engine.episode.session.WorkerSession`, the per-episode body shared with
the Ray executor -- and connects to the shared ones (client proxies of hosted nodesets).
Then it waits for episode indices on its connection and answers each with the episode's
outcome; the LoopRunner, the env and the per-episode log all live here, so CPU-bound
simulators scale with the worker count.

Protocol (pickled tuples): run -> worker ``("episode", index)`` | ``("stop",)``;
worker -> run ``("ready", pid)`` | ``("failed", traceback)`` | ``("outcome", index,
EpisodeOutcome)`` | ``("skipped", index)``. Episodes run in the order dealt; the run may
deal one ahead, which waits in the connection. The ``stop`` event (SIGTERM or SIGINT in
the worker) ends the episode in flight as ``cancelled`` at its next step boundary, reports
it, reports every episode still waiting ``skipped``, and returns. After an ``error``
outcome (a node raised, so the nodesets may be in any state) the worker starts nothing
more: the run gives the episode dealt ahead to a fresh worker.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.session import WorkerSession
from evaltui.engine.graph.datasets import load_episodes
from evaltui.engine.graph.specchecks import CheckedSpec
from evaltui.engine.hosting.channel import SharedEndpoint
from evaltui.engine.hosting.proxy import RemoteNodeset
from evaltui.engine.hosting.replicaclient import ReplicatedNodeset
from evaltui.engine.usererrors import NodesetConstructorError, one_line
from evaltui.rundir.layout import episode_dir

IDLE_POLL_SEC = 0.1


@dataclass(frozen=True)
class WorkerConfig:
    """What one worker subprocess needs (sent through its control pipe)."""

    run_dir: Path
    slot: int
    checked: CheckedSpec
    shared: dict[str, SharedEndpoint]
    call_timeout: float | None = None


def run_worker(conn: Connection, config: WorkerConfig, stop: threading.Event) -> int:
    """Serve episodes until told to stop; returns the exit code."""
    checked = config.checked
    shared: dict[str, RemoteNodeset | ReplicatedNodeset] = {}
    session: WorkerSession | None = None
    try:
        for name, endpoint in config.shared.items():
            shared[name] = ReplicatedNodeset(
                endpoint, config.slot, timeout=config.call_timeout).connect() \
                if len(endpoint.urls) > 1 else RemoteNodeset(
                    endpoint.url, endpoint.secret, timeout=config.call_timeout).connect()
        session = WorkerSession(config.slot, checked, shared, stop)
        episodes = load_episodes(checked.dataset_path)
    except Exception as exc:
        _close(session, shared)
        # One line for the run's error (the TUI's detail pane, eval's stderr); the
        # traceback goes to stderr: run.log.
        detail = exc.detail if isinstance(exc, NodesetConstructorError) else \
            "".join(traceback.format_exception(exc)).rstrip()
        print(detail, file=sys.stderr, flush=True)
        line = str(exc) if isinstance(exc, NodesetConstructorError) else one_line(exc)
        conn.send(("failed", f"{line}; its traceback is in run.log"))
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
            outcome = session.run_episode(episodes[index], episode_dir(config.run_dir, index))
            conn.send(("outcome", index, outcome))
            if outcome.status is EpisodeStatus.ERROR:
                break
        if stop.is_set():
            _skip_dealt(conn)
    finally:
        _close(session, shared)
    return 0


def _skip_dealt(conn: Connection) -> None:
    """Report the episodes dealt ahead, still in the pipe, as never started."""
    with suppress(EOFError, OSError):  # the run is gone: nobody to tell
        while conn.poll(0):
            message = conn.recv()
            if message[0] == "episode":
                conn.send(("skipped", message[1]))


def _close(session: WorkerSession | None,
           shared: Mapping[str, RemoteNodeset | ReplicatedNodeset]) -> None:
    if session is not None:
        session.close()
    for proxy in shared.values():
        proxy.close()
