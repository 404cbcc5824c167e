"""The scheduler's in-memory job record and the queue order (priority, then age).

A :class:`Job` mirrors one run dir: ``record`` is this scheduler's copy of its
scheduler.json (a :class:`~evaltui.contract.records.SchedulerRecord`) while it owns the run, and
the only place its state is kept (``Job.state`` reads ``record.state``;
``Core.transition`` changes it). Changes go through ``Job.set`` and reach the file as a
merge of the changed fields only (see
:class:`RecordWriter`), so neither a waiting_reason write nor another process's cancel
request is ever lost.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from evaltui.contract.records import ReservationRecord, SchedulerRecord
from evaltui.contract.spec import JobSpec
from evaltui.contract.states import RunState
from evaltui.rundir.store import settle_summary, update_scheduler_record
from evaltui.scheduler.admission.calibration import Estimate, NodesetPart
from evaltui.scheduler.admission.cores import run_cores
from evaltui.scheduler.admission.decision import Candidate, Wait
from evaltui.scheduler.admission.gpukey import GpuKey
from evaltui.scheduler.runs.handles import RunHandle
from evaltui.scheduler.shared.nodesets import SharedNodeset

_ENDED = frozenset(s.value for s in RunState if s.terminal)

log = logging.getLogger(__name__)


def parse_iso(value: Any, default: float) -> float:
    """``time.time()`` of an ISO timestamp from a record, or ``default``."""
    if isinstance(value, str):
        with suppress(ValueError):
            return datetime.fromisoformat(value).timestamp()
    return default


@dataclass
class Loading:
    """An admitted job whose shared nodesets are being loaded (see JobScheduler._admit)."""

    gpu: int | None
    pending_key: str
    """Ledger key of the pending reservation held meanwhile."""
    spread_keys: list[str] = field(default_factory=list)
    """A run with replicas: the pending reservations of its further GPUs."""
    started: list[tuple[NodesetPart, SharedNodeset]] = field(default_factory=list)
    """(part, SharedNodeset) for each host started for this job so far."""
    error: str | None = None
    done: bool = False


@dataclass
class Building:
    """A queued job whose nodesets' own environments are being built (envbuilds.py): no
    candidate for admission until they are built and its spec checked again."""

    nodeset: str
    """The nodeset whose environment it waits for now."""
    builder: str
    """``uv`` or ``pip``."""
    started: float
    """``time.monotonic()`` its wait began."""
    spec: JobSpec | None = None
    """Its spec, checked again once built (the step budget resolved)."""
    error: str | None = None
    done: bool = False
    said_at: float = 0.0
    """``time.monotonic()`` its reason was last written to scheduler.json."""


@dataclass(eq=False)
class Job:
    """One run this scheduler knows: queued, running (spawned or adopted) or finished."""

    run_id: str
    run_dir: Path
    record: SchedulerRecord
    spec: JobSpec | None
    parts: list[NodesetPart]
    seq: int
    estimate: Estimate | None = None
    estimate_version: tuple[int, int] = (-1, -1)
    """(calibration version, shared-nodesets version) the estimate was made at."""
    wait: Wait | None = None
    candidate: Candidate | None = None
    """The job as admission sees it, cached until its estimate changes."""
    handle: RunHandle | None = None
    reservation_key: str | None = None
    gpus: tuple[int, ...] = ()
    """A run with replicas: every GPU of this machine it was started on, the first
    first (empty: one GPU or none, as ``record.gpu`` says)."""
    keys: tuple[GpuKey, ...] = ()
    """A run with replicas: every GPU it was admitted on as admission keys it (this
    machine's indexes, or node GPUs of a Ray cluster), the first first."""
    cancelling: bool = False
    shared: list[str] = field(default_factory=list)
    """Names of scheduler-hosted shared nodesets this run holds a reference to."""
    shared_urls: dict[str, str] = field(default_factory=dict)
    """Graph nodeset name -> URL of its scheduler host (for shared_urls.json)."""
    loading: Loading | None = None
    building: Building | None = None
    peak_vram_mb: int | None = None
    peak_ram_mb: float = 0.0
    samples: int = 0
    """Distinct usage readings taken while the run was running."""
    last_sample_at: float = 0.0
    cpu_first: tuple[float, float] | None = None
    """(time, CPU seconds of its process tree) at its first sample while running."""
    cpu_last: tuple[float, float] | None = None
    """The same at its latest sample: the run's mean CPU use is what lies between."""
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    dirty: set[str] = field(default_factory=set)
    """Record fields changed since they were last written."""
    written: dict[str, int] = field(default_factory=dict)
    """Per field, the RecordWriter sequence number of the copy on disk."""

    def set(self, **fields: Any) -> None:
        """Change record fields (scheduler lock held); the RecordWriter writes them."""
        self.seen(**fields)
        self.dirty.update(fields)

    def seen(self, **fields: Any) -> None:
        """Change record fields in memory only: what another process wrote (lock held)."""
        if "state" in fields:
            fields["state"] = RunState(fields["state"])
        if isinstance(fields.get("reservation"), dict):
            fields["reservation"] = ReservationRecord.model_validate(fields["reservation"])
        self.record = self.record.model_copy(update=fields)

    @property
    def admissible(self) -> bool:
        """Queued and a candidate: not loading its shared nodesets (admitted already),
        not waiting for its environments to be built."""
        return self.loading is None and self.building is None

    @property
    def state(self) -> RunState:
        """The state in ``record`` (written by ``Core.transition`` only)."""
        return self.record.state

    @property
    def priority(self) -> int:
        return self.record.priority

    @property
    def queued_epoch(self) -> float:
        return parse_iso(self.record.queued_at, 0.0)

    @property
    def exclusive(self) -> bool:
        return bool(self.spec and self.spec.scheduling.exclusive_gpu)

    def sort_key(self) -> tuple[int, float, int]:
        """Queue order: higher priority first, then earlier queued, then submit order."""
        return (-self.priority, self.queued_epoch, self.seq)


class JobQueue:
    """Queued jobs kept in admission order."""

    def __init__(self) -> None:
        self._jobs: list[Job] = []

    def add(self, job: Job) -> None:
        bisect.insort(self._jobs, job, key=Job.sort_key)

    def remove(self, job: Job) -> None:
        with suppress(ValueError):  # not queued (any more)
            self._jobs.remove(job)

    def __iter__(self) -> Iterator[Job]:
        return iter(list(self._jobs))

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job: object) -> bool:
        return job in self._jobs


