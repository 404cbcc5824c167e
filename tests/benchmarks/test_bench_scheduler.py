"""Scheduler benchmarks: the admission tick under load, and submit-to-spawn latency.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_scheduler.py``. Numbers are printed
(targets: tick median <= 5 ms with 1,000 queued and 20 running; submit -> run subprocess
started p50 <= 250 ms on an idle machine); nothing here asserts a time.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from evaltui.contract.states import RunState
from evaltui.scheduler.scheduler import JobScheduler, default_spawner

SCHED_TESTS = Path(__file__).resolve().parents[1] / "scheduler"
if str(SCHED_TESTS) not in sys.path:
    sys.path.insert(0, str(SCHED_TESTS))

from schedhelpers import line_spec, write_dataset  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.bench
def test_tick_with_1000_queued_and_20_running(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "2x24576")
    dataset = write_dataset(tmp_path / "line.jsonl", [1, 2, 3])
    holders: list[subprocess.Popen[bytes]] = []

    def hold(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sleep", "600"], cwd=run_dir, env=dict(env),
                                start_new_session=True)
        holders.append(proc)
        return proc

    sched = JobScheduler(tmp_path / "outputs", spawner=hold, probe_interval=1.0)
    try:
        for i in range(20):
            sched.submit(line_spec(dataset, episodes=1, marginal_vram_mb=2048, sleep_sec=i))
        sched.tick()
        assert len(holders) == 20
        rng = random.Random(0)
        t0 = time.perf_counter()
        for i in range(1000):
            sched.submit(line_spec(dataset, episodes=1, priority=rng.randint(-2, 2),
                                   marginal_vram_mb=rng.randint(10240, 20480),
                                   exclusive=i % 50 == 0, sleep_sec=100 + i))
        submit_ms = (time.perf_counter() - t0) * 1e3 / 1000
        sched.tick()
        assert len(holders) == 20 and len(sched.queue()) == 1000
        timings = {}
        for label, probe_interval in (("probe cached (<= 1 s old)", 1.0),
                                      ("fresh probe every tick", 0.0)):
            sched.probe_interval = probe_interval
            samples = []
            for _ in range(300):
                t = time.perf_counter()
                sched.tick()
                samples.append((time.perf_counter() - t) * 1e3)
            timings[label] = samples
        reasons = {q.waiting_kind for q in sched.queue()}
    finally:
        for proc in holders:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print("\ntick() with 1,000 queued and 20 running (2 fake GPUs), 300 ticks each:")
    for label, samples in timings.items():
        print(f"  {label:28s} median {statistics.median(samples):6.2f} ms   "
              f"p99 {pct(samples, 0.99):6.2f} ms   max {max(samples):6.2f} ms")
    print(f"  waiting kinds seen: {sorted(reasons)}; submit() mean {submit_ms:.2f} ms")


@pytest.mark.bench
def test_submit_to_run_started_on_an_idle_machine(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "line.jsonl", [1, 2])
    spawned: dict[Path, float] = {}
    spawned_evt = threading.Event()

    def spawn(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        proc = default_spawner(run_dir, env)
        spawned[run_dir] = time.perf_counter()  # the run subprocess exists from here on
        spawned_evt.set()
        return proc

    sched = JobScheduler(tmp_path / "outputs", spawner=spawn).start()
    submit_ms, started_ms, summary_ms = [], [], []
    try:
        spec = line_spec(dataset, episodes=1)
        sched.wait(sched.submit(spec)[0], timeout=30)  # warm-up: imports, dataset cache
        for _ in range(20):
            spawned_evt.clear()
            t0 = time.perf_counter()
            run_id, _ = sched.submit(spec)
            submit_ms.append((time.perf_counter() - t0) * 1e3)
            assert spawned_evt.wait(10)
            run_dir = sched.runs_root / run_id
            started_ms.append((spawned[run_dir] - t0) * 1e3)
            while not (run_dir / "summary.json").exists():
                time.sleep(0.001)
            summary_ms.append((time.perf_counter() - t0) * 1e3)
            assert sched.wait(run_id, timeout=30) is RunState.DONE
    finally:
        sched.stop()
    print("\nsubmit -> run subprocess started, idle machine, 20 submits:")
    print(f"  submit() returns        p50 {statistics.median(submit_ms):6.1f} ms   "
          f"max {max(submit_ms):6.1f} ms")
    print(f"  run subprocess started  p50 {statistics.median(started_ms):6.1f} ms   "
          f"max {max(started_ms):6.1f} ms")
    print(f"  run wrote summary.json  p50 {statistics.median(summary_ms):6.1f} ms   "
          f"(includes the run's own Python start-up)")
