"""Status reads of a scheduler (views.py types): runs, the queue, resources, nodesets.

Any thread; they take the core's lock only to copy what they need, and read run dirs of
runs this scheduler does not track through the run index.
"""

from __future__ import annotations

from evaltui.rundir import SUMMARY_FILENAME, read_json
from evaltui.scheduler import procs
from evaltui.scheduler.admitentry import Entry
from evaltui.scheduler.admits import AdmitQueue
from evaltui.scheduler.core import Core, RunNotFound
from evaltui.scheduler.jobs import Job
from evaltui.scheduler.runindex import strip_rows
from evaltui.scheduler.sampling import Sampler
from evaltui.scheduler.shared import SharedNodeset
from evaltui.scheduler.ticking import queue_order
from evaltui.scheduler.views import (
    GpuInfo,
    HostInfo,
    NodesetInfo,
    QueuedJob,
    ResourcesInfo,
    RunInfo,
)
from evaltui.spec import JobSpec
from evaltui.states import RunState


class Reads:
    """What the API and the TUI ask a scheduler."""

    def __init__(self, core: Core, sampler: Sampler, admits: AdmitQueue) -> None:
        self.core = core
        self.sampler = sampler
        self.admits = admits

    def get_run(self, run_id: str) -> RunInfo:
        """State, scheduler record and summary (without rows) of one run."""
        c = self.core
        run_dir = c.run_dir(run_id)
        with c.lock:
            job = c.jobs.get(run_id)
            if job is not None:
                record = dict(job.record)
                state, wait = job.state, job.wait
        if job is None:
            info = c.index.read(run_id)
            if info is None:
                raise RunNotFound(run_id)
            return info
        summary = None
        if state is not RunState.QUEUED or (run_dir / SUMMARY_FILENAME).exists():
            try:
                summary = strip_rows(read_json(run_dir / SUMMARY_FILENAME))
            except (OSError, ValueError):
                summary = None
        reason = wait.reason if wait is not None else record.get("waiting_reason")
        return RunInfo(run_id, run_dir, state, record, summary,
                       reason if state is RunState.QUEUED else None)

    def list_runs(self, state: RunState | str | None = None) -> list[RunInfo]:
        """Every run under the outputs root, newest first, optionally of one state."""
        c = self.core
        wanted = RunState(state) if state is not None else None
        out = []
        for run_id in c.index.run_ids():
            with c.lock:
                job = c.jobs.get(run_id)
                known = job.state if job is not None else None
            if wanted is not None and known is not None and known is not wanted:
                continue
            try:
                info = self.get_run(run_id)
            except RunNotFound:
                continue  # deleted while listing
            if wanted is None or info.state is wanted:
                out.append(info)
        return out

    def queue(self) -> list[QueuedJob]:
        """Queued runs and waiting admit entries in admission order, with why they wait."""
        with self.core.lock:
            order = queue_order(list(self.core.queue), self.admits.waiting())
            return [_queued_job(item, position) if isinstance(item, Job)
                    else _queued_admit(item, position) for position, item in enumerate(order)]

    def resources(self) -> ResourcesInfo:
        """Per-GPU total/used/free/reserved, host RAM/CPU, the ledger and the lock."""
        c = self.core
        live = [r for r in c.ledger.entries() if procs.alive(r.holder_pid, r.holder_create_time)]
        snap, acct = self.sampler.measure(live)
        gpus = []
        views = {v.index: v for v in acct.gpus or ()}
        for g in snap.gpu.gpus:
            v = views.get(g.index)
            reserved = v.outstanding_mb if v else 0
            gpus.append(GpuInfo(g.index, g.name, g.total_mb, g.used_mb, g.free_mb, reserved,
                                g.free_mb - reserved, g.utilization_pct, v.runs if v else 0,
                                v.exclusive_run if v else None, g.processes))
        h = snap.host
        host = HostInfo(h.ram_total_mb, h.ram_available_mb, acct.host.outstanding_mb,
                        h.cpu_percent, h.cpu_count, h.load_avg_1m)
        return ResourcesInfo(snap.gpu.available, snap.gpu.reason, snap.gpu.fake, tuple(gpus),
                             host, tuple(live), c.ilock.current(), snap.taken_at)

    def nodesets(self) -> list[NodesetInfo]:
        """Shared nodesets hosted by this scheduler, with refcounts."""
        return [nodeset_info(ns) for ns in self.core.shared.all()]


def _queued_job(job: Job, position: int) -> QueuedJob:
    est, wait = job.estimate, job.wait
    return QueuedJob(
        run_id=job.run_id, position=position, priority=job.priority,
        queued_at=job.record.get("queued_at"),
        waiting_reason=wait.reason if wait else str(job.record.get("waiting_reason")),
        waiting_kind=wait.kind.value if wait else "new",
        estimate_mb=est.vram_mb if est else 0, ram_estimate_mb=est.ram_mb if est else 0,
        estimate_source=est.source if est else "unknown", exclusive=job.exclusive,
        graph_name=_graph_name(job.spec))


def _queued_admit(entry: Entry, position: int) -> QueuedJob:
    wait = entry.wait
    return QueuedJob(
        run_id=entry.ledger_id, position=position, priority=entry.priority,
        queued_at=entry.queued_iso(), waiting_reason=entry.reason() or "",
        waiting_kind=wait.kind.value if wait else "new",
        estimate_mb=entry.vram_mb or 0, ram_estimate_mb=0,
        estimate_source="declared" if entry.vram_mb is not None else "whole_gpu",
        exclusive=entry.exclusive, graph_name=None, kind="admit", label=entry.label,
        command=entry.command)


def _graph_name(spec: JobSpec | None) -> str | None:
    if spec is None:
        return None
    name = spec.eval.graph_name or spec.graph.get("name")
    return name if isinstance(name, str) else None


def nodeset_info(ns: SharedNodeset) -> NodesetInfo:
    return NodesetInfo(ns.name, ns.key, ns.impl, dict(ns.params), ns.hosted.url,
                       ns.hosted.ref.pid, ns.origin, ns.refcount, tuple(sorted(ns.holders)),
                       ns.gpu, ns.loaded_at)
