"""Parts of the soak test: backends as subprocesses, a process tracker, the jobs.

Everything is real: ``evaltui serve`` processes on one outputs root and state dir, BabyAI
episodes in worker processes, a fake GPU the runs charge through the product's own code.
Processes are ended by PID (SIGKILL is what the test is about), never by name.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from evaltui.api.models import API_PREFIX
from evaltui.contract.pidref import PidRef
from evaltui.graphs import builtin_graph_path
from evaltui.rundir.layout import runs_root

TERMINAL = {"done", "failed", "cancelled", "aborted"}


def job_spec(i: int, rng: Any, episodes: int) -> dict[str, Any]:
    """Every third job the numpy model (a shared nodeset the scheduler hosts), else the
    expert bot; a distinct sim latency per job keeps each uncalibrated, so it reserves its
    declared 2-8 GiB of the fake GPU and jobs contend for it."""
    graph = json.loads(builtin_graph_path("model" if i % 3 == 2 else "bot").read_text())
    return {"graph": graph,
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": episodes,
                     "worker_count": 2, "selectors": {"env.sim_latency_ms": 20 + i / 100}},
            "scheduling": {"marginal_vram_mb": rng.randint(2048, 8192), "priority": 0}}


class Backends:
    """``evaltui serve`` on fixed ports, killed (SIGKILL) and restarted at will."""

    def __init__(self, popen: Callable[..., subprocess.Popen[Any]], ports: list[int],
                 outputs: Path, env: dict[str, str], logs: Path) -> None:
        self.popen, self.ports, self.outputs, self.env, self.logs = popen, ports, outputs, env, logs
        self.procs: list[subprocess.Popen[Any] | None] = [None] * len(ports)
        self.refs: list[PidRef] = []
        """Every backend process ever started (for the orphan check)."""
        self.token = ""

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def start(self, i: int) -> None:
        with open(self.logs / f"backend{i}.log", "ab") as log:
            proc = self.popen([sys.executable, "-m", "evaltui.cli", "serve", "--port",
                               str(self.ports[i]), "--outputs", str(self.outputs)],
                              env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.procs[i] = proc
        self.refs.append(PidRef.of(proc.pid))
        deadline = time.monotonic() + 60
        while not self._healthy(i):
            assert proc.poll() is None, f"backend {i} exited: {proc.returncode}"
            assert time.monotonic() < deadline, f"backend {i} never came up"
            time.sleep(0.1)
        self.token = (Path(self.env["EVALTUI_STATE_DIR"]) / "token").read_text().strip()

    def _healthy(self, i: int) -> bool:
        try:
            return httpx.get(f"{self.url(i)}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def alive(self) -> list[int]:
        return [i for i, p in enumerate(self.procs) if p is not None and p.poll() is None]

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        os.kill(proc.pid, signal.SIGKILL)  # the backend alone: its runs have their sessions
        proc.wait()
        self.procs[i] = None

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
        for i, proc in enumerate(self.procs):
            if proc is not None:
                proc.wait(timeout=60)
                self.procs[i] = None

    def call(self, method: str, path: str, body: Any = None, prefer: int = 0
             ) -> httpx.Response:
        """The request on the first live backend that answers, from ``prefer`` on."""
        last: Exception | None = None
        alive = self.alive()
        for i in sorted(alive, key=lambda i: (i - prefer) % len(self.ports)):
            try:
                return httpx.request(method, f"{self.url(i)}{API_PREFIX}{path}", json=body,
                                     timeout=30,
                                     headers={"Authorization": f"Bearer {self.token}"})
            except httpx.HTTPError as exc:
                last = exc
        raise AssertionError(f"no backend answered {method} {path}: {last}")


class Tracker(threading.Thread):
    """Samples every process the soak makes (runs, their workers, nodeset hosts) by PID
    and create time, so the end can check that none of them outlived the test."""

    def __init__(self, outputs: Path, state: Path, interval: float = 0.1) -> None:
        super().__init__(name="soak-tracker", daemon=True)
        self.runs, self.hosts = runs_root(outputs), state / "shared" / "hosts"
        self.interval = interval
        self.seen: dict[PidRef, str] = {}
        self.live_runs: dict[str, PidRef] = {}
        self.live_workers: list[PidRef] = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)
        self.sample()

    def sample(self) -> None:
        runs: dict[str, PidRef] = {}
        workers: list[PidRef] = []
        found: dict[PidRef, str] = {}
        for run_dir in self.runs.iterdir() if self.runs.is_dir() else ():
            ref = _ref_of(run_dir / "scheduler.json", "pid", "pid_create_time")
            if ref is None:
                continue
            found[ref] = "run"
            if ref.alive():
                runs[run_dir.name] = ref
                for child in _descendants(ref.pid):
                    found[child[0]] = "worker"
                    if child[1]:  # a leaf: a worker rather than the zygote
                        workers.append(child[0])
        for path in self.hosts.glob("*.json") if self.hosts.is_dir() else ():
            ref = _ref_of(path, "pid", "pid_create_time")
            if ref is not None:
                found[ref] = "host"
        with self._lock:
            self.seen.update(found)
            self.live_runs, self.live_workers = runs, workers

    def survivors(self) -> dict[str, list[int]]:
        with self._lock:
            alive = [(ref, kind) for ref, kind in self.seen.items() if ref.alive()]
        out: dict[str, list[int]] = {}
        for ref, kind in alive:
            out.setdefault(kind, []).append(ref.pid)
        return out


def _ref_of(path: Path, pid_key: str, ctime_key: str) -> PidRef | None:
    try:
        data = json.loads(path.read_text())
        pid, ctime = data.get(pid_key), data.get(ctime_key)
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(pid, int) and isinstance(ctime, int | float):
        return PidRef(pid, float(ctime))
    return None


def _descendants(pid: int) -> list[tuple[PidRef, bool]]:
    """(process, is a leaf) for every descendant of ``pid``."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for child in children:
        try:
            out.append((PidRef(child.pid, child.create_time()), not child.children()))
        except psutil.Error:
            continue
    return out
