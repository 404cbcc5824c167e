"""Admission views of a Ray cluster's GPUs, without importing Ray.

A node's GPU is keyed by :class:`~evaltui.scheduler.admission.gpukey.NodeGpu`.
:func:`cluster_views` sets the cluster ledger's reservations against the per-node
readings the way admission/accounting.py does on one machine, except that usage on another
machine cannot be attributed to a run's processes: a reservation counts whole until its
run ends (conservative: never over-commits, may under-use a GPU whose run already
allocated what it reserved) — unless the node attributes usage to runs: its probe groups
GPU processes by the run id in their environment (a pinned run's actors carry
``EVALTUI_RAY_RUN_ID``), and then a reservation holds back only what its run does not
use yet, as on one machine, and the run's measured peak calibrates its estimate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaltui.engine.executor.ray.resources import (
    NODE_GPU_ENV,
    NODE_ID_ENV,
    REPLICA_GPUS_ENV,
    RUN_ID_ENV,
)
from evaltui.scheduler.admission.accounting import IDLE_GPU_MB, GpuView
from evaltui.scheduler.admission.gpukey import NodeGpu, base_run

NODE_NAME_ENV = "EVALTUI_NODE_NAME"
"""Optional, in a node's environment (its raylet's): the name shown for that node."""


def node_env(key: NodeGpu, run_id: str) -> dict[str, str]:
    """What a run placed on ``key`` needs: its executor pins its actors with it, and
    finds by ``run_id`` in the cluster ledger where it was moved if that node leaves."""
    return {NODE_ID_ENV: key.node_id, NODE_GPU_ENV: str(key.index), RUN_ID_ENV: run_id}


def replicas_env(keys: Sequence[NodeGpu]) -> dict[str, str]:
    """What a run with replicas placed on ``keys`` needs besides ``node_env`` of the
    first: every node GPU, in the order chosen, where its executor starts one replica
    actor each (JSON ``[[node id, GPU index, node name], ...]``)."""
    return {REPLICA_GPUS_ENV: json.dumps([[k.node_id, k.index, k.node] for k in keys])}


@dataclass(frozen=True)
class ClusterReservation:
    """One entry of the cluster ledger (see cluster/ledger.py)."""

    scheduler: str
    run_id: str
    node_id: str
    index: int
    vram_mb: int
    exclusive: bool
    at: float
    node: str = ""
    """The node's display name (for messages; not part of any key)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterReservation:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def cluster_views(gpus: Iterable[Any], entries: Iterable[ClusterReservation]
                  ) -> tuple[GpuView, ...]:
    """GpuViews keyed by NodeGpu: measured free minus what each reservation on that GPU
    still holds back (all of it, or less what its run's processes use where the node
    attributes usage to runs: ``GpuSnapshot.runs``)."""
    on: dict[tuple[str, int], list[ClusterReservation]] = {}
    for r in entries:
        on.setdefault((r.node_id, r.index), []).append(r)
    views = []
    for g in gpus:
        key: NodeGpu = g.index
        here = on.get(key.ledger_key, [])
        idle = max(IDLE_GPU_MB, g.total_mb // 50)
        runs = g.runs
        if runs is None:
            outstanding = sum(r.vram_mb for r in here)
            foreign = 1 if g.used_mb > idle and not here else 0
        else:
            # A run with replicas is attributed per GPU by its run id (parts: RUN#i).
            outstanding = sum(max(0, r.vram_mb - runs.get(base_run(r.run_id), 0))
                              for r in here)
            seen = sum(runs.get(base_run(r.run_id), 0) for r in here)
            foreign = 1 if g.used_mb - seen > idle else 0
        holder = next((base_run(r.run_id) for r in here if r.exclusive), None)
        views.append(GpuView(key, g.total_mb, g.free_mb, outstanding, len(here) + foreign,
                             foreign, holder))
    return tuple(views)
