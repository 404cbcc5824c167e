"""The Ray executor's shared nodesets: each hosted by a NodesetActor (the batching server
of the local pool's hosts, in an actor), placed like the run's workers.

A shared nodeset the spec gives a URL for is not hosted here: the workers call that URL.
:meth:`RayHosts.arg` is what every worker actor's setup gets, one entry per shared
nodeset: ``("url", endpoint)`` or ``("ray", actor)``.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from evaltui.engine.executor.errors import ExecutorError, NodesetBuildError
from evaltui.engine.executor.ray.actors import NodesetActor
from evaltui.engine.executor.ray.placement import ActorPlacement, alive_nodes
from evaltui.engine.executor.ray.replicas import replica_asks, replica_count
from evaltui.engine.executor.ray.resources import (
    asked_text,
    host_resources,
    pinned_to,
    place_timeout_sec,
    unplaceable,
)
from evaltui.engine.graph.specchecks import CheckedSpec
from evaltui.engine.hosting.batching import HOST_MAX_BATCH_SIZE, HOST_MAX_WAIT_MS
from evaltui.engine.hosting.channel import SharedEndpoint
from evaltui.engine.hosting.replicabook import (
    BookedReplica,
    ReplicaBook,
    ReplicaGone,
    enough_started,
)


class RayHosts:
    """The host actors of one run's shared nodesets; see the module docstring."""

    def __init__(self, checked: CheckedSpec, given: Mapping[str, SharedEndpoint],
                 callers: int) -> None:
        self.checked, self.given, self.callers = checked, dict(given), callers
        self.actors: dict[str, Any] = {}
        self.replicas: dict[str, list[Any]] = {}
        """The replica actors of nodesets with ``replicas`` (:mod:`.replicas`)."""
        self.notes = ReplicaBook(ray_served, poll_sec=0.5)
        """What summary.json says of them (``replicas``)."""

    def shared(self) -> list[str]:
        return [name for name, ns in self.checked.graph.nodesets.items()
                if ns.parallelism == "shared"]

    def arg(self) -> dict[str, tuple[str, Any]]:
        """Each shared nodeset as a worker actor reaches it."""
        return {name: ("url", self.given[name]) if name in self.given
                else ("rays", self.replicas[name]) if name in self.replicas
                else ("ray", self.actors[name]) for name in self.shared()}

    def start(self, where: ActorPlacement) -> None:
        """Start a host actor per shared nodeset without a given URL (one per GPU for a
        nodeset with ``replicas``), where the run is placed; a clear run error if one
        cannot be placed within the timeout."""
        for name in self.shared():
            if name in self.given:
                continue
            ns = self.checked.graph.nodesets[name]
            asks = host_resources(self.checked, [name], where.pinned)[name]
            if ns.replicas is not None and where.replica_gpus:
                self._start_pinned_replicas(name, asks, where)
                continue
            if ns.replicas is None or where.pinned:
                if ns.replicas is not None:  # the cluster scheduler placed it on one GPU
                    print(f"evaltui: shared nodeset {name!r} asks for replicas "
                          f"({ns.replicas}); the run is pinned to one GPU: one actor",
                          file=sys.stderr, flush=True)
                self.actors[name] = self._start_actor(name, asks, where)
                continue
            count = replica_count(name, ns)
            actors = self.replicas[name] = []
            for _ in range(count):
                try:
                    actors.append(self._start_actor(name, replica_asks(asks, count), where,
                                                    replica=True))
                except ExecutorError as exc:  # no room for one more: enough if min started
                    if not enough_started(ns, len(actors), count):
                        raise
                    print(f"evaltui: no room for another replica of shared nodeset {name!r} "
                          f"({exc}); going on with {len(actors)} of {count}",
                          file=sys.stderr, flush=True)
                    break
        self.notes.start()

    def _start_pinned_replicas(self, name: str, asks: dict[str, Any], where: ActorPlacement
                               ) -> None:
        """One replica actor on each node GPU the cluster scheduler reserved (up to the
        replica count), pinned there as a one-GPU run's actors are: their memory is held
        in the cluster ledger already, so they ask Ray for nothing more."""
        ns = self.checked.graph.nodesets[name]
        alive = alive_nodes()
        gpus = [g for g in where.replica_gpus if alive is None or g[0] in alive]
        if not gpus:
            raise ExecutorError(f"shared nodeset {name!r}: every node GPU reserved for its "
                                "replicas left the Ray cluster")
        wanted = len(gpus) if ns.replicas == "per_gpu" else min(len(gpus), int(ns.replicas or 1))
        actors = self.replicas[name] = []
        failed: ExecutorError | None = None
        for node_id, gpu, node in gpus[:wanted]:
            label = f"{node or 'node-' + node_id[:6]} GPU{gpu}"
            try:
                actors.append(self._start_actor(name, asks, where, replica=True, label=label,
                                                options=pinned_to(node_id, gpu, where.run_id)))
            except ExecutorError as exc:  # its node is going: enough if min started
                failed = exc
                print(f"evaltui: replica of shared nodeset {name!r} on {label} cannot start "
                      f"({exc})", file=sys.stderr, flush=True)
        if failed is not None and not enough_started(ns, len(actors), wanted):
            raise failed

    def _start_actor(self, name: str, asks: dict[str, Any], where: ActorPlacement,
                     replica: bool = False, label: str | None = None,
                     options: dict[str, Any] | None = None) -> Any:
        # optional: ray (the ray extra)
        import ray

        ns = self.checked.graph.nodesets[name]
        actor: Any = ray.remote(NodesetActor).options(
            max_restarts=0, max_task_retries=0, max_concurrency=self.callers + 4,
            name=None, **asks, **(where.options if options is None else options)).remote(
                ns.impl, dict(ns.params), HOST_MAX_BATCH_SIZE,
                HOST_MAX_WAIT_MS, self.checked.spec.active_workspace_dir,
                None if ns.environment is None else pickle.dumps(self.checked.classes[name]))
        try:
            info: Any = ray.get(actor.ping.remote(), timeout=place_timeout_sec())
        except ray.exceptions.GetTimeoutError:
            ray.kill(actor)
            raise unplaceable(f"the host actor of shared nodeset {name!r}", asks,
                              place_timeout_sec()) from None
        except ray.exceptions.RayError as exc:
            ray.kill(actor)
            raise NodesetBuildError(f"the shared nodeset {name!r} cannot start: {exc}") from exc
        gpu = f" (replica on GPU {','.join(info['gpu_ids'])})" if replica else ""
        if label is not None:
            gpu = f" (replica on {label})"
        if replica:
            self.notes.add(name, booked(actor, info, label))
        print(f"evaltui: shared nodeset {name} is Ray actor pid {info['pid']} on node "
              f"{info['node_id'][:8]}, asking {asked_text(asks)}{gpu}", file=sys.stderr,
              flush=True)
        return actor

    def restart(self, where: ActorPlacement) -> None:
        """Host them again where the run was moved (its old node took them along)."""
        self.kill()
        self.notes.lose_all()
        self.start(where)

    def kill(self) -> None:
        # optional: ray (the ray extra)
        import ray

        self.notes.stop()  # their last requests count, before they go
        for actor in [*self.actors.values(), *(a for rs in self.replicas.values() for a in rs)]:
            with suppress(Exception):  # gone with its node
                ray.kill(actor, no_restart=True)
        self.actors.clear()
        self.replicas.clear()


def ray_served(replica: BookedReplica) -> int:
    """The requests a replica actor has served, for the run's replica book (summary.json's
    ``replicas``); ReplicaGone once its actor died."""
    import ray  # optional: ray (the ray extra)

    try:
        return int(ray.get(replica.handle.stats.remote(), timeout=2.0).get("requests", 0))
    except ray.exceptions.RayActorError:
        raise ReplicaGone(str(replica.handle)) from None


def booked(actor: Any, info: Mapping[str, Any], label: str | None) -> BookedReplica:
    """A replica actor as its ping described it (node, pid, GPU ids), or on the node GPU
    ``label`` it was pinned to (as its scheduler's record names it)."""
    node = str(info.get("node_name") or f"node-{str(info['node_id'])[:6]}")
    gpu = ",".join(info.get("gpu_ids") or []) or "?"
    pid = info["pid"]
    return BookedReplica(actor, label or f"{node} GPU{gpu}", lambda: pid)
