"""A replica its run lost gives its GPU back while the run goes on (DESIGN §12 "Replicas").

A run with replicas holds one ledger entry per GPU (``part`` 0, 1, ...). When one of its
replica hosts dies the run goes on degraded and says so in summary.json
(``replicas: {nodeset: [{gpu: "GPU1", state: "lost", ...}]}``); once a tick this reads that
for each running run on several GPUs (only when summary.json changed) and releases the
lost GPU's entry, so another run can be admitted there. The first GPU's entry also
carries the run's host RAM: there only its VRAM goes to 0. The run's scheduler.json
drops the GPU (but the first) from ``reservation.gpus``, so a restarted scheduler does
not hold it again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from evaltui.contract.records import SUMMARY_FILENAME
from evaltui.rundir.summaryfile import read_summary
from evaltui.scheduler.admission.gpukey import gpu_label
from evaltui.scheduler.runs.jobs import Job

log = logging.getLogger(__name__)


def lost_labels(summary: Any) -> set[str]:
    """GPU labels (``GPU1``) of every replica summary.json marks lost."""
    replicas = summary.get("replicas") if isinstance(summary, dict) else None
    if not isinstance(replicas, dict):
        return set()
    return {str(r.get("gpu")) for hosts in replicas.values() if isinstance(hosts, list)
            for r in hosts if isinstance(r, dict) and r.get("state") == "lost"}


class LostReplicas:
    """Per running run on several GPUs: the summary.json last read, the GPUs given back."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        """run id -> summary.json's mtime (ns) when last read."""
        self.released: dict[str, set[int]] = {}

    def newly_lost(self, job: Job) -> set[int]:
        """GPUs of ``job`` its summary.json says are lost and are not given back yet."""
        if len(job.gpus) < 2:
            return set()
        path = Path(job.run_dir) / SUMMARY_FILENAME
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return set()  # not written yet: the next tick reads it
        summary = None if self._seen.get(job.run_id) == mtime else read_summary(job.run_dir)
        if summary is None:
            return set()  # unchanged, or mid-replace: the next tick reads it
        self._seen[job.run_id] = mtime
        labels = lost_labels(summary)
        done = self.released.setdefault(job.run_id, set())
        return {g for g in job.gpus if gpu_label(g) in labels and g not in done}

    def forget(self, run_id: str) -> None:
        self._seen.pop(run_id, None)
        self.released.pop(run_id, None)


def release_lost(core: Any, lost: LostReplicas) -> None:
    """Give back the GPUs of lost replicas of every running run (core lock not held)."""
    with core.lock:
        jobs = [j for j in core.running.values() if len(j.gpus) > 1]
    for run_id in set(lost.released) - {j.run_id for j in jobs}:
        lost.forget(run_id)
    for job in jobs:
        gone = lost.newly_lost(job)
        if not gone:
            continue
        with core.ledger.transaction() as txn:
            for entry in txn.entries:
                if entry.run_id != job.run_id or entry.gpu not in gone or not entry.mine:
                    continue
                if entry.part == 0:  # it also holds the run's host RAM
                    txn.add(entry.model_copy(update={"vram_mb": 0}))
                else:
                    txn.remove(entry.key)
        lost.released[job.run_id] |= gone
        labels = ", ".join(gpu_label(g) for g in sorted(gone))
        log.warning("run %s lost its replica on %s: that GPU's reservation is released",
                    job.run_id, labels)
        with core.lock:
            held = job.record.reservation
            if held is None or not held.gpus:
                continue
            # The first stays: its entry (the run's RAM) is held again on a restart.
            keep = [g for i, g in enumerate(held.gpus)
                    if i == 0 or g not in lost.released[job.run_id]]
            job.set(reservation=held.model_copy(update={"gpus": keep}))
        core.writer.write(job)
