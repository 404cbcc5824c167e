"""HTTP API benchmarks: submit throughput, and ``GET /runs`` with 2,000 run dirs on disk.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_api.py``. Numbers are printed
(target: ``GET /runs`` p50 <= 50 ms with 2,000 finished runs); nothing asserts a time.
Both go through a real uvicorn on a loopback port over a real scheduler.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evaltui.api.app import make_api
from evaltui.api.auth import load_or_create_token
from evaltui.api.models import API_PREFIX
from evaltui.api.server import ApiServer
from evaltui.graphs import builtin_graph_path
from evaltui.rundir.jsonfiles import touch_done, write_json_atomic
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.scheduler import JobScheduler

RUNS = 2000
EPISODES_PER_RUN = 50


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """A scheduler (admitting nothing: the lock check holds) behind the API."""
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "1x24576")
    yield from _serve()


def _serve() -> Iterator[tuple[str, str]]:
    scheduler = JobScheduler(lock_check=lambda: "benchmark: admit nothing").start()
    token = load_or_create_token()
    server = ApiServer(make_api(scheduler, token), port=0).start()
    try:
        yield server.url + API_PREFIX, token
    finally:
        server.stop()
        scheduler.stop()


def _fill(outputs: Path) -> None:
    """2,000 finished runs as the engine leaves them (summary.json with 50 rows each)."""
    root = runs_root(outputs)
    root.mkdir(parents=True)
    graph = json.loads(builtin_graph_path("bot").read_text())  # type: ignore[union-attr]
    rows = [{"episode_index": i, "status": "ok", "metrics": {"success": 1.0, "spl": 0.9},
             "step_count": 6, "elapsed_sec": 0.01} for i in range(EPISODES_PER_RUN)]
    for n in range(RUNS):
        run = root / f"20250101_{n // 60 % 24:02d}{n % 60:02d}00"
        if n >= 1440:  # past one day of minutes: the collision suffix, as allocation does
            run = root / f"20250101_{n // 60 % 24:02d}{n % 60:02d}00_{2 + n // 1440}"
        run.mkdir()
        write_json_atomic(run / "spec.json", {"graph": graph, "eval": {"episode_count": 50},
                                              "scheduling": {}})
        write_json_atomic(run / "scheduler.json", {"state": "done", "priority": 0,
                                                   "queued_at": None, "exit_code": 0,
                                                   "pid": None, "pid_create_time": None})
        write_json_atomic(run / "summary.json", {
            "run_id": run.name, "graph_name": "babyai-bot", "dataset": "babyai",
            "split": "GoToLocal", "status": "done", "episodes_total": EPISODES_PER_RUN,
            "episodes_finished": EPISODES_PER_RUN, "metrics": {"success": 1.0},
            "episodes": rows})
        touch_done(run)


@pytest.mark.bench
def test_submit_throughput(served: tuple[str, str]) -> None:
    url, token = served
    graph = json.loads(builtin_graph_path("bot").read_text())  # type: ignore[union-attr]
    spec = {"graph": graph, "eval": {"episode_count": 5}}
    headers = {"Authorization": f"Bearer {token}"}
    def submit(count: int, times: list[float]) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            for _ in range(count):
                t0 = time.perf_counter()
                assert http.post("/runs", json=spec).status_code == 201
                times.append(time.perf_counter() - t0)  # list.append is atomic

    for clients, per_client in ((1, 200), (3, 100)):
        times: list[float] = []
        started = time.perf_counter()
        threads = [threading.Thread(target=submit, args=(per_client, times))
                   for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        total = clients * per_client
        print(f"\nsubmit via API, {clients} client(s): {total / wall:.0f} jobs/s "
              f"(p50 {pct(times, 0.5) * 1000:.1f} ms, p95 {pct(times, 0.95) * 1000:.1f} ms "
              "per submit: validation + run dir + spec/record writes)")


@pytest.mark.bench
def test_list_runs_latency_with_2000_runs(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "1x24576")
    _fill(tmp_path / "outputs")
    for url, token in _serve():
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                          timeout=60) as http:
            t0 = time.perf_counter()
            first = http.get("/runs")
            cold = time.perf_counter() - t0
            assert first.status_code == 200 and len(first.json()) == RUNS
            times = []
            for _ in range(40):
                t0 = time.perf_counter()
                answer = http.get("/runs")
                times.append(time.perf_counter() - t0)
                assert answer.status_code == 200
            page = []
            for _ in range(40):
                t0 = time.perf_counter()
                http.get("/runs", params={"limit": 50})
                page.append(time.perf_counter() - t0)
        size = len(answer.content)
        print(f"\nGET /runs with {RUNS} run dirs: first {cold * 1000:.0f} ms, then p50 "
              f"{statistics.median(times) * 1000:.1f} ms, p95 {pct(times, 0.95) * 1000:.1f} ms "
              f"({size / 1e6:.1f} MB); ?limit=50 p50 {statistics.median(page) * 1000:.1f} ms "
              "(target p50 <= 50 ms)")
