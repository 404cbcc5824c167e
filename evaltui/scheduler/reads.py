"""Status reads of a scheduler (evaltui.contract.views types): runs, the queue, resources, nodesets.

Any thread; they take the core's lock only to copy what they need, and read run dirs of
runs this scheduler does not track through the run index.
"""

from __future__ import annotations

from evaltui.contract import views
from evaltui.contract.records import SUMMARY_FILENAME
from evaltui.contract.spec import JobSpec
from evaltui.contract.states import RunState
from evaltui.contract.views import run_view
from evaltui.rundir.summaryfile import read_summary
from evaltui.scheduler import procs
from evaltui.scheduler.admission.gpukey import split_key
from evaltui.scheduler.admission.sampling import Sampler
from evaltui.scheduler.admits.entry import Entry
from evaltui.scheduler.admits.queue import AdmitQueue
from evaltui.scheduler.core import Core, RunNotFound
from evaltui.scheduler.lock import LockInfo
from evaltui.scheduler.runs.jobs import Job
from evaltui.scheduler.shared.nodesets import SharedNodeset
from evaltui.scheduler.ticking import queue_order


class Reads:
    """What the API and the TUI ask a scheduler."""

    def __init__(self, core: Core, sampler: Sampler, admits: AdmitQueue) -> None:
        self.core = core
        self.sampler = sampler
        self.admits = admits

    def get_run(self, run_id: str) -> views.Run:
        """State, scheduler record and summary (without rows) of one run."""
        c = self.core
        run_dir = c.run_dir(run_id)
        with c.lock:
            job = c.jobs.get(run_id)
            if job is not None:
                record = job.record
                state, wait = job.state, job.wait
        if job is None:
            info = c.index.read(run_id)
            if info is None:
                raise RunNotFound(run_id)
            return info
        summary = None
        if state is not RunState.QUEUED or (run_dir / SUMMARY_FILENAME).exists():
            summary = read_summary(run_dir)
        reason = wait.reason if wait is not None else record.waiting_reason
        return run_view(run_id, run_dir, state, record, summary, c.index.brief(run_id),
                        waiting_reason=reason if state is RunState.QUEUED else None)

    def list_runs(self, state: RunState | str | None = None) -> list[views.Run]:
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

    def queue(self) -> list[views.QueueEntry]:
        """Queued runs and waiting admit entries in admission order, with why they wait."""
        with self.core.lock:
            order = queue_order(list(self.core.queue), self.admits.waiting(),
                                self.core.served)
            return [_queued_job(item, position) if isinstance(item, Job)
                    else _queued_admit(item, position) for position, item in enumerate(order)]

    def resources(self) -> views.Resources:
        """Per-GPU total/used/free/reserved, host RAM/CPU, the ledger and the lock."""
        c = self.core
        live = [r for r in c.ledger.entries() if procs.alive(r.holder_pid, r.holder_create_time)]
        snap, acct = self.sampler.measure(live)
        gpus = []
        accounted = {v.index: v for v in acct.gpus or ()}
        for g in snap.gpu.gpus:
            v = accounted.get(g.index)
            reserved = v.outstanding_mb if v else 0
            processes = None if g.processes is None else [
                views.GpuProcess(pid=p.pid, used_mb=p.used_mb) for p in g.processes]
            index, node = split_key(g.index)  # a NodeGpu on a Ray cluster
            assert index is not None  # a reading's GPU always has one
            gpus.append(views.Gpu(
                index=index, name=g.name, total_mb=g.total_mb, used_mb=g.used_mb,
                free_mb=g.free_mb, reserved_mb=reserved, available_mb=g.free_mb - reserved,
                utilization_pct=g.utilization_pct, runs=v.runs if v else 0,
                exclusive_run=v.exclusive_run if v else None, processes=processes,
                node=node))
        h = snap.host
        host = views.Host(ram_total_mb=h.ram_total_mb, ram_available_mb=h.ram_available_mb,
                          ram_reserved_mb=acct.host.outstanding_mb, cpu_percent=h.cpu_percent,
                          cpu_count=h.cpu_count, load_avg_1m=h.load_avg_1m)
        held = c.ilock.current()
        return views.Resources(
            gpu_available=snap.gpu.available, gpu_reason=snap.gpu.reason,
            fake_gpus=snap.gpu.fake, gpus=gpus, host=host,
            ledger=[entry.model_copy(update={"other_user": not entry.mine})
                    for entry in live],
            lock=lock_view(held) if held is not None else None, taken_at=snap.taken_at,
            nodes=c.placement.nodes(), nodes_lost=c.placement.nodes_lost(),
            ledger_error=c.ledger.error, ledger_note=c.ledger.note)

    def nodesets(self) -> list[views.Nodeset]:
        """Shared nodesets hosted by this scheduler, with refcounts."""
        return [nodeset_view(ns) for ns in self.core.shared.all()]


def _queued_job(job: Job, position: int) -> views.QueueEntry:
    est, wait = job.estimate, job.wait
    return views.QueueEntry(
        run_id=job.run_id, position=position, priority=job.priority,
        queued_at=job.record.queued_at,
        waiting_reason=wait.reason if wait else str(job.record.waiting_reason),
        waiting_kind=wait.kind.value if wait else "new",
        estimate_mb=est.vram_mb if est else 0, ram_estimate_mb=est.ram_mb if est else 0,
        estimate_source=est.source if est else "unknown", exclusive=job.exclusive,
        graph_name=_graph_name(job.spec))


def _queued_admit(entry: Entry, position: int) -> views.QueueEntry:
    wait = entry.wait
    return views.QueueEntry(
        run_id=entry.ledger_id, position=position, priority=entry.priority,
        queued_at=entry.queued_iso(), waiting_reason=entry.reason() or "",
        waiting_kind=wait.kind.value if wait else "new",
        estimate_mb=entry.vram_mb or 0, ram_estimate_mb=0,
        estimate_source="declared" if entry.vram_mb is not None else "whole_gpu",
        exclusive=entry.exclusive, graph_name=None, kind="admit", label=entry.label,
        command=entry.command, admit_kind="serve" if entry.kind == "serve" else "run")


def _graph_name(spec: JobSpec | None) -> str | None:
    if spec is None:
        return None
    name = spec.eval.graph_name or spec.graph.get("name")
    return name if isinstance(name, str) else None


def lock_view(held: LockInfo) -> views.Lock:
    """The interactive lock as status reads show it."""
    return views.Lock.model_validate(held, from_attributes=True)


def nodeset_view(ns: SharedNodeset) -> views.Nodeset:
    """A hosted shared nodeset as status reads show it (its host file's fields)."""
    return views.Nodeset.model_validate({**ns.to_json(), "refcount": ns.refcount})
