"""Moving running runs off a GPU that went away with its node (a Ray node that left).

A run admitted onto a node's GPU has its actors pinned there. When that node leaves,
the run's episodes there fail and are retried (engine/executor/ray/executor.py), but
nothing can start on the node again. So at every tick, after the placement's sync, each
run of this scheduler that the placement reports displaced is decided again by
``decide`` as a lone candidate (it is running: it goes before anything queued, and asks
no host RAM, which it holds here already) against the GPUs admission may place on. If a
GPU takes it and the placement reserves it there (the old reservation released, both
audited), its record names the new place; the run reads the move from the cluster
ledger (engine/executor/ray/placement.py). Otherwise its old reservation is released at
once and the run is tried again at the next ticks, its record saying why it waits.
A run with replicas moves only its first GPU (where its workers are) this way; a further
GPU of it (``RUN#i`` in the cluster ledger) on a node that left is released, not moved:
that replica's actor died with the node and the run goes on with the others.
"""

from __future__ import annotations

import logging
import time

from evaltui.contract.records import ReservationRecord
from evaltui.scheduler.admission.accounting import Accounting
from evaltui.scheduler.admission.decision import Candidate, decide
from evaltui.scheduler.admission.gpukey import base_run
from evaltui.scheduler.core import Core
from evaltui.scheduler.placement import Displaced

log = logging.getLogger(__name__)


def move_displaced(core: Core, displaced: list[Displaced], acct: Accounting) -> None:
    """Place ``displaced`` (``placement.displaced()``) again; see the module docstring."""
    placement = core.placement
    gpus = list(placement.candidates(acct.gpus) or ())
    for d in displaced:
        if base_run(d.run_id) != d.run_id:  # one further GPU of a run with replicas
            if placement.unplace(d.run_id):
                log.warning("run %s: the node %s of one of its replicas left the cluster; "
                            "its GPU is released, the run goes on with the others",
                            base_run(d.run_id), d.lost)
            continue
        with core.lock:
            job = core.running.get(d.run_id)
        if job is None:  # it ended meanwhile: the next sync forgets it
            continue
        candidate = Candidate(d.run_id, d.vram_mb, 0, d.exclusive, True, job.queued_epoch)
        admits, waits = decide([candidate], tuple(gpus), acct.host, now=time.time(),
                               claim_after_sec=core.claim_after_sec)
        refused = waits[d.run_id].reason if d.run_id in waits else None
        if admits and admits[0].gpu is not None:
            key = admits[0].gpu
            view = next(g for g in gpus if g.index == key)
            refused = placement.reserve(d.run_id, key, d.vram_mb, d.exclusive, view.free_mb)
            if refused is None:
                log.info("run %s moved from %s (left the cluster) to %s", d.run_id, d.lost, key)
                with core.lock:
                    old = job.record.reservation or ReservationRecord()
                    moved = placement.reservation(key, old.mb, old.ram_mb)
                    job.set(**placement.record(key), reservation=moved,
                            waiting_reason=None, waiting_kind=None,
                            moved_from=[*job.record.moved_from, d.lost])
                core.writer.write(job)
                gpus = [g for g in gpus if g.index != key]  # one move per GPU per tick
                continue
        if placement.unplace(d.run_id):
            log.warning("run %s: its node %s left the cluster; no GPU takes it now: %s",
                        d.run_id, d.lost, refused)
        reason = f"its node {d.lost} left the Ray cluster; waiting for another GPU: {refused}"
        if job.record.waiting_reason != reason:
            with core.lock:
                job.set(waiting_reason=reason, waiting_kind="no_node")
            core.writer.write(job)
