"""The key of all admission: a GPU, on this machine or on a node of a cluster.

On one machine a GPU is its NVML index (an ``int``). Across a Ray cluster it is a
:class:`NodeGpu`: (Ray node id, index), with the node's display name beside it (not part
of the key, so that every scheduler on the cluster agrees on keys whatever names they
show). Values only: no probe, no ledger, no Ray.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class NodeGpu:
    """One GPU of one Ray node: the admission key of a cluster scheduler."""

    node_id: str
    index: int
    node: str = field(default="", compare=False)
    """Display name ("node-a"); not part of the key."""

    def __str__(self) -> str:
        return f"{self.node or 'node-' + self.node_id[:6]} GPU{self.index}"

    @property
    def ledger_key(self) -> tuple[str, int]:
        return (self.node_id, self.index)


GpuKey = int | NodeGpu
"""A GPU as admission keys it: an index on one machine, a NodeGpu on a cluster."""


def gpu_label(key: GpuKey) -> str:
    """``GPU0`` on one machine, ``node-a GPU0`` on a cluster."""
    return str(key) if isinstance(key, NodeGpu) else f"GPU{key}"


def split_key(key: GpuKey | None) -> tuple[int | None, str | None]:
    """(GPU index, node name) for records: scheduler.json keeps ``gpu`` an int."""
    if isinstance(key, NodeGpu):
        return key.index, str(key).rsplit(" GPU", 1)[0]
    return key, None


def part_id(run_id: str, part: int) -> str:
    """The id a run's ``part``-th GPU is reserved under where one id holds one GPU (the
    cluster ledger): the run id for the first, ``RUN#part`` for the others (as the
    machine's ledger keys a run with replicas)."""
    return run_id if part == 0 else f"{run_id}#{part}"


def base_run(reserved_id: str) -> str:
    """The run a reservation id of :func:`part_id` belongs to."""
    return reserved_id.split("#", 1)[0]


def on_node(key: GpuKey) -> bool:
    """Whether ``key`` is a GPU of a cluster's node (not of this machine)."""
    return isinstance(key, NodeGpu)
