"""A stand-in for ``ClusterProbe`` with fixed per-node readings, for tests of what the
scheduler's reads, the API and the TUI show of a Ray cluster (a real cluster is in
tests/ray; starting one per TUI snapshot would take most of a minute).

It is a ``ClusterProbe`` (so the Sampler sets the cluster ledger's reservations against
the readings with ``cluster_views``, as for a real cluster) whose public surface answers
from data: ``read()`` returns what ``ClusterProbe.read`` returns for such nodes (GPUs
keyed by ``NodeGpu``, named ``"node-a · fake GPU 0"``, fake), ``hosts`` holds each
node's host RAM, ``lost`` the nodes gone ``gone_for`` seconds before each read, and
``entries()`` the given cluster reservations. Nothing here talks to Ray.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from evaltui.scheduler.admission.gpukey import NodeGpu
from evaltui.scheduler.admission.resources import GpuReading, GpuSnapshot, HostSnapshot
from evaltui.scheduler.cluster.keys import ClusterReservation
from evaltui.scheduler.cluster.probe import ClusterProbe


@dataclass(frozen=True)
class StandInNode:
    """One node: its Ray id, its fake GPUs as (total, used) MiB, and its host."""

    node_id: str
    gpus: Sequence[tuple[int, int]]
    host: HostSnapshot
    util_pct: float = 50.0


class StandInCluster(ClusterProbe):
    """See the module docstring."""

    def __init__(self, nodes: Mapping[str, StandInNode], *,
                 gone_for: Mapping[str, float] | None = None,
                 entries: Iterable[ClusterReservation] = ()) -> None:
        # ClusterProbe.__init__ connects to Ray and spawns probe actors: not here.
        self.address = "ray://stand-in:10001"
        self.scheduler_id = "stand-in"
        self.nodes = dict(nodes)
        self.gone_for = dict(gone_for or {})
        self._fixed_entries = list(entries)
        self.hosts: dict[str, HostSnapshot] = {}
        self.lost: dict[str, float] = {}
        self.alive: set[str] | None = None  # as before the first read: no node filtered
        self.unplaced: dict[str, ClusterReservation] = {}

    def read(self) -> GpuReading:
        now = time.time()
        self.hosts = {name: n.host for name, n in sorted(self.nodes.items())}
        self.lost = {name: now - ago for name, ago in self.gone_for.items()}
        gpus = [GpuSnapshot(NodeGpu(n.node_id, i, name), f"{name} · fake GPU {i}", total,
                            used, total - used, n.util_pct, None)
                for name, n in sorted(self.nodes.items())
                for i, (total, used) in enumerate(n.gpus)]
        return GpuReading(True, None, True, tuple(gpus))

    def entries(self) -> list[ClusterReservation]:
        return list(self._fixed_entries)

    def holds(self) -> bool:
        return False

    def displaced(self) -> list[ClusterReservation]:
        return []

    def sync(self, live: set[str]) -> None:
        """Nothing to sync: this stand-in holds no ledger."""

    def reserve(self, run_id: str, key: NodeGpu, vram_mb: int, exclusive: bool,
                free_mb: int) -> str | None:
        return "the stand-in cluster admits nothing"

    def reserve_all(self, run_id: str, gpus: Sequence[tuple[NodeGpu, int]], vram_mb: int,
                    exclusive: bool) -> str | None:
        return "the stand-in cluster admits nothing"

    def close(self) -> None:
        """Nothing to close: no Ray connection, no actor."""


NODE_A = "a" * 56
NODE_B = "b" * 56
NODE_C = "c" * 56


def two_nodes_and_a_lost_one() -> StandInCluster:
    """node-a with two 24 GiB GPUs (4 GiB of GPU0 reserved by a run), node-b with one,
    and node-c gone 12 s before each reading."""
    host_a = HostSnapshot(ram_total_mb=64000, ram_available_mb=40000, cpu_percent=37.5,
                          cpu_count=16, load_avg_1m=4.2)
    host_b = HostSnapshot(ram_total_mb=128000, ram_available_mb=120000, cpu_percent=5.0,
                          cpu_count=32, load_avg_1m=0.5)
    nodes = {"node-a": StandInNode(NODE_A, [(24576, 9216), (24576, 2048)], host_a),
             "node-b": StandInNode(NODE_B, [(24576, 512)], host_b, util_pct=3.0)}
    reserved = ClusterReservation("stand-in", "20260115_090500", NODE_A, 0, 4096, False, 0.0)
    return StandInCluster(nodes, gone_for={"node-c": 12.0}, entries=[reserved])
