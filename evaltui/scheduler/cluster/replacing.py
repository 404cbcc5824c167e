"""Moving running cluster runs off a node that left the Ray cluster (issue 12).

A run admitted onto a node's GPU has its actors pinned there. When that node is lost
(Ray stops listing it, or, seconds sooner, the liveness rule of
engine/executor/ray/liveness.py finds its raylet silent), the run's episodes there
fail and are retried (engine/executor/ray/executor.py), but nothing can start on the
node again. So at every tick, after the ledger sync, each run
of this scheduler whose node is gone is decided again by ``admission.decide`` as a lone
candidate (it is running: it goes before anything queued, and asks no host RAM, which
it holds here already) against the same per-GPU views admission uses. If a GPU takes
it, its reservation moves there in one ledger call (the old one released, both
audited) and its record names the new node; the run reads the move from the ledger
(engine/executor/ray/placement.py). Otherwise its reservation on the lost node is released at
once and the run is tried again at the next ticks, its record saying why it waits.
"""

from __future__ import annotations

import logging
import time

from evaltui.scheduler.admission.accounting import Accounting
from evaltui.scheduler.admission.decision import Candidate, decide
from evaltui.scheduler.cluster.keys import ClusterReservation, NodeGpu, split_key
from evaltui.scheduler.cluster.probe import ClusterProbe
from evaltui.scheduler.core import Core

log = logging.getLogger(__name__)


def move_displaced(core: Core, cluster: ClusterProbe, displaced: list[ClusterReservation],
                   acct: Accounting) -> None:
    """Re-place ``displaced`` (``cluster.displaced()``: this scheduler's runs whose node
    left; see the module docstring)."""
    alive = (cluster.alive or set()) - cluster.liveness.lost()
    gpus = [g for g in acct.gpus or () if isinstance(g.index, NodeGpu)
            and g.index.node_id in alive]
    for r in displaced:
        with core.lock:
            job = core.running.get(r.run_id)
        if job is None:  # it ended meanwhile: the next sync forgets it
            continue
        lost = r.node or f"node-{r.node_id[:6]}"
        candidate = Candidate(r.run_id, r.vram_mb, 0, r.exclusive, True, job.queued_epoch)
        admits, waits = decide([candidate], gpus, acct.host, now=time.time(),
                               claim_after_sec=core.claim_after_sec)
        refused = waits[r.run_id].reason if r.run_id in waits else None
        if admits and admits[0].gpu is not None:
            key = admits[0].gpu
            assert isinstance(key, NodeGpu)
            view = next(g for g in gpus if g.index == key)
            refused = cluster.reserve(r.run_id, key, r.vram_mb, r.exclusive, view.free_mb)
            if refused is None:
                index, node = split_key(key)
                log.info("run %s moved from %s (left the cluster) to %s", r.run_id, lost, key)
                with core.lock:
                    reservation = {**(job.record.get("reservation") or {}), "gpu": index,
                                   "node": node, "node_id": key.node_id}
                    job.set(gpu=index, node=node, reservation=reservation,
                            waiting_reason=None, waiting_kind=None,
                            moved_from=[*job.record.get("moved_from", []), lost])
                core.writer.write(job)
                gpus = [g for g in gpus if g.index != key]  # one move per GPU per tick
                continue
        if r.run_id not in cluster.unplaced:
            cluster.unplace(r)
            log.warning("run %s: its node %s left the cluster; no GPU takes it now: %s",
                        r.run_id, lost, refused)
        reason = f"its node {lost} left the Ray cluster; waiting for another GPU: {refused}"
        if job.record.get("waiting_reason") != reason:
            with core.lock:
                job.set(waiting_reason=reason, waiting_kind="no_node")
            core.writer.write(job)
