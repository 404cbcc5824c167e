"""What a scheduler finds on disk: queued runs to take into its queue, live runs to adopt.

A run is *claimable* by a scheduler when it is queued (and not cancelled) or its process
still runs, and its owner (ownership.py) is this scheduler, gone, or was never recorded
(a script wrote the run dir, ``evaltui eval`` started it): adopting such a live run gives
it a reservation and a watcher, and lets any backend cancel it. Only scheduler.json is
read per run dir (never the summaries, which can be large).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaltui.contract.pidref import PidRef
from evaltui.contract.records import (
    DONE_FILENAME,
    SPEC_FILENAME,
    SchedulerRecord,
)
from evaltui.contract.spec import JobSpec, SpecError, parse_spec
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.scheduler import procs
from evaltui.scheduler.runs.jobs import parse_iso


class Found(StrEnum):
    """What a run dir is to a scheduler looking for work."""

    QUEUED = "queued"
    """Waiting for admission: goes into the queue."""
    LIVE = "live"
    """Its run process runs: adopted (watched, reaped, cancellable)."""


def classify(run_dir: Path, record: Mapping[str, Any]) -> Found | None:
    """QUEUED, LIVE, or None for a run nobody schedules any more (finished, cancelled)."""
    if record.get("slurm_job_id"):
        return None  # Slurm schedules it; its process is the job's, on a node of the cluster
    ref = record_ref(record)
    if ref is not None:
        return Found.LIVE if procs.alive(ref.pid, ref.create_time) else None
    if (record.get("state") == RunState.QUEUED.value
            and record.get("cancel_requested_at") is None
            and not (run_dir / DONE_FILENAME).exists()):
        return Found.QUEUED
    return None


def queue_order(record: Mapping[str, Any], run_id: str) -> tuple[int, float, str]:
    """Restore order: priority, then queued_at, then run id."""
    priority = record.get("priority", 0)
    return (-(priority if isinstance(priority, int) else 0),
            parse_iso(record.get("queued_at"), 0.0), run_id)


def record_ref(record: Mapping[str, Any]) -> PidRef | None:
    """The process recorded in a scheduler.json, if any."""
    pid, ctime = record.get("pid"), record.get("pid_create_time")
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 \
            and isinstance(ctime, int | float):
        return PidRef(pid, float(ctime))
    return None


def parse_record(record: Mapping[str, Any]) -> SchedulerRecord | None:
    """``record`` as the model a scheduler holds, or None if it does not fit (a run dir
    edited by hand, or by a newer version that changed a field's type)."""
    try:
        return SchedulerRecord.model_validate(record)
    except ValidationError:
        return None


def load_spec(run_dir: Path) -> JobSpec | None:
    """The run's spec (parsed, not checked), or None: the run reports a broken one itself."""
    try:
        return parse_spec(read_json(run_dir / SPEC_FILENAME))
    except (OSError, ValueError, SpecError):
        return None


@dataclass(frozen=True)
class Claimed:
    """A run this scheduler just took over."""

    run_dir: Path
    record: SchedulerRecord
    found: Found
