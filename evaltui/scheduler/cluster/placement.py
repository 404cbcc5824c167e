"""A Ray cluster as the scheduler's placement: node GPUs held in the cluster ledger.

The GPUs are every alive node's (read by :class:`~evaltui.scheduler.cluster.probe.
ClusterProbe`), keyed by ``NodeGpu``; a run is pinned to one by the variables its Ray
executor reads (``node_env``), and its reservation lives in the cluster-wide ledger
actor, so schedulers on different machines never over-commit a GPU. This machine's
ledger keeps only the run's host RAM. A run with replicas holds one cluster reservation
per node GPU, taken in one ledger call (all or none), and is pinned to the list of them
(``replicas_env``): its executor starts one replica actor on each. A node that leaves
displaces the runs placed on it (``runs/moving.py`` places them again). Usage on another
machine cannot be attributed to a run's processes unless the node groups it by run id
(``cluster_views``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from evaltui.contract.records import ReservationRecord
from evaltui.contract.views import LedgerEntry, NodeHost, NodeLost
from evaltui.scheduler.admission.accounting import Accounting, GpuView, Usage
from evaltui.scheduler.admission.gpukey import GpuKey, NodeGpu, split_key
from evaltui.scheduler.admission.resources import GpuProbe, ResourceSnapshot
from evaltui.scheduler.cluster.keys import (
    ClusterReservation,
    cluster_views,
    node_env,
    replicas_env,
)
from evaltui.scheduler.cluster.probe import ClusterProbe
from evaltui.scheduler.placement import Displaced, GpuPlacement, LocalPlacement


def placement_for(probe: GpuProbe, *, fake: bool, allowed: frozenset[int] | set[int] | None
                  ) -> GpuPlacement:
    """The placement a scheduler reading GPUs through ``probe`` admits onto."""
    if isinstance(probe, ClusterProbe):  # the one place that asks: every other asks it
        return RayPlacement(probe)
    return LocalPlacement(fake=fake, allowed=allowed)


class RayPlacement:
    """See the module docstring."""

    def __init__(self, cluster: ClusterProbe) -> None:
        self.cluster = cluster

    def sync(self, live: set[str]) -> None:
        self.cluster.sync(live)  # the lease, and every scheduler's reservations

    def holds(self) -> bool:
        return self.cluster.holds()

    def account(self, acct: Accounting, entries: Sequence[LedgerEntry],
                snap: ResourceSnapshot) -> Accounting:
        if not snap.gpu.available:
            return acct
        held = self.cluster.entries()
        return dataclasses.replace(acct, gpus=cluster_views(snap.gpu.gpus, held),
                                   usage=_node_usage(acct.usage, entries, snap, held))

    def candidates(self, gpus: tuple[GpuView, ...] | None) -> tuple[GpuView, ...] | None:
        alive = self.cluster.alive
        if gpus is None or alive is None:
            return gpus
        return tuple(g for g in gpus if isinstance(g.index, NodeGpu)
                     and g.index.node_id in alive)

    def refuses_admits(self) -> str | None:
        return "evaltui run admits are not placed on a Ray cluster; use a scheduler without --ray"

    def without_gpus(self) -> str | None:
        return "no node of the Ray cluster reports a GPU now"

    def reserve(self, run_id: str, key: GpuKey, vram_mb: int, exclusive: bool,
                free_mb: int) -> str | None:
        assert isinstance(key, NodeGpu)  # candidates() offers node GPUs only
        return self.cluster.reserve(run_id, key, vram_mb, exclusive, free_mb)

    def reserve_all(self, run_id: str, keys: Sequence[GpuKey], vram_mb: int, exclusive: bool,
                    free_mb: Sequence[int]) -> str | None:
        gpus = [(k, free) for k, free in zip(keys, free_mb, strict=True)
                if isinstance(k, NodeGpu)]  # candidates() offers node GPUs only
        return self.cluster.reserve_all(run_id, gpus, vram_mb, exclusive)

    def local_gpu(self, key: GpuKey | None) -> int | None:
        return None  # on another node: the cluster ledger holds it

    def record(self, key: GpuKey | None) -> dict[str, Any]:
        index, node = split_key(key)
        return {"gpu": index, "node": node}

    def reservation(self, key: GpuKey | None, vram_mb: int, ram_mb: int) -> ReservationRecord:
        node_id = key.node_id if isinstance(key, NodeGpu) else None
        return ReservationRecord(**self.record(key), node_id=node_id, mb=vram_mb,
                                 ram_mb=ram_mb)

    def pin(self, key: GpuKey | None, run_id: str) -> dict[str, str]:
        if not isinstance(key, NodeGpu):
            return {}
        # The spec's ray_address still wins over RAY_ADDRESS in the run.
        return {**node_env(key, run_id), "RAY_ADDRESS": self.cluster.address}

    def pin_all(self, keys: Sequence[GpuKey], run_id: str) -> dict[str, str]:
        nodes = [k for k in keys if isinstance(k, NodeGpu)]
        if not nodes:
            return {}
        return {**self.pin(nodes[0], run_id), **replicas_env(nodes)}

    def adopt(self, run_id: str, held: ReservationRecord, exclusive: bool) -> int | None:
        if held.node_id and held.gpu is not None:
            self.cluster.adopt(run_id, held.node_id, held.gpu, held.mb, exclusive,
                               held.node or "")
        return None if held.node_id else held.gpu

    def displaced(self) -> list[Displaced]:
        return [Displaced(r.run_id, r.vram_mb, r.exclusive, r.node or f"node-{r.node_id[:6]}",
                          r.at) for r in self.cluster.displaced()]

    def unplace(self, run_id: str) -> bool:
        if run_id in self.cluster.unplaced:
            return False
        r = next((r for r in self.cluster.displaced() if r.run_id == run_id), None)
        if r is None:
            return False
        self.cluster.unplace(r)
        return True

    def nodes(self) -> list[NodeHost]:
        # dict() of a str-keyed dict is one step under the GIL: safe against the tick's read.
        hosts = dict(self.cluster.hosts)
        return [NodeHost(name=name, ram_total_mb=h.ram_total_mb,
                         ram_available_mb=h.ram_available_mb, cpu_percent=h.cpu_percent,
                         cpu_count=h.cpu_count) for name, h in sorted(hosts.items())]

    def nodes_lost(self) -> list[NodeLost]:
        lost = dict(self.cluster.lost)
        return [NodeLost(name=name, since=since) for name, since in sorted(lost.items())]


def _node_usage(usage: dict[str, Usage], entries: Sequence[LedgerEntry],
                snap: ResourceSnapshot, held: list[ClusterReservation]) -> dict[str, Usage]:
    """Usage of this machine's entries with their runs' GPU memory on the nodes added,
    where those nodes attribute it (``GpuSnapshot.runs``): what calibrates them."""
    gpus = {g.index.ledger_key: g for g in snap.gpu.gpus if isinstance(g.index, NodeGpu)}
    where = {r.run_id: gpus.get((r.node_id, r.index)) for r in held}
    out = dict(usage)
    for r in entries:
        g = where.get(r.run_id)
        if g is None or g.runs is None or r.key not in out:
            continue
        mb = g.runs.get(r.run_id, 0)
        out[r.key] = dataclasses.replace(out[r.key], vram_mb=mb, vram_by_gpu={g.index: mb})
    return out
