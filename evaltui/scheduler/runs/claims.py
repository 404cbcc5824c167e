"""Claims: taking over from disk the runs no live scheduler owns, and letting go of ours.

At start a scheduler claims every queued or live run of its outputs root that nobody
owns; every few seconds it claims those whose owner died, and drops queued jobs that
someone else cancelled or took over (restore.py says what a run dir is). Claims happen
under the ledger lock, so of several backends exactly one wins each run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from evaltui.contract.pidref import PidRef
from evaltui.contract.records import (
    DONE_FILENAME,
    SCHEDULER_FILENAME,
    SHARED_URLS_FILENAME,
    SUMMARY_FILENAME,
    ReservationRecord,
    SchedulerRecord,
)
from evaltui.contract.states import RunExit, RunState
from evaltui.contract.views import holder_key
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.status import abort_note, derive_run_state
from evaltui.rundir.store import change_scheduler_record, read_record
from evaltui.rundir.summaryfile import read_summary_header
from evaltui.scheduler.admission.ledger import LedgerTxn
from evaltui.scheduler.core import Core, Write
from evaltui.scheduler.runs.handles import RunHandle
from evaltui.scheduler.runs.jobs import Job, job_cores, parse_iso
from evaltui.scheduler.runs.ownership import owner_alive
from evaltui.scheduler.runs.restore import (
    Claimed,
    Found,
    classify,
    load_spec,
    parse_record,
    queue_order,
    record_ref,
)

log = logging.getLogger(__name__)
_LIVE = frozenset({RunState.STARTING.value, RunState.RUNNING.value})
UNOWNED_GRACE_SEC = 10.0
"""A queued run dir no scheduler owns is taken over once it has waited this long."""


class Claims:
    """Which runs are this scheduler's: claim orphans, adopt live runs, drop lost ones."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._seen: dict[str, tuple[int, str | None]] = {}  # run_id -> (mtime, watch)

    def claim_orphans(self) -> None:
        """Take over the queued and live runs of the outputs root that no live scheduler
        owns: all of them at start, later those whose owner died (checked every few s)."""
        c = self.core
        wanted: list[tuple[tuple[int, float, str], Path]] = []
        for run_id in c.index.run_ids():
            with c.lock:
                if run_id in c.jobs:
                    continue
            run_dir = c.runs_root / run_id
            try:
                mtime = (run_dir / SCHEDULER_FILENAME).stat().st_mtime_ns
            except OSError:
                continue
            seen = self._seen.get(run_id)
            if seen is not None and seen[0] == mtime:
                watch = seen[1]
                if watch is None or (watch and owner_alive(watch)):
                    continue  # unchanged: nothing to claim there, or its owner lives
            record = read_record(run_dir)
            found = classify(run_dir, record) if record is not None else None
            # What to re-check while the file does not change: None = nothing, the owner
            # (claim when it dies), "" = no owner (claim when its grace period is over).
            watch = None if found is None or record is None else str(record.get("owner") or "")
            self._seen[run_id] = (mtime, watch)
            if found is not None and record is not None and self._may_claim(record):
                wanted.append((queue_order(record, run_id), run_dir))
            elif found is None and record is not None and record.get("state") in _LIVE \
                    and self._may_claim(record):
                self._record_ended(run_dir)
        if wanted:
            self._claim([run_dir for _, run_dir in sorted(wanted)])

    def _record_ended(self, run_dir: Path) -> None:
        """A run whose process ended while no scheduler watched it still reads
        ``starting``/``running`` in its scheduler.json: write the state it ended in (its
        reservation went with its process)."""
        def ended(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
            if record is None or record.get("state") not in _LIVE \
                    or classify(run_dir, record) is not None or not self._may_claim(record):
                return None  # changed meanwhile, or back alive
            state = derive_run_state(run_dir)
            if not state.terminal:
                return None
            fields: dict[str, Any] = {"state": state}
            fields.update({k: v for k, v in ended_fields(run_dir, state).items()
                           if record.get(k) is None})
            if state is RunState.ABORTED and not record.get("error"):
                fields["error"] = abort_note(record.get("exit_code"))
            return fields

        try:
            change_scheduler_record(run_dir, ended)
        except OSError:
            return  # a full disk: tried again at a later scan (the file is unchanged)
        self._seen.pop(run_dir.name, None)

    def _may_claim(self, record: Mapping[str, Any]) -> bool:
        owner = record.get("owner")
        if owner is None and record.get("pid") is None:
            # Written by a script (``evaltui eval``: prepare, then spawn at once): an orphan
            # only if it stayed queued for a while, else both might start it.
            return time.time() - parse_iso(record.get("queued_at"), 0.0) > UNOWNED_GRACE_SEC
        return owner == str(self.core.owner) or not owner_alive(owner)

    def _claim(self, run_dirs: list[Path]) -> None:
        """Own the runs (under the ledger lock: one claimant wins), queue or adopt them."""
        c = self.core
        claimed: list[Claimed] = []
        with c.ledger.transaction() as txn:
            for run_dir in run_dirs:
                seen: dict[str, Any] = {}

                def own(record: Mapping[str, Any] | None, run_dir: Path = run_dir,
                        seen: dict[str, Any] = seen) -> dict[str, Any] | None:
                    found = classify(run_dir, record) if record is not None else None
                    parsed = parse_record(record) if record is not None else None
                    if found is None or parsed is None or not self._may_claim(record):
                        return None
                    seen.update(found=found, parsed=parsed)
                    return {"owner": str(c.owner)}

                try:
                    if change_scheduler_record(run_dir, own) is None:
                        continue
                except OSError as exc:  # a full disk: claimed at a later scan
                    log.warning("cannot claim run %s yet: %s", run_dir.name,
                                exc.strerror or exc)
                    continue
                found, parsed = seen["found"], seen["parsed"]
                claimed.append(Claimed(run_dir, parsed.model_copy(update={"owner": str(c.owner)}),
                                       found))
            with c.lock:
                adopted = [self._take(claim, txn) for claim in claimed]
        if any(claim.found is Found.LIVE for claim in claimed):
            c.shared.expire_unheld(c.tick_no)
        for job in adopted:
            if job is not None and job.record.cancel_requested_at is not None \
                    and job.handle is not None:
                # The scheduler that asked died before the SIGKILL deadline: finish the job.
                job.cancelling = True
                c.terminate_later(job.handle.ref)

    def _take(self, claimed: Claimed, txn: LedgerTxn) -> Job | None:
        """Queue a claimed queued run, or adopt a live one; returns an adopted job."""
        c = self.core
        run_dir, record = claimed.run_dir, claimed.record
        spec = load_spec(run_dir)
        if claimed.found is Found.QUEUED:
            c.queue.add(c.new_job(run_dir, record, spec))
            return None
        ref = record_ref(record.model_dump())
        assert ref is not None
        live = RunState.RUNNING if (run_dir / SUMMARY_FILENAME).exists() else RunState.STARTING
        if record.state not in _LIVE:  # a live process: at least starting
            record = record.model_copy(update={"state": RunState.STARTING})
        job = c.new_job(run_dir, record, spec)
        if job.state is not live:  # it got running while nobody watched
            c.transition(job, live, write=Write.SOON)
        job.handle = RunHandle(ref)
        job.reservation_key = holder_key(ref.pid, ref.create_time, job.run_id)
        job.peak_vram_mb = record.measured_peak_mb
        c.running[job.run_id] = job
        c.episodes.watch(job.run_id, run_dir)
        self._rereserve(job, record, ref, txn)
        self._rehold_shared(job)
        return job

    def sync_queue(self) -> None:
        """Drop queued jobs that someone else cancelled or took over (checked every few s)."""
        c = self.core
        with c.lock:
            jobs = [j for j in c.queue if j.loading is None]
        gone = []
        for job in jobs:
            record = read_record(job.run_dir)
            if record is None or not self.still_ours(record):
                gone.append(job)
        if gone:
            with c.lock:
                for job in gone:
                    self.drop(job)

    def still_ours(self, record: Mapping[str, Any]) -> bool:
        """A queued run's record on disk says it is still ours to start."""
        return (record.get("state") == RunState.QUEUED.value
                and record.get("cancel_requested_at") is None and record.get("pid") is None
                and record.get("owner") == str(self.core.owner))

    def drop(self, job: Job) -> None:
        """Forget a queued job that is no longer ours to run (lock held)."""
        c = self.core
        c.queue.remove(job)
        c.jobs.pop(job.run_id, None)
        c.transition(job, derive_run_state(job.run_dir), write=Write.ALREADY)

    def _rereserve(self, job: Job, record: SchedulerRecord, ref: PidRef, txn: LedgerTxn
                   ) -> None:
        res = record.reservation or ReservationRecord()
        gpu = self.core.placement.adopt(job.run_id, res, job.exclusive)
        key = holder_key(ref.pid, ref.create_time, job.run_id)
        if txn.get(key) is None:
            txn.add(self.core.ledger_entry(job.run_id, ref, gpu=gpu, vram_mb=res.mb,
                                           ram_mb=res.ram_mb, exclusive=job.exclusive,
                                           cpus=job_cores(job)))
        if gpu is None or len(res.gpus) < 2:
            return
        # A run with replicas: every further GPU it holds, one entry each, as at its start.
        job.gpus = tuple(res.gpus)
        for part, other in enumerate(res.gpus[1:], start=1):
            if txn.get(f"{key}#{part}") is None:
                txn.add(self.core.ledger_entry(job.run_id, ref, gpu=other,
                                               vram_mb=res.each_mb, exclusive=job.exclusive,
                                               part=part))

    def _rehold_shared(self, job: Job) -> None:
        shared = self.core.shared
        try:
            urls = read_json(job.run_dir / SHARED_URLS_FILENAME)
        except (OSError, ValueError):
            return
        for url in (urls.values() if isinstance(urls, dict) else ()):
            if isinstance(url, str) and shared.hold(job.run_id, url):
                ns = next(n for n in shared.all() if n.hosted.url == url)
                if ns.name not in job.shared:
                    job.shared.append(ns.name)


_EXIT_OF = {RunState.DONE: RunExit.OK, RunState.FAILED: RunExit.FAILED,
            RunState.CANCELLED: RunExit.CANCELLED}
"""The exit code a run that ended in a state exits with (an aborted one: unknown)."""


def ended_fields(run_dir: Path, state: RunState) -> dict[str, Any]:
    """``finished_at`` and ``exit_code`` of a run that ended while no scheduler watched it,
    from what it left: its summary's end time (else its last file's), and the exit code
    its final state implies (its exit status went to its parent, which was gone)."""
    header = read_summary_header(run_dir)
    finished = header.finished_at if header is not None else None
    if finished is None:
        times = [p.stat().st_mtime for p in (run_dir / DONE_FILENAME, run_dir / SUMMARY_FILENAME)
                 if p.exists()]
        finished = datetime.fromtimestamp(max(times)).astimezone().isoformat(
            timespec="milliseconds") if times else None
    code = _EXIT_OF.get(state)
    return {"finished_at": finished, "exit_code": None if code is None else int(code)}
