"""What a run with replicas keeps on record about its GPUs (DESIGN §12 "Replicas").

A run with replicas admitted on GPUs of this machine (admission/spread.py) holds one
ledger entry per GPU; one admitted on node GPUs of a Ray cluster holds one cluster
ledger reservation per node GPU (``placement.reserve_all``) and here only its host RAM.
Its scheduler.json says where it went: ``gpu`` the first (for readers that know one
GPU), ``gpus`` every GPU's label in the order chosen ("GPU0", or "node-a GPU0" on a
cluster; the order of its ``CUDA_VISIBLE_DEVICES``), and ``reservation.gpus``/``each_mb``
what a restarted scheduler holds again for it (this machine's GPUs only). Runs on one
GPU keep today's record exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from evaltui.contract.records import ReservationRecord
from evaltui.engine.graph.replicas import ReplicaAsk, replica_ask
from evaltui.scheduler.admission.gpukey import GpuKey, gpu_label
from evaltui.scheduler.placement import GpuPlacement
from evaltui.scheduler.runs.jobs import Job

log = logging.getLogger(__name__)
ONE_REPLICA_NOTE = "replicas: no GPU is measured here; one replica on the host"
"""Said once, in the run's warnings, when a run with replicas starts without GPUs."""


def spread_record(gpus: Sequence[GpuKey]) -> dict[str, Any]:
    """scheduler.json's ``gpus`` of a run with replicas (also on one GPU); nothing for a
    one-GPU job (``gpus`` is empty for it) or a run placed on no GPU."""
    return {"gpus": [gpu_label(g) for g in gpus]} if gpus else {}


def spread_reservation(base: ReservationRecord, gpus: Sequence[int], each_mb: int
                       ) -> ReservationRecord:
    """The reservation record with every GPU a run with replicas holds."""
    if not gpus:
        return base
    return base.model_copy(update={"gpus": list(gpus), "each_mb": each_mb})


def replicated_nodesets(graph: Any) -> set[str]:
    """Names of the graph's nodesets with ``replicas`` (hosted by the run, per GPU)."""
    nodesets = graph.get("nodesets") if isinstance(graph, dict) else None
    if not isinstance(nodesets, dict):
        return set()
    return {name for name, ns in nodesets.items()
            if isinstance(ns, dict) and ns.get("replicas") is not None}


def replica_ask_here(job: Job, placement: GpuPlacement) -> ReplicaAsk | None:
    """The GPUs the job asks for as admission weighs it: a run with replicas spreads over
    the GPUs ``placement`` offers, this machine's or a Ray cluster's node GPUs (keys of
    either kind: admission/spread.py)."""
    if job.spec is None:
        return None
    return replica_ask(job.spec.graph)


def say_one_replica(job: Job) -> None:
    """A run with replicas admitted where no GPU is measured: it runs one replica on the
    host; its record's warnings say so, once (core lock held)."""
    if ONE_REPLICA_NOTE in job.record.warnings:
        return
    log.warning("run %s: %s", job.run_id, ONE_REPLICA_NOTE)
    job.set(warnings=[*job.record.warnings, ONE_REPLICA_NOTE])


def hosted_for(job: Job, loaded: set[str]) -> set[str]:
    """The hosted shared nodesets (keys) the job would use rather than host itself: not
    those it has replicas of, which its run hosts on each of its GPUs (so they count
    whole in its estimate even while this scheduler hosts the same nodeset for others)."""
    if job.spec is None or not loaded:
        return loaded
    replicated = replicated_nodesets(job.spec.graph)
    return loaded - {p.key for p in job.parts if p.name in replicated}
