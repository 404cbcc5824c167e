"""Measuring and learning: one resource snapshot per probe interval, each run's peak
usage, and calibration from the runs (and shared-nodeset hosts) that finished."""

from __future__ import annotations

import threading
import time

from evaltui.contract.states import RunState
from evaltui.contract.views import LedgerEntry, holder_key
from evaltui.scheduler import procs
from evaltui.scheduler.admission.accounting import Accounting, account
from evaltui.scheduler.admission.calibration import NodesetPart
from evaltui.scheduler.admission.resources import ResourceSnapshot
from evaltui.scheduler.core import Core
from evaltui.scheduler.runs.jobs import Job
from evaltui.scheduler.shared.nodesets import SharedNodeset

MIN_CALIBRATION_SAMPLES = 5
"""Usage readings a run must have had while running before its peak calibrates."""
MIN_CPU_SPAN_SEC = 1.0
"""Seconds between a run's first and last CPU readings before its CPU use calibrates."""


class Sampler:
    """The one GPU/host probe of a scheduler, and what it teaches the calibration."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._snapshot: ResourceSnapshot | None = None
        self._snapshot_at = -1e9
        self._host_peaks: dict[str, int] = {}

    def measure(self, entries: list[LedgerEntry]) -> tuple[ResourceSnapshot, Accounting]:
        """The snapshot, and ``entries`` set against that same snapshot."""
        with self._lock:
            snap = self._fresh()
            return snap, self._account(entries, snap)

    def account(self, entries: list[LedgerEntry]) -> Accounting:
        """Reservations set against one snapshot (see accounting.py)."""
        # A snapshot up to probe_interval old is safe here: free memory and per-process
        # usage come from the same reading, so a reservation is never both missing from
        # "used" and discounted as "already used" (see accounting.py).
        with self._lock:
            return self._account(entries, self._fresh())

    def _account(self, entries: list[LedgerEntry], snap: ResourceSnapshot) -> Accounting:
        # GPUs held elsewhere (a cluster's nodes) are set against their own ledger there.
        return self.core.placement.account(account(entries, snap, self.core.rss), entries,
                                           snap)

    def _fresh(self) -> ResourceSnapshot:
        now = time.monotonic()
        if self._snapshot is None or now - self._snapshot_at >= self.core.probe_interval:
            c = self.core
            self._snapshot = ResourceSnapshot(c.gpu_probe.read(), c.host_probe.read(),
                                              time.time())
            self._snapshot_at = now
        return self._snapshot

    def sample(self, acct: Accounting) -> None:
        """Record each running job's (and shared host's) peak usage."""
        c = self.core
        with c.lock:
            for job in c.running.values():
                usage = acct.usage.get(job.reservation_key or "")
                if usage is None:
                    continue
                if job.state is RunState.RUNNING and acct.taken_at != job.last_sample_at:
                    job.samples += 1
                    job.last_sample_at = acct.taken_at
                    if job.handle is not None:
                        reading = (time.monotonic(), procs.tree_cpu_sec(job.handle.ref.pid))
                        job.cpu_first = job.cpu_first or reading
                        job.cpu_last = reading
                changed = False
                if usage.vram_mb is not None and usage.vram_mb > (job.peak_vram_mb or -1):
                    job.peak_vram_mb, changed = usage.vram_mb, True
                if usage.ram_mb > job.peak_ram_mb:
                    job.peak_ram_mb = usage.ram_mb
                if changed:
                    job.set(measured_peak_mb=job.peak_vram_mb)
                    c.writer.schedule(job)
        for ns in c.shared.all():
            ref = ns.hosted.ref
            usage = acct.usage.get(holder_key(ref.pid, ref.create_time, f"nodeset:{ns.name}"))
            if usage is not None and usage.vram_mb is not None:
                self._host_peaks[ns.key] = max(self._host_peaks.get(ns.key, 0), usage.vram_mb)

    def learn(self, job: Job) -> None:
        """Calibrate the nodesets that ran inside a finished run from its measured peaks,
        and its graph's CPU use per worker.

        Peaks only from runs sampled often enough while running: a run too short to be seen
        at its peak would teach an estimate lower than its real need. CPU use is a mean
        (CPU seconds over the span between two readings), so a span of
        :data:`MIN_CPU_SPAN_SEC` is enough: a set of short members learns it from its first.
        """
        if job.spec is not None and job.cpu_first and job.cpu_last:
            span = job.cpu_last[0] - job.cpu_first[0]
            if span >= MIN_CPU_SPAN_SEC:
                cores = (job.cpu_last[1] - job.cpu_first[1]) / span
                self.core.calibration.record_cores(job.spec,
                                                   cores / job.spec.eval.worker_count)
        if job.samples < MIN_CALIBRATION_SAMPLES:
            return
        in_run = [p for p in job.parts
                  if not (p.parallelism == "shared" and p.name in job.shared)]
        if job.peak_vram_mb is not None:
            self.core.calibration.record_run("vram", in_run, job.peak_vram_mb)
        if job.peak_ram_mb > 0:
            self.core.calibration.record_run("ram", in_run, job.peak_ram_mb)

    def learn_host(self, ns: SharedNodeset) -> None:
        """A host ran one nodeset alone: its measured peak is that nodeset's, exactly."""
        peak = self._host_peaks.pop(ns.key, None)
        if peak is not None:
            part = NodesetPart(ns.name, ns.key, ns.impl, ns.params, "shared", 1)
            self.core.calibration.record_nodeset("vram", part, peak)
