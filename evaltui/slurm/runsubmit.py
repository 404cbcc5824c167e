"""Submitting one run to Slurm from a login node: write the run dir of a checked spec, sbatch
the job whose batch step is the run process, and record the job in scheduler.json.

Shared by ``evaltui eval --executor slurm`` (which then follows the job in the foreground)
and the TUI's submit form (which follows it in its run table, through
:mod:`evaltui.slurm.follow`). Not the scheduler: admission reserves this machine's GPUs,
and a Slurm run's resources are the allocation Slurm gives its job.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from evaltui.contract.records import RUN_LOG_FILENAME
from evaltui.rundir.store import SpecToWrite, reset_for_rerun, update_scheduler_record, write_run
from evaltui.slurm.commands import SlurmError, run_slurm
from evaltui.slurm.submit import BatchJob, submit


class SubmittableSpec(SpecToWrite, Protocol):
    """What a submission reads of a spec the engine checked
    (``engine.graph.specchecks.CheckedSpec``; this layer below the engine names only that)."""

    @property
    def episode_indices(self) -> Sequence[int]: ...


@dataclass(frozen=True)
class SubmittedSlurmRun:
    """A run whose job Slurm has taken."""

    run_dir: Path
    job_id: str
    total: int
    """Its episodes."""


def batch_job(run_dir: Path, checked: SubmittableSpec) -> BatchJob:
    """The run's job: ``python -m evaltui.engine.main RUN_DIR`` as its batch step, one task
    per worker (never more than its episodes)."""
    ev = checked.spec.eval
    total = len(checked.episode_indices)
    return BatchJob(command=[sys.executable, "-m", "evaltui.engine.main", str(run_dir)],
                    job_name=f"evaltui-{run_dir.name}", output=run_dir / RUN_LOG_FILENAME,
                    tasks=max(1, min(ev.worker_count, total)), chdir=run_dir)


def submit_run(checked: SubmittableSpec, outputs: Path) -> SubmittedSlurmRun:
    """Write the run dir of a checked spec under ``outputs`` and submit its job; SlurmError
    (one line) when Slurm refuses, with the run dir removed (nothing left behind)."""

    run_dir = write_run(checked, outputs)
    try:
        job_id = str(submit(checked.spec.eval.slurm, batch_job(run_dir, checked)))
    except SlurmError:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    update_scheduler_record(run_dir, slurm_job_id=job_id, slurm_cluster=cluster_name())
    return SubmittedSlurmRun(run_dir, job_id, len(checked.episode_indices))


def cluster_name() -> str | None:
    """Slurm's ``ClusterName`` (``scontrol show config``), or None where it cannot say."""
    try:
        out = run_slurm(["scontrol", "show", "config"], timeout=15).stdout
    except SlurmError:
        return None
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName":
            return value.strip() or None
    return None


def resubmit_run(run_dir: Path, checked: SubmittableSpec, previous: str) -> str:
    """Submit a finished Slurm run's job again, into the same run dir (a resume: the run
    keeps its ``ok`` episodes and runs the others); the new job's id. The record keeps a job id
    throughout, so no backend takes the run for a queued run of its own, and the jobs it ran as
    before (``slurm_earlier_job_ids``); where sbatch refuses, the run reads ``previous`` again,
    Slurm's line in its error, and SlurmError (one line) is raised."""

    record = reset_for_rerun(run_dir, keep=("slurm_job_id", "slurm_cluster",
                                            "slurm_earlier_job_ids"))
    try:
        job_id = str(submit(checked.spec.eval.slurm, batch_job(run_dir, checked)))
    except SlurmError as exc:
        update_scheduler_record(run_dir, state=previous, error=str(exc))
        raise
    earlier = [*record.slurm_earlier_job_ids,
               *([record.slurm_job_id] if record.slurm_job_id else [])]
    update_scheduler_record(run_dir, slurm_job_id=job_id, slurm_cluster=cluster_name(),
                            slurm_earlier_job_ids=earlier)
    return job_id


def record_placement(run_dir: Path, environ: Mapping[str, str] | None = None) -> None:
    """The batch step's word on where the run runs, merged into scheduler.json: its job,
    cluster and node (``SLURM_JOB_ID``, ``SLURM_CLUSTER_NAME``, ``SLURMD_NODENAME``). A
    run dir that cannot take it (a full disk) runs all the same."""
    env = os.environ if environ is None else environ
    fields = {key: env.get(var) for key, var in (
        ("slurm_cluster", "SLURM_CLUSTER_NAME"), ("slurm_batch_host", "SLURMD_NODENAME"))}
    fields = {k: v for k, v in fields.items() if v}
    if fields:
        with suppress(OSError):  # the readers still have the job id the submitter recorded
            update_scheduler_record(run_dir, **fields)
