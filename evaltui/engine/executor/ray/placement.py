"""Where a run's Ray actors go, and following its scheduler when its node leaves.

A run admitted by a cluster scheduler (``evaltui serve --ray``) is pinned to one GPU of
one node (:func:`~evaltui.engine.executor.ray.resources.node_placement`): its memory was reserved
there. If that node leaves the cluster nothing can start there again, so the scheduler
reserves another GPU for the run in the cluster ledger (scheduler/replacing.py) and the
run reads it back from there (:meth:`ActorPlacement.usable`): its retried episodes and new
actors go to the new node. Until then the run starts no actor; if no scheduler moves it
within ``place_timeout_sec`` the run fails saying so. A run not placed by a scheduler
(SPREAD) never waits here. A run with replicas is pinned to every node GPU reserved for
it (``REPLICA_GPUS_ENV``): one replica actor on each, its other actors on the first.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from evaltui.engine.executor.errors import ExecutorError
from evaltui.engine.executor.ray.resources import (
    LEDGER_NAME,
    LEDGER_NAMESPACE,
    NODE_GPU_ENV,
    NODE_ID_ENV,
    REPLICA_GPUS_ENV,
    RUN_ID_ENV,
    node_placement,
    pinned_to,
    place_timeout_sec,
)

ASK_EVERY_SEC = 0.25
"""How often a run whose node left asks the ledger where it was moved (one actor call)."""


def alive_nodes() -> set[str] | None:
    """Ids of the nodes Ray lists alive; None when the GCS does not answer."""
    # optional: ray (the ray extra)
    import ray

    try:
        return {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
    except Exception:
        return None


def replica_gpus(env: Mapping[str, str]) -> list[tuple[str, int, str]]:
    """The node GPUs of ``REPLICA_GPUS_ENV`` (a run with replicas a cluster scheduler
    placed); a malformed value is said once and read as none (the run then keeps one
    replica on its pinned GPU)."""
    raw = env.get(REPLICA_GPUS_ENV)
    if not raw:
        return []
    try:
        return [(str(node_id), int(gpu), str(name)) for node_id, gpu, name in json.loads(raw)]
    except (ValueError, TypeError) as exc:
        print(f"evaltui: ignoring {REPLICA_GPUS_ENV}={raw!r}: {exc}", file=sys.stderr,
              flush=True)
        return []


class ActorPlacement:
    """The actor options of one run; see the module docstring."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.options: dict[str, Any] = node_placement(env)
        pinned = self.options.get("scheduling_strategy") != "SPREAD"
        self.node_id: str | None = env.get(NODE_ID_ENV) if pinned else None
        self.gpu: int | None = int(env[NODE_GPU_ENV]) if pinned else None
        self.run_id = env.get(RUN_ID_ENV)
        self.replica_gpus = replica_gpus(env) if pinned else []
        """A run with replicas: every (node id, GPU, node name) its scheduler reserved,
        one replica actor to start on each (empty: the run is on one GPU, or SPREAD)."""
        self.lost_at: float | None = None
        """When the pinned node was found gone (monotonic); None while it is there."""
        self.moved = False
        """Set when the run was moved; the executor restarts its hosts and clears it."""
        self._asked_at = 0.0

    @property
    def pinned(self) -> bool:
        return self.node_id is not None

    def suspect(self) -> None:
        """An actor died or could not start: is the pinned node still in the cluster?"""
        if self.node_id is None or self.lost_at is not None:
            return
        alive = alive_nodes()
        if alive is not None and self.node_id not in alive:
            self.lost(self.node_id)

    def lost(self, node_id: str) -> None:
        """``node_id`` is gone (Ray says so, or its actors stopped answering)."""
        if node_id == self.node_id and self.lost_at is None:
            self.lost_at = time.monotonic()
            print(f"evaltui: the run's node {node_id[:8]} left the Ray cluster; waiting for "
                  "its scheduler to move the run to another node", file=sys.stderr, flush=True)

    def usable(self) -> bool:
        """May actors be started now? Follows a move; raises once waiting is hopeless."""
        if self.lost_at is None:
            return True
        now = time.monotonic()
        if now - self._asked_at >= ASK_EVERY_SEC:
            self._asked_at = now
            there = self._ask_ledger()
            if there is not None and there[0] != self.node_id:
                self._move(*there)
                return True
        timeout = place_timeout_sec()
        if now - self.lost_at > timeout:
            assert self.node_id is not None
            why = ("no scheduler moved it to another node" if self.run_id else
                   f"it has no run id ({RUN_ID_ENV}) to be moved by")
            raise ExecutorError(f"the run's node {self.node_id[:8]} left the Ray cluster and "
                                f"{why} within {timeout:g} s (EVALTUI_RAY_PLACE_TIMEOUT_SEC)")
        return False

    def _move(self, node_id: str, gpu: int, name: str) -> None:
        assert self.node_id is not None
        print(f"evaltui: the run moved from node {self.node_id[:8]} to "
              f"{name or 'node ' + node_id[:8]} GPU{gpu} ({node_id[:8]})",
              file=sys.stderr, flush=True)
        if self.replica_gpus:  # its first replica follows; those on the lost node are gone
            lost = self.node_id
            self.replica_gpus = [(node_id, gpu, name),
                                 *(g for g in self.replica_gpus[1:] if g[0] != lost)]
        self.node_id, self.gpu = node_id, gpu
        self.options = pinned_to(node_id, gpu, self.run_id)
        self.lost_at, self.moved = None, True

    def _ask_ledger(self) -> tuple[str, int, str] | None:
        """(node id, GPU, node name) the ledger holds for this run, if any."""
        if not self.run_id:
            return None
        # optional: ray (the ray extra)
        import ray

        try:
            ledger = ray.get_actor(LEDGER_NAME, namespace=LEDGER_NAMESPACE)
            entry: Any = ray.get(ledger.placement.remote(self.run_id), timeout=2.0)
        except Exception:  # no ledger (yet), or it is restarting: ask again later
            return None
        if not entry:
            return None
        return str(entry["node_id"]), int(entry["index"]), str(entry.get("node") or "")
