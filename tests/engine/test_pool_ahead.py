"""Dealing one episode ahead: a worker never waits on the run between episodes, and an
episode dealt ahead that never started is neither lost nor counted (real run subprocess)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pool_helpers import (
    kill_the_hung_worker,
    start_pids,
    starts,
    traced_walk_graph,
    walk_spec,
)
from runhelpers import episode_rows, running, wait_until

from evaltui.rundir.jsonfiles import read_json


def test_the_worker_starts_its_next_episode_while_the_run_is_stopped(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, step_sleep_ms=60)
    spec = walk_spec(tmp_path, [3] * 5, graph, worker_count=1)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: starts(trace)["walk-0001"] == 1, what="episode 1 to start")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            # Episode 1 ends while the run cannot deal: the worker goes on to episode 2,
            # dealt ahead, on its own.
            wait_until(lambda: starts(trace)["walk-0002"] == 1, timeout=10,
                       what="episode 2 to start while the run is stopped")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(timeout=60) == 0
    rows = episode_rows(run_dir)
    assert [r["episode_index"] for r in rows] == list(range(5))
    assert all(r["status"] == "ok" and r["attempts"] == 1 for r in rows)
    assert set(starts(trace).values()) == {1}


def test_a_worker_killed_with_an_episode_dealt_ahead(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, hang_once=["walk-0002"])
    spec = walk_spec(tmp_path, [3] * 5, graph, worker_count=1)
    run_dir, victim, rows = kill_the_hung_worker(spec, tmp_path / "out", trace, "walk-0002")
    assert sorted(rows) == list(range(5))
    assert rows[2]["status"] == "error" and "worker died (signal 9)" in rows[2]["error"]
    # Episode 3 sat in the dead worker's pipe: it ran once, on the fresh worker, as its
    # first attempt.
    assert rows[3]["status"] == "ok" and rows[3]["attempts"] == 1
    assert start_pids(trace, "walk-0003") != [victim] and starts(trace)["walk-0003"] == 1
    assert all(rows[i]["status"] == "ok" and rows[i]["attempts"] == 1 for i in (0, 1, 4))


@pytest.mark.parametrize("workers", [1, 2])
def test_cancel_records_no_episode_that_never_started(tmp_path: Path, workers: int) -> None:
    trace, graph = traced_walk_graph(tmp_path, step_sleep_ms=40)
    spec = walk_spec(tmp_path, [10] * 12, graph, worker_count=workers)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: sum(starts(trace).values()) >= workers + 1,
                   what="episodes in flight")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=20) == 3
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    started = {int(eid.split("-")[1]) for eid in starts(trace)}
    # Every episode that started has its row (ok, or cancelled mid-way); the ones dealt
    # ahead and never started have none (a resume runs them as first attempts).
    assert set(rows) == started and len(started) < 12
    cancelled = [i for i, r in rows.items() if r["status"] == "cancelled"]
    assert 1 <= len(cancelled) <= workers
    assert all(r["attempts"] == 1 for r in rows.values())
    assert read_json(run_dir / "summary.json")["episodes_finished"] == len(rows)
