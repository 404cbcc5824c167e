"""Starting an admitted run: host its shared nodesets if needed, spawn it, reserve for it.

Runs on the loop thread (a run with ``tie_to_backend`` is tied to the thread that
spawned it), under the ledger lock and the core's lock, inside the tick's transaction.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from evaltui.contract.records import SHARED_URLS_FILENAME
from evaltui.contract.states import RunState
from evaltui.contract.views import holder_key
from evaltui.procs.spawn import spawn_run, spawned_ref
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import now_iso
from evaltui.scheduler.admission.calibration import NodesetPart
from evaltui.scheduler.admission.decision import Wait, WaitKind
from evaltui.scheduler.admission.gpukey import GpuKey
from evaltui.scheduler.admission.ledger import LedgerNotDurable, LedgerTxn
from evaltui.scheduler.core import Core, Write
from evaltui.scheduler.runs.handles import RunHandle
from evaltui.scheduler.runs.jobs import Job, Loading, job_cores
from evaltui.scheduler.runs.spreading import (
    replicated_nodesets,
    spread_record,
    spread_reservation,
)
from evaltui.scheduler.shared.nodesets import SharedNodeset

log = logging.getLogger(__name__)

Spawner = Callable[[Path, Mapping[str, str]], "subprocess.Popen[bytes]"]
"""Starts a run subprocess for a run dir with the given environment (own session)."""


def default_spawner(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """``python -m evaltui.engine.main RUN_DIR`` in a new session (evaltui.launch)."""
    return spawn_run(run_dir, env, record=False)


class Starter:
    """Turns an admission into a running process."""

    def __init__(self, core: Core, spawner: Spawner | None) -> None:
        self.core = core
        self._spawner = spawner or default_spawner

    def start(self, job: Job, key: GpuKey | None, txn: LedgerTxn,
              spread: tuple[int, ...] = (), keys: tuple[GpuKey, ...] = ()) -> None:
        """Start an admitted job (ledger lock and core lock held); ``spread``: every GPU
        of this machine a run with replicas was admitted on (``key`` its first), each
        held by a ledger entry of its own, all stored together or none; ``keys``: every
        GPU it was admitted on (node GPUs of a cluster too: the placement reserved them,
        all or none, and pins the run to them).

        If a shared nodeset it uses is not hosted yet, loading it may take minutes: that
        happens on a loader thread under a *pending* reservation held by this scheduler,
        and the run is spawned by the tick after the load (``finish_loading``). The job
        stays ``queued`` on disk meanwhile, so a crash then re-queues it rather than losing
        it. Otherwise the run is spawned now.

        Raises LedgerNotDurable, having started nothing, if the reservation cannot be
        stored (fail closed: see ledger.py).
        """
        c = self.core
        est = job.estimate
        vram, ram = (est.vram_mb, est.ram_mb) if est else (0, 0)
        job.gpus = tuple(spread)
        job.keys = tuple(keys)
        if key is not None and c.placement.local_gpu(key) is None:
            # A GPU on another machine: no shared nodeset is hosted here for it.
            self._spawn(job, key, vram, ram, txn, fresh=(),
                        hold_keys=self._hold(job, key, vram, ram, txn))
            return
        gpu = c.placement.local_gpu(key)
        env = c.run_env(gpu)
        parts = self._shared_parts(job)
        missing = [p for p in parts if p.key not in c.shared.loaded_keys()]
        # Stored before anything starts (fail closed): the hold of a run spawned now, or
        # the pending reservation that minutes of loading happen on the strength of.
        hold_keys = self._hold(job, key, vram, ram, txn, loading=bool(missing))
        for part in parts:
            if part not in missing:
                _attach(job, c.shared.acquire(job.run_id, part, env, gpu), part)
        if not missing:
            self._spawn(job, gpu, vram, ram, txn, fresh=(), hold_keys=hold_keys)
            return
        job.loading = Loading(gpu, hold_keys[0], hold_keys[1:])
        c.loading[job.run_id] = job
        where = f" on GPU{gpu}" if gpu is not None else ""
        names = ", ".join(p.name for p in missing)
        c.set_wait(job, Wait(job.run_id, WaitKind.LOADING,
                             f"admitted{where}; loading shared nodeset {names}"))
        threading.Thread(target=self._load_shared, args=(job, missing, env, gpu),
                         name=f"evaltui-load-{job.run_id}", daemon=True).start()

    def _load_shared(self, job: Job, parts: list[NodesetPart], env: Mapping[str, str],
                     gpu: int | None) -> None:
        """Loader thread: host the job's missing shared nodesets, then nudge the tick."""
        loading = job.loading
        assert loading is not None
        try:
            for part in parts:
                ns = self.core.shared.acquire(job.run_id, part, env, gpu)
                loading.started.append((part, ns))
        except Exception as exc:  # reported on the job; the scheduler carries on
            loading.error = f"cannot host shared nodeset: {exc}"
        finally:
            loading.done = True
            self.core.nudge()

    def finish_loading(self) -> None:
        """Spawn the runs whose shared nodesets finished loading (or fail them)."""
        c = self.core
        with c.lock:
            done = [j for j in c.loading.values() if j.loading and j.loading.done]
        if not done:
            return
        with c.ledger.transaction() as txn, c.lock:
            for job in done:
                loading = job.loading
                assert loading is not None
                job.loading = None
                c.loading.pop(job.run_id, None)
                for key in (loading.pending_key, *loading.spread_keys):
                    txn.remove(key)
                if job.state is not RunState.QUEUED:  # cancelled while loading
                    c.shared.release(job.run_id, c.tick_no)
                    continue
                if loading.error is not None:
                    self._fail_unstarted(job, loading.error)
                    continue
                for part, ns in loading.started:
                    _attach(job, ns, part)
                est = job.estimate
                vram, ram = (est.vram_mb, est.ram_mb) if est else (0, 0)
                # The loading's pending reservation (removed above) stays on disk until
                # this transaction stores the run's own: it is the hold.
                self._spawn(job, loading.gpu, vram, ram, txn, fresh=loading.started,
                            hold_keys=None)

    def release_pending(self) -> None:
        """Drop the pending reservations of loads in flight (the scheduler stops: their
        jobs are still queued on disk, and this process lives on, so they would not die)."""
        c = self.core
        with c.lock:
            pending = [key for j in c.loading.values() if j.loading
                       for key in (j.loading.pending_key, *j.loading.spread_keys)]
        if pending:
            with c.ledger.transaction() as txn:
                for key in pending:
                    txn.remove(key)

    def _spawn(self, job: Job, key: GpuKey | None, vram: int, ram: int, txn: LedgerTxn,
               fresh: Sequence[tuple[NodesetPart, SharedNodeset]],
               hold_keys: list[str] | None) -> None:
        """Spawn the run and reserve for it (ledger lock and core lock held), under the
        stored holds ``hold_keys`` (which the run's own reservations replace) or pending
        reservations its caller removed in this transaction.

        Hosts started for this job get their own reservation (their share of the
        estimate), which outlives the run if the nodeset stays loaded.
        """
        c = self.core
        # A GPU on another machine is held where the placement holds it (the cluster
        # ledger); this machine's ledger then keeps only the run's host RAM (gpu None).
        gpu = c.placement.local_gpu(key)
        each = vram  # one replica's, on every further GPU of a run with replicas
        for part, ns in fresh:
            mb = job.estimate.per_nodeset_mb.get(part.name, 0) if job.estimate else 0
            ref = ns.hosted.ref
            txn.add(c.ledger_entry(f"nodeset:{ns.name}", ref, gpu=gpu, vram_mb=mb))
            vram = max(0, vram - mb)
        try:
            if job.spec is not None:
                # Rewritten at every start: a resumed run must not find the URLs of hosts
                # that served its earlier attempt. spec.json keeps only what the client gave.
                write_json_atomic(job.run_dir / SHARED_URLS_FILENAME,
                                  {**job.spec.shared_urls, **job.shared_urls})
            # On disk before the spawn: a crash in between reads as aborted (resumable),
            # never as a job still queued that a restarted scheduler would start again.
            c.transition(job, RunState.STARTING, write=Write.MUST, admitted_at=now_iso(),
                         reservation=spread_reservation(
                             c.placement.reservation(key, vram, ram), job.gpus, each),
                         waiting_reason=None, waiting_kind=None, scheduler_pid=os.getpid(),
                         **c.placement.record(key), **spread_record(job.keys))
        except OSError as exc:  # its run dir's disk is full: stays queued, tried again
            for hold_key in hold_keys or ():
                txn.unhold(hold_key)
            c.shared.release(job.run_id, c.tick_no)
            c.set_wait(job, Wait(job.run_id, WaitKind.DISK_FULL,
                                 f"cannot write its run dir ({exc.strerror or exc}); "
                                 "started once there is room"))
            return
        env = c.run_env(None)
        env.update(c.placement.pin(key, job.run_id))
        if job.keys:  # CUDA_VISIBLE_DEVICES=0,2,3, or the node GPUs of a cluster
            env.update(c.placement.pin_all(job.keys, job.run_id))
        try:
            proc = self._spawner(job.run_dir, env)
        except OSError as exc:
            for hold_key in hold_keys or ():
                txn.unhold(hold_key)
            self._fail_unstarted(job, f"cannot start the run subprocess: {exc}")
            return
        ref = spawned_ref(proc)
        for hold_key in hold_keys or ():
            txn.unhold(hold_key)  # replaced by the run's own, in the same store
        txn.add(c.ledger_entry(job.run_id, ref, gpu=gpu, vram_mb=vram, ram_mb=ram,
                               exclusive=job.exclusive, cpus=job_cores(job)))
        for part, other in enumerate(job.gpus[1:], start=1):
            txn.add(c.ledger_entry(job.run_id, ref, gpu=other, vram_mb=each,
                                   exclusive=job.exclusive, part=part))
        job.reservation_key = holder_key(ref.pid, ref.create_time, job.run_id)
        # The second write of the start, after the spawn: the PID exists only now, and a
        # restarted scheduler adopts the live run by it (until then it reads aborted).
        job.set(pid=ref.pid, pid_create_time=ref.create_time)
        c.writer.write(job)
        job.handle = RunHandle(ref, proc)
        job.wait = None
        c.queue.remove(job)
        c.running[job.run_id] = job
        c.episodes.watch(job.run_id, job.run_dir)

    def _hold(self, job: Job, key: GpuKey | None, vram: int, ram: int, txn: LedgerTxn,
              loading: bool = False) -> list[str]:
        """Store a reservation for the job's memory held by this scheduler (a hold, or
        with ``loading`` the pending one its shared nodesets load under); its keys: one
        per GPU of a run with replicas, stored in one write (all or none)."""
        c = self.core
        me = c.me
        gpu = c.placement.local_gpu(key)
        holds = [c.ledger_entry(job.run_id, me, gpu=gpu, vram_mb=vram, ram_mb=ram,
                                exclusive=job.exclusive, pending=True, cpus=job_cores(job))]
        holds += [c.ledger_entry(job.run_id, me, gpu=other, vram_mb=vram,
                                 exclusive=job.exclusive, pending=True, part=part)
                  for part, other in enumerate(job.gpus[1:], start=1)]
        for hold in holds:
            if loading:
                txn.add(hold)  # an admission of its own until the load ends
            else:
                txn.hold(hold)
        try:
            c.ledger.flush(txn)
        except LedgerNotDurable:
            for hold in holds:
                txn.discard(hold.key)  # never admitted: nothing to release
            raise
        return [hold.key for hold in holds]

    def _shared_parts(self, job: Job) -> list[NodesetPart]:
        """The job's shared nodesets this scheduler hosts (not given a URL by the spec)."""
        if not self.core.shared.enabled or job.spec is None:
            return []
        # A nodeset with replicas is hosted by the run itself, one host per GPU.
        replicated = replicated_nodesets(job.spec.graph)
        # So is one in its own Python environment (its host starts one over there).
        nodesets = job.spec.graph.get("nodesets")
        own_env = {n for n, ns in nodesets.items() if isinstance(ns, dict)
                   and "environment" in ns} if isinstance(nodesets, dict) else set()
        return [p for p in job.parts
                if p.parallelism == "shared" and p.name not in job.spec.shared_urls
                and p.name not in replicated | own_env]

    def _fail_unstarted(self, job: Job, error: str) -> None:
        c = self.core
        log.error("run %s: %s", job.run_id, error)
        c.shared.release(job.run_id, c.tick_no)
        c.queue.remove(job)
        c.jobs.pop(job.run_id, None)
        c.transition(job, RunState.FAILED, error=error, finished_at=now_iso(),
                     waiting_reason=None, waiting_kind=None)


def _attach(job: Job, ns: SharedNodeset, part: NodesetPart) -> None:
    if ns.name not in job.shared:
        job.shared.append(ns.name)
    job.shared_urls[part.name] = ns.hosted.url
