"""Replicas on Ray: a shared nodeset with ``replicas`` as several NodesetActors, one per
logical GPU of the cluster, and a worker's client of them (DESIGN §12).

Each replica actor asks for a whole logical GPU (``num_gpus=1``) besides its ``vram_mb``
share, so Ray puts no two replicas on one GPU and sets each one's
``CUDA_VISIBLE_DEVICES``. ``per_gpu`` is every GPU the cluster declares; ``N`` is at most
that many; a cluster without GPUs gets one replica asking as any shared nodeset does
(said once). A run a cluster scheduler admitted with replicas has one actor pinned to
each node GPU it reserved (``ActorPlacement.replica_gpus``), asking Ray for nothing
more. Fewer GPUs than ``min_replicas`` fails the run; a replica that finds no
room within the placement timeout leaves the run to those placed, if they are at least
``min_replicas`` (:meth:`~evaltui.engine.executor.ray.hosts.RayHosts.start`).

A worker reaches the replicas through :class:`RayReplicaClient` with the local rule
(``slot``: worker slot i on live replica ``i % R``): at setup it pings every replica and
leaves out the ones that are gone, and a call to an actor that died raises (the episode
is retried by the dealing core) after marking it gone, so the next worker's calls go to
the others.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from evaltui.engine.executor.errors import ExecutorError
from evaltui.engine.graph.definition import NodesetDef

SETUP_PING_SEC = 10.0


def replica_count(name: str, ns: NodesetDef) -> int:
    """How many replica actors of ``ns`` to start on this cluster."""
    import ray

    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus == 0:
        print(f"evaltui: no GPU in the Ray cluster: shared nodeset {name!r} (replicas: "
              f"{ns.replicas}) runs one replica", file=sys.stderr, flush=True)
        return 1
    if gpus < ns.min_replicas:
        raise ExecutorError(f"shared nodeset {name!r} needs min_replicas={ns.min_replicas} "
                            f"GPUs; the Ray cluster has {gpus}")
    wanted = gpus if ns.replicas == "per_gpu" else int(ns.replicas or 1)
    return max(1, min(wanted, gpus))


def replica_asks(asks: Mapping[str, Any], count: int) -> dict[str, Any]:
    """One replica's resource options: a whole GPU each when there are several."""
    if count <= 1:
        return dict(asks)
    return {**asks, "num_cpus": 0, "num_gpus": 1}


class RayReplicaClient:
    """A worker's handle on every replica actor of one nodeset (RayNodeset's interface)."""

    def __init__(self, handles: list[Any], slot: int) -> None:
        import ray

        self.slot = slot
        self.handles = []
        for handle in handles:  # the replicas still up when this worker starts
            try:
                ray.get(handle.actor.ping.remote(), timeout=SETUP_PING_SEC)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                continue
            self.handles.append(handle)
        if not self.handles:
            raise ExecutorError("every replica of the shared nodeset is gone")
        self.gone: set[int] = set()

    def _send(self, request: Any) -> Any:
        import ray

        live = [i for i in range(len(self.handles)) if i not in self.gone] or \
            list(range(len(self.handles)))
        i = live[self.slot % len(live)]
        try:
            return request(self.handles[i])
        except ray.exceptions.RayActorError:
            self.gone.add(i)
            raise

    def call(self, op: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self._send(lambda h: h.call(op, inputs))  # type: ignore[no-any-return]

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        return self._send(lambda h: h.set_episode(episode))  # type: ignore[no-any-return]

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        self._send(lambda h: h.begin_episode(episode))

    def trajectory(self) -> Any:
        return self._send(lambda h: h.trajectory())

    def close(self) -> None:
        pass  # the executor owns the actors


class RayReplicaNotes:
    """summary.json's ``replicas`` for the Ray executor: each replica actor's GPU, pid,
    requests served and state, read from the actors by a thread (``POLL_SEC``)."""

    POLL_SEC = 0.5

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sets: dict[str, list[tuple[Any, dict[str, Any]]]] = {}

    def add(self, name: str, actor: Any, info: Mapping[str, Any], label: str | None = None
            ) -> None:
        """A replica actor as its ping described it (node, pid, GPU ids), or on the node
        GPU ``label`` it was pinned to (as its scheduler's record names it)."""
        node = str(info.get("node_name") or f"node-{str(info['node_id'])[:6]}")
        gpu = ",".join(info.get("gpu_ids") or []) or "?"
        note = {"gpu": label or f"{node} GPU{gpu}", "pid": info["pid"], "requests": 0,
                "state": "up"}
        with self._lock:
            self._sets.setdefault(name, []).append((actor, note))

    def start(self) -> None:
        import threading

        if self._thread is None and self._sets:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._poll, name="ray-replica-stats",
                                            daemon=True)
            self._thread.start()

    def snapshot(self) -> dict[str, list[dict[str, Any]]] | None:
        with self._lock:
            if not self._sets:
                return None
            return {name: [dict(note) for _, note in rs] for name, rs in self._sets.items()}

    def stop(self) -> None:
        """A last reading, then no more (before the actors are killed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._read()

    def mark_lost(self) -> None:
        """Every replica so far is gone (the run's node left; they are hosted again)."""
        with self._lock:
            for rs in self._sets.values():
                for _, note in rs:
                    note["state"] = "lost"

    def _poll(self) -> None:
        while not self._stop.wait(self.POLL_SEC):
            self._read()

    def _read(self) -> None:
        import ray

        with self._lock:
            up = [(a, n) for rs in self._sets.values() for a, n in rs if n["state"] == "up"]
        for actor, note in up:
            try:
                served = int(ray.get(actor.stats.remote(), timeout=2.0).get("requests", 0))
            except ray.exceptions.RayActorError:
                with self._lock:
                    note["state"] = "lost"
                continue
            except Exception:  # slow or unreachable for now: keep the last reading
                continue
            with self._lock:
                note["requests"] = max(note["requests"], served)
