"""The tick: reap what ended, then admit what fits (DESIGN §6).

Once a second on the loop thread, and at once when nudged (a submit, a release, a run's
exit). Queued eval runs and waiting admit entries (``evaltui run``) are candidates of
the same tick: merged into one order (priority, then age), decided by the pure
``admission.decide`` against one resource snapshot minus the reservations of one ledger
transaction, so both obey the same starvation rule and no backend over-commits.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from typing import Any

from evaltui.rundir.store import read_record
from evaltui.scheduler.admission.accounting import Accounting
from evaltui.scheduler.admission.decision import Admission, Candidate, Wait, WaitKind, decide
from evaltui.scheduler.admission.ledger import LedgerNotDurable, LedgerTxn
from evaltui.scheduler.admission.sampling import Sampler
from evaltui.scheduler.admits.entry import Entry
from evaltui.scheduler.admits.queue import AdmitQueue
from evaltui.scheduler.core import Core
from evaltui.scheduler.runs.claims import Claims
from evaltui.scheduler.runs.envbuilds import EnvBuilds
from evaltui.scheduler.runs.fairshare import ServedClock, fair_share
from evaltui.scheduler.runs.jobs import Job
from evaltui.scheduler.runs.lifecycle import Lifecycle
from evaltui.scheduler.runs.lostreplicas import LostReplicas, release_lost
from evaltui.scheduler.runs.moving import move_displaced
from evaltui.scheduler.runs.spreading import hosted_for, replica_ask_here, say_one_replica
from evaltui.scheduler.runs.starting import Starter

log = logging.getLogger(__name__)


def queue_order(jobs: list[Job], entries: list[Entry], clock: ServedClock | None = None
                ) -> list[Job | Entry]:
    """Queued jobs and waiting admit entries (each list already sorted) in one order;
    sets and lone runs take turns within a priority (fairshare.py, by ``clock``)."""
    jobs = fair_share(jobs, clock).order
    if not entries:  # always so on a cluster: the queue is in order already
        return list(jobs)
    keyed: list[tuple[Any, Job | Entry]] = [(j.sort_key(), j) for j in jobs]
    others: list[tuple[Any, Job | Entry]] = [(e.sort_key(), e) for e in entries]
    return [item for _, item in heapq.merge(keyed, others, key=lambda pair: pair[0])]


class Ticker:
    """One tick of the scheduler; ``tick`` is safe to call from any thread."""

    def __init__(self, core: Core, lifecycle: Lifecycle, starter: Starter, claims: Claims,
                 sampler: Sampler, admits: AdmitQueue) -> None:
        self.core = core
        self.lifecycle = lifecycle
        self.starter = starter
        self.claims = claims
        self.sampler = sampler
        self.admits = admits
        self.lost = LostReplicas()
        self.builds = EnvBuilds(core)
        self._lock = threading.Lock()

    def tick(self) -> None:
        """Reap finished runs and gone holders, then admit what fits; never raises for a
        resource problem."""
        c = self.core
        with self._lock:
            c.tick_no += 1
            c.calibration.refresh()
            self.lifecycle.reap()
            release_lost(c, self.lost)  # a lost replica's GPU, for the admission below
            self.admits.reap()
            self.lifecycle.observe_started()
            self.starter.finish_loading()
            self.builds.tick()  # before admission: a run whose build ended is a candidate
            for ns in c.shared.tick(c.tick_no):
                log.info("unloaded shared nodeset %s", ns.name)
                self.sampler.learn_host(ns)
            with c.lock:
                waiting = bool(len(c.queue) or self.admits.waiting())
            if waiting or c.running or c.shared.all() or c.placement.holds():
                self._admit_and_sample(waiting)
        c.emit_pending()
        self.admits.emit()

    def _admit_and_sample(self, waiting: bool) -> None:
        c = self.core
        with c.lock:
            live = set(c.running) | set(c.loading)
        c.placement.sync(live)
        displaced = c.placement.displaced()
        if displaced:
            move_displaced(c, displaced, self.sampler.account(c.ledger.entries()))
        lock_reason = c.lock_reason()
        if waiting and lock_reason is None:
            with c.ledger.transaction() as txn:
                acct = self.sampler.account(txn.entries)
                self.sampler.sample(acct)
                if self._durable(txn):
                    self._admission(acct, txn)
            return
        if c.running or c.shared.all():
            self.sampler.sample(self.sampler.account(c.ledger.entries()))
        if lock_reason is not None:
            with c.lock:
                # The jobs not admitted already nor building, and the waiting entries.
                self._all_wait([j for j in c.queue if j.admissible] + self.admits.waiting(),
                               WaitKind.LOCK, lock_reason)

    def _durable(self, txn: LedgerTxn) -> bool:
        """Whether what the ledger holds is on disk (storing it now if an earlier store
        failed); if not, every waiting job and entry is told why and nothing is admitted."""
        c = self.core
        if c.ledger.error is None:
            return True
        try:
            c.ledger.flush(txn)
            return True
        except LedgerNotDurable as exc:
            with c.lock:
                self._all_wait([j for j in c.queue if j.admissible] + self.admits.waiting(),
                               WaitKind.LEDGER, str(exc))  # fail closed
            return False

    def _all_wait(self, items: list[Job | Entry], kind: WaitKind, reason: str) -> None:
        """Each of ``items`` waits for the same reason (core lock held)."""
        for item in items:
            if isinstance(item, Job):
                self.core.set_wait(item, Wait(item.run_id, kind, reason))
            else:
                self.admits.set_wait(item, Wait(item.ledger_id, kind, reason))

    def _admission(self, acct: Accounting, txn: LedgerTxn) -> None:
        c = self.core
        placement = c.placement
        gpus = placement.candidates(acct.gpus)
        views = {g.index: g for g in gpus or ()}
        with c.lock:
            jobs = [job for job in c.queue if job.admissible]
            entries = self._placeable_entries()
            if not gpus and self._refuse_without_gpus(jobs):
                return
            order = queue_order(jobs, entries, c.served)
            version = c.estimate_version()
            candidates = [self._candidate(item, version) if isinstance(item, Job)
                          else item.candidate() for item in order]
            admits, waits = decide(candidates, gpus, acct.host, now=time.time(),
                                   claim_after_sec=c.claim_after_sec)
            by_id = {cand.run_id: item for cand, item in zip(candidates, order, strict=True)}
            share = fair_share(jobs, c.served)
            for run_id, wait in waits.items():
                item = by_id[run_id]
                if isinstance(item, Job):
                    c.set_wait(item, share.explain(wait))
                else:
                    self.admits.set_wait(item, wait)
            for done, admit in enumerate(admits):
                if admit.note is not None:  # once: where it starts
                    log.warning("%s %s", admit.run_id, admit.note)
                try:
                    self._admit(admit, by_id[admit.run_id], views, txn)
                except LedgerNotDurable as exc:  # fail closed: this one and the rest wait
                    self._all_wait([by_id[a.run_id] for a in admits[done:]], WaitKind.LEDGER,
                                   str(exc))
                    break

    def _admit(self, admit: Admission, item: Job | Entry, views: dict[Any, Any],
               txn: LedgerTxn) -> None:
        """Start one admission (ledger lock and core lock held); LedgerNotDurable if its
        reservation cannot be stored, with nothing started."""
        c = self.core
        placement = c.placement
        if isinstance(item, Entry):
            self.admits.grant(item, placement.local_gpu(admit.gpu),
                              views.get(admit.gpu) if admit.gpu is not None else None, txn)
            return
        # The one read of the record before a start, under the ledger lock: another
        # backend may have cancelled or claimed the run through its file since.
        record = read_record(item.run_dir)
        if record is None or not self.claims.still_ours(record):
            self.claims.drop(item)  # cancelled or taken over by another backend
            return
        if admit.gpu is not None:
            est = item.estimate
            vram = est.vram_mb if est else 0
            if len(admit.gpus) > 1:  # a run with replicas: every GPU or none
                refused = placement.reserve_all(item.run_id, admit.gpus, vram, item.exclusive,
                                                [views[k].free_mb for k in admit.gpus])
            else:
                refused = placement.reserve(item.run_id, admit.gpu, vram, item.exclusive,
                                            views[admit.gpu].free_mb)
            if refused is not None:  # another scheduler took it first
                c.set_wait(item, Wait(item.run_id, WaitKind.NO_NODE, refused))
                return
        elif not views and item.candidate is not None and item.candidate.replicas is not None:
            say_one_replica(item)  # no GPU measured (not: one known to need no VRAM)
        spread = tuple(g for g in (placement.local_gpu(k) for k in admit.gpus) if g is not None)
        self.starter.start(item, admit.gpu, txn, spread, keys=admit.gpus)
        c.served.served(item)

    def _placeable_entries(self) -> list[Entry]:
        """The waiting admit entries (``evaltui run``), unless the placement cannot
        place them (a Ray cluster): then they wait saying so. Core lock held."""
        refused = self.core.placement.refuses_admits()
        if refused is None:
            return self.admits.waiting()
        for entry in self.admits.waiting():
            self.admits.set_wait(entry, Wait(entry.ledger_id, WaitKind.NO_NODE, refused))
        return []

    def _refuse_without_gpus(self, jobs: list[Job]) -> bool:
        """Whether nothing is admitted while no GPU is reported (the jobs wait saying
        why), rather than on host RAM alone. Core lock held."""
        refused = self.core.placement.without_gpus()
        if refused is not None:
            for job in jobs:
                self.core.set_wait(job, Wait(job.run_id, WaitKind.NO_NODE, refused))
        return refused is not None

    def _candidate(self, job: Job, version: tuple[int, int]) -> Candidate:
        """The job as admission sees it, cached until its estimate may have changed."""
        if job.estimate is None or job.estimate_version != version or job.candidate is None:
            c = self.core
            if job.spec is not None:
                job.estimate = c.calibration.estimate(job.spec, job.parts,
                                                      hosted_for(job, c.shared_keys()))
            job.estimate_version = version
            est = job.estimate
            job.candidate = Candidate(
                job.run_id, est.vram_mb if est else 0, est.ram_mb if est else 0, job.exclusive,
                est.needs_gpu if est else False, job.queued_epoch,
                replicas=replica_ask_here(job, c.placement), cpus=est.cpus if est else 0.0)
        return job.candidate
