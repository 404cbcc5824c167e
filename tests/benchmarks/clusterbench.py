"""Timing parts for test_bench_cluster.py: a ClusterProbe that times its Ray round trips,
a spawner of ``sleep`` runs, timed ticks, and the admission decision alone."""

from __future__ import annotations

import dataclasses
import os
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.scheduler.admission.decision import decide
from evaltui.scheduler.cluster.probe import ClusterProbe
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.scheduler.ticking import queue_order

HOLD = 'sleep "$1"\nprintf \'{"status": "done"}\' > summary.json\n'
PARTS = ("probe read", "ledger sync", "ledger reserve", "spawn")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line(label: str, ms: list[float]) -> str:
    return (f"  {label:36s} median {statistics.median(ms):7.2f} ms   p95 "
            f"{pct(ms, 0.95):7.2f} ms   max {max(ms):7.2f} ms")


class TimedProbe(ClusterProbe):
    """The real probe; the seconds spent in each of its Ray round trips are added up in
    ``spent`` (cleared before each timed tick)."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.spent: Counter[str] = Counter()

    def read(self) -> Any:
        t = time.perf_counter()
        try:
            return super().read()
        finally:
            self.spent["probe read"] += time.perf_counter() - t

    def sync(self, live: set[str]) -> None:
        t = time.perf_counter()
        try:
            super().sync(live)
        finally:
            self.spent["ledger sync"] += time.perf_counter() - t

    def reserve(self, *args: Any) -> str | None:
        t = time.perf_counter()
        try:
            return super().reserve(*args)
        finally:
            self.spent["ledger reserve"] += time.perf_counter() - t


class Holders:
    """Spawner: each run is a shell that sleeps ``holds[run_id]`` seconds (600 if not
    given), then writes a done summary; its spawn time goes to ``probe.spent``."""

    def __init__(self, probe: TimedProbe) -> None:
        self.probe = probe
        self.holds: dict[str, float] = {}
        self.procs: list[subprocess.Popen[bytes]] = []

    def __call__(self, run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        t = time.perf_counter()
        proc = subprocess.Popen(["sh", "-c", HOLD, "sh", str(self.holds.get(run_dir.name, 600))],
                                cwd=run_dir, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        self.procs.append(proc)
        self.probe.spent["spawn"] += time.perf_counter() - t
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def new_scheduler(outputs: Path, address: str) -> tuple[JobScheduler, TimedProbe, Holders]:
    """A scheduler whose loop is not started (the benchmark calls ``tick``), with the
    probe interval of ``evaltui serve`` (1 s)."""
    probe = TimedProbe(address)
    holders = Holders(probe)
    sched = JobScheduler(outputs, gpu_probe=probe, spawner=holders, host_shared=False,
                         tick_interval=3600.0, probe_interval=1.0)
    return sched, probe, holders


def timed_ticks(sched: JobScheduler, probe: TimedProbe, holders: Holders, n: int,
                pause: float = 0.0) -> list[dict[str, float]]:
    """``n`` ticks: wall ms, ms in each Ray round trip and in spawns, runs admitted."""
    out = []
    for _ in range(n):
        probe.spent.clear()
        before = len(holders.procs)
        t = time.perf_counter()
        sched.tick()
        wall = (time.perf_counter() - t) * 1e3
        out.append({"tick": wall, "admitted": len(holders.procs) - before,
                    **{k: v * 1e3 for k, v in probe.spent.items()}})
        if pause:
            time.sleep(pause)
    return out


def report(title: str, ticks: list[dict[str, float]]) -> None:
    print(f"\n{title}, {len(ticks)} ticks:")
    print(line("tick() wall", [t["tick"] for t in ticks]))
    for part in PARTS:
        values = [t.get(part, 0.0) for t in ticks]
        if any(values):
            print(line(f"  of which {part}", values))
    print(line("  the rest (reap, order, decide, ..)",
               [t["tick"] - sum(t.get(p, 0.0) for p in PARTS) for t in ticks]))


def decision_ms(sched: JobScheduler, n: int = 30) -> dict[str, list[float]]:
    """ms of ``admission.decide`` alone on the candidates and views the tick builds; of
    the same with the views keyed 0..7 as on one machine (what NodeGpu keys cost); and
    of the tick's ``queue_order`` of the same queue. Through the scheduler's own parts:
    there is no public way to get at its candidates."""
    core, ticker, sampler = sched._core, sched._ticker, sched._sampler
    acct = sampler.account(core.ledger.entries())
    with core.lock:
        jobs = [j for j in core.queue if j.loading is None]
        version = core.estimate_version()
        candidates = [ticker._candidate(j, version) for j in queue_order(jobs, [])]
    assert len(candidates) >= 500 and acct.gpus is not None and len(acct.gpus) == 8
    int_keyed = [dataclasses.replace(g, index=k) for k, g in enumerate(acct.gpus)]
    out: dict[str, list[float]] = {}

    def timed(label: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        result = fn(*args, **kwargs)
        out.setdefault(label, []).append((time.perf_counter() - t) * 1e3)
        return result

    for _ in range(n):
        with core.lock:
            timed("queue_order alone", queue_order,
                  [j for j in core.queue if j.loading is None], [])
        timed("admission.decide alone", decide, candidates, acct.gpus, acct.host,
              now=time.time(), claim_after_sec=core.claim_after_sec)
        timed("  same, GPUs keyed 0..7 (one machine)", decide, candidates, int_keyed,
              acct.host, now=time.time(), claim_after_sec=core.claim_after_sec)
    return out


def round_trips_ms(probe: ClusterProbe, n: int = 30) -> dict[str, list[float]]:
    """ms of the Ray calls a probe read is made of, each alone: ``ray.nodes()`` (a GCS
    query) and one call of a NodeProbe actor; and of a bare call of the ledger actor."""
    import ray

    actor = next(iter(probe._actors.values()))
    out: dict[str, list[float]] = {}
    for _ in range(n):
        for label, call in (("ray.nodes()", ray.nodes),
                            ("a NodeProbe read, one node", lambda: ray.get(actor.read.remote())),
                            ("a ledger call (entries)",
                             lambda: ray.get(probe.ledger.entries.remote()))):
            t = time.perf_counter()
            call()
            out.setdefault(label, []).append((time.perf_counter() - t) * 1e3)
    return out
