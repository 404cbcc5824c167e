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
from evaltui.engine.hosting.replicabook import replica_count as book_count
from evaltui.engine.hosting.replicaclient import ReplicaCalls, SlotSpread

SETUP_PING_SEC = 10.0


def replica_count(name: str, ns: NodesetDef) -> int:
    """How many replica actors of ``ns`` to start on this cluster (the book's rule)."""
    import ray  # optional: ray (the ray extra)

    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus == 0:
        print(f"evaltui: no GPU in the Ray cluster: shared nodeset {name!r} (replicas: "
              f"{ns.replicas}) runs one replica", file=sys.stderr, flush=True)
    return book_count(name, ns, gpus, f"the Ray cluster has {gpus}", ExecutorError)


def replica_asks(asks: Mapping[str, Any], count: int) -> dict[str, Any]:
    """One replica's resource options: a whole GPU each when there are several."""
    if count <= 1:
        return dict(asks)
    return {**asks, "num_cpus": 0, "num_gpus": 1}


class RayReplicaClient(ReplicaCalls):
    """A worker's handle on every replica actor of one nodeset (RayNodeset's interface):
    the replicas' one client, its targets the actors still up when the worker starts."""

    def __init__(self, handles: list[Any], slot: int) -> None:
        import ray  # optional: ray (the ray extra)

        up = []
        for handle in handles:  # the replicas still up when this worker starts
            try:
                ray.get(handle.actor.ping.remote(), timeout=SETUP_PING_SEC)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                continue
            up.append(handle)
        if not up:
            raise ExecutorError("every replica of the shared nodeset is gone")
        super().__init__(up, SlotSpread(slot, len(up)), dying=(ray.exceptions.RayActorError,))

    def close(self) -> None:
        pass  # the executor owns the actors