class RecordWriter:
    """scheduler.json writes: immediate for lifecycle changes, coalesced for the rest.

    Only the fields a job changed (``Job.set``) are merged into the file, under its lock
    (``rundir.store.update_scheduler_record``), so a field another process wrote meanwhile (a
    cancel request from another backend) is never overwritten with an older copy. A
    waiting_reason may change for a thousand jobs at once (the lock is taken); those
    writes are queued and flushed a few dozen at a time off the admission path.
    """

    def __init__(self, lock: AbstractContextManager[Any]) -> None:
        self._lock = lock  # the scheduler's lock: records are only mutated under it
        self._pending: dict[str, Job] = {}
        self._pending_lock = threading.Lock()
        self._taken = 0
        self._failing: set[str] = set()  # runs whose record write failed (said once)

    def write(self, job: Job, *, must: bool = False) -> None:
        """Write the job's changed fields now (soon again, if its disk refuses them; with
        ``must``, the refusal is raised as well)."""
        with self._pending_lock:
            self._pending.pop(job.run_id, None)
        refused = self._write(job)
        if refused is not None:
            self.schedule(job)
            if must:
                raise refused

    def schedule(self, job: Job) -> None:
        """Write the changed fields soon."""
        with self._pending_lock:
            self._pending[job.run_id] = job

    def flush(self, budget_sec: float = 0.05) -> int:
        """Write pending records for up to ``budget_sec``; returns how many were written."""
        deadline = time.monotonic() + budget_sec
        written = 0
        refused: list[Job] = []
        while time.monotonic() < deadline:
            with self._pending_lock:
                if not self._pending:
                    break
                job = self._pending.pop(next(iter(self._pending)))
            if self._write(job) is None:
                written += 1
            else:
                refused.append(job)  # tried again at the next flush, not in this one
        for job in refused:
            self.schedule(job)
        return written

    def _write(self, job: Job) -> OSError | None:
        """Write the job's changed fields; the OSError if its disk refused them (kept
        dirty), else None."""
        with self._lock:  # fields are set under it: the copy is consistent
            if not job.dirty:
                return None
            self._taken += 1
            taken = self._taken
            fields = job.record.model_dump(mode="json", include=set(job.dirty), exclude_unset=True)
            job.dirty.clear()
        # Two writers of one job may reach the file in either order: a field goes to disk
        # only if no newer copy of it got there first.
        with job.write_lock:
            fresh = {k: v for k, v in fields.items() if job.written.get(k, -1) < taken}
            job.written.update(dict.fromkeys(fresh, taken))
            if not fresh:
                return None
            try:
                update_scheduler_record(job.run_dir, **fresh)
                self._failing.discard(job.run_id)
                if fresh.get("state") in _ENDED:
                    settle_summary(job.run_dir, fresh["state"], job.record.error)
                return None
            except (FileNotFoundError, NotADirectoryError):
                return None  # the run dir was deleted by hand: nothing left to record
            except OSError as exc:
                refused = exc
                for key in fresh:
                    job.written.pop(key, None)
        # Its disk is full (or read-only): kept, and written by a later flush; the
        # scheduler goes on (reaping, admitting) meanwhile. (Its lock after the job's.)
        with self._lock:
            job.dirty.update(fresh)
        if job.run_id not in self._failing:
            self._failing.add(job.run_id)
            log.warning("cannot write %s/scheduler.json (%s); retrying", job.run_dir,
                        refused.strerror or refused)
        return refused


def job_cores(job: Job) -> float:
    """The CPU cores ``job`` reserves: its estimate's, else what its spec declares."""
    if job.estimate is not None:
        return job.estimate.cpus
    if job.spec is None:
        return 0.0
    return run_cores(job.spec.eval.worker_count, job.spec.scheduling.cpus_per_worker, None)
