"""The one replica manager's core (DESIGN §12), for its two placements (local hosts,
:mod:`evaltui.engine.run.replicas`; Ray actors, :mod:`evaltui.engine.executor.ray.hosts`):
how many replicas a nodeset gets, whether enough started, and what the run records of them
(summary.json's ``replicas``). Which replica a call goes to, and what a lost one means to
a worker, is their one client's (:class:`~evaltui.engine.hosting.replicaclient.ReplicaCalls`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaltui.engine.graph.definition import NodesetDef


class ReplicaGone(Exception):
    """Raised by a book's ``read_served``: the replica is gone for good (lost)."""


def replica_count(name: str, ns: NodesetDef, gpus: int, has: str,
                  error: type[Exception]) -> int:
    """How many replicas of ``ns`` to start on ``gpus`` GPUs (1 with none: on the host);
    ``error`` naming ``has`` (the GPUs there are) when fewer than ``min_replicas``."""
    if gpus == 0:
        return 1
    if gpus < ns.min_replicas:
        raise error(f"shared nodeset {name!r} needs min_replicas={ns.min_replicas} "
                    f"GPUs; {has}")
    wanted = gpus if ns.replicas == "per_gpu" else int(ns.replicas or 1)
    return max(1, min(wanted, gpus))


def enough_started(ns: NodesetDef, started: int, wanted: int) -> bool:
    """The run goes on with the replicas that started, without the others."""
    return started >= max(1, min(ns.min_replicas, wanted))


@dataclass
class BookedReplica:
    """One replica as the run records it (a host restarted at its URL has a new ``pid``)."""

    handle: Any
    gpu: str | None
    pid: Callable[[], int | None]
    requests: int = 0
    state: str = "up"

    def note(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "pid": self.pid(), "requests": self.requests,
                "state": self.state}


class ReplicaBook:
    """The replicas of one run's nodesets and what summary.json says of them. A thread
    calls ``read_served(replica)`` for each one that is up every ``poll_sec`` (and once at
    ``stop``): the requests it has served, ReplicaGone when it is lost, any other error to
    keep its last reading."""

    def __init__(self, read_served: Callable[[BookedReplica], int], poll_sec: float) -> None:
        self.read_served, self.poll_sec = read_served, poll_sec
        self.lock = threading.Lock()
        self.sets: dict[str, list[BookedReplica]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, name: str, *replicas: BookedReplica) -> None:
        with self.lock:
            self.sets.setdefault(name, []).extend(replicas)

    def lose_all(self) -> None:
        """Every replica so far is lost (the run's node left with them)."""
        with self.lock:
            for replicas in self.sets.values():
                for replica in replicas:
                    replica.state = "lost"

    def snapshot(self) -> dict[str, list[dict[str, Any]]] | None:
        """summary.json's ``replicas`` (None without replicated nodesets)."""
        with self.lock:
            if not self.sets:
                return None
            return {name: [r.note() for r in rs] for name, rs in self.sets.items()}

    def start(self) -> None:
        if self._thread is None and self.sets:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._poll, name="replica-stats",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """A last reading (before the replicas stop), then no more."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._read()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_sec):
            self._read()

    def _read(self) -> None:
        with self.lock:
            up = [r for rs in self.sets.values() for r in rs if r.state == "up"]
        for replica in up:
            try:
                served = self.read_served(replica)
            except ReplicaGone:
                with self.lock:
                    replica.state = "lost"
                continue
            except Exception:  # slow, dying or restarting: keep the last reading
                continue
            with self.lock:
                replica.requests = max(replica.requests, served)
