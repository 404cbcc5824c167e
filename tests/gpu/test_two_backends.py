"""Two ``evaltui serve`` backends on one outputs root and state dir share one real GPU: their
jobs' estimates sum to more than its free memory, each job really allocates most of its
estimate, and neither the ledger nor NVML may ever show more in use than was free."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from gpuhelpers import SLACK_MB, GpuUnderTest, holding_spec, read_gpu, record, session_of
from proctools import kill_group, kill_runs

from evaltui.api.auth import load_or_create_token
from evaltui.api.client import ApiClient
from evaltui.contract.states import RunState
from evaltui.scheduler.admission.ledger import Ledger

pytestmark = pytest.mark.gpu

JOBS_PER_BACKEND = 3
SHARE = 0.4
"""Each job's estimate, as a share of the GPU's free memory: two fit at once, three don't."""


@dataclass
class Sample:
    reserved_mb: int
    reservations: int
    scheduler_pids: set[int]
    run_sessions_used_mb: int


@pytest.fixture
def backends(isolated_dirs: dict[str, Path], gpu: GpuUnderTest) -> Iterator[list[ApiClient]]:
    """Two ``evaltui serve`` processes on one outputs root (their own sessions; their
    groups, and every run, are killed at teardown)."""
    outputs = isolated_dirs["outputs"]
    procs: list[subprocess.Popen[str]] = []
    clients: list[ApiClient] = []
    try:
        for _ in range(2):
            proc = subprocess.Popen(
                [sys.executable, "-m", "evaltui.cli", "serve", "--port", "0", "--outputs",
                 str(outputs)], stdout=subprocess.PIPE, text=True, env=dict(os.environ),
                start_new_session=True)
            procs.append(proc)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "listening on " in line, f"serve said {line!r} (exit {proc.poll()})"
            url = line.split("listening on ", 1)[1].split()[0]
            clients.append(ApiClient(url, load_or_create_token(None)))
        yield clients
    finally:
        for client in clients:
            client.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        kill_runs(outputs)


def test_two_backends_never_overcommit_the_gpu(backends: list[ApiClient], gpu: GpuUnderTest,
                                               dataset: Path, isolated_dirs: dict[str, Path]
                                               ) -> None:
    free0 = read_gpu(gpu.index).free_mb
    estimate = int(free0 * SHARE)
    alloc = estimate - gpu.context_mb - SLACK_MB  # what each run really holds, most of it
    if alloc < 64:
        pytest.skip(f"GPU{gpu.index} has {free0} MiB free: too little for this test")
    ledger = Ledger()
    runs: dict[str, int] = {}  # run id -> backend
    samples: list[Sample] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            entries = [r for r in ledger.entries() if r.gpu == gpu.index]
            reading = read_gpu(gpu.index)
            leaders = _run_pids(isolated_dirs["outputs"], runs)
            used = sum(p.used_mb for p in reading.processes or ()
                       if session_of(p.pid) in leaders)
            samples.append(Sample(sum(r.vram_mb for r in entries), len(entries),
                                  {r.scheduler_pid for r in entries}, used))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for i in range(JOBS_PER_BACKEND):
            for b, client in enumerate(backends):
                ref = client.submit(holding_spec(
                    dataset, placement="inline", vram_mb=alloc, episodes=6, sleep_sec=0.25,
                    marginal_vram_mb=estimate, tag=f"b{b}-{i}"))  # never calibrated: declared
                runs[ref.run_id] = b
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            states = {r: backends[b].get_run(r).state for r, b in runs.items()}
            if all(s.terminal for s in states.values()):
                break
            time.sleep(0.5)
    finally:
        stop.set()
        sampler.join()
    # A run that got less than it was promised dies of CUDA_ERROR_OUT_OF_MEMORY.
    assert set(states.values()) == {RunState.DONE}, states
    assert len(runs) * estimate > free0  # the GPU really was contended
    worst = max(samples, key=lambda s: s.reserved_mb)
    assert worst.reserved_mb <= free0 + SLACK_MB, f"reserved {worst} of {free0} MiB free"
    assert max(s.reservations for s in samples) == 2  # two at once, never three
    used = max(s.run_sessions_used_mb for s in samples)
    assert 2 * alloc <= used <= free0 + SLACK_MB, f"runs used {used} MiB of {free0} MiB free"
    admitted_by = set().union(*(s.scheduler_pids for s in samples))
    assert len(admitted_by) == 2, f"admissions by {admitted_by}: both backends must admit"


def _run_pids(outputs: Path, runs: dict[str, int]) -> set[int]:
    pids = set()
    for run_id in list(runs):
        try:
            pid = record(outputs, run_id).get("pid")
        except (OSError, ValueError):
            continue
        if isinstance(pid, int):
            pids.add(pid)
    return pids
