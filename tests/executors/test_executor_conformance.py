"""What every executor does the same, through the real run subprocess (docs/pool.md,
"Executors"): the rows of K = 1, a worker SIGKILLed mid-episode, a hung step, cancel, a
worker that cannot start, and the episodes behind a dead worker."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psutil
from executor_params import Executor
from pool_helpers import (
    hung_worker,
    kill_the_hung_worker,
    start_pids,
    starts,
    traced_walk_graph,
    walk_spec,
)
from runhelpers import comparable, episode_rows, run_to_end, running, wait_until

from evaltui.rundir.jsonfiles import read_json


def spec_for(executor: Executor, tmp_path: Path, lengths: list[int], graph: dict[str, Any],
             **eval_fields: Any) -> dict[str, Any]:
    return walk_spec(tmp_path, lengths, graph, **executor.eval_fields, **eval_fields)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_k_workers_give_the_rows_of_one(executor: Executor, tmp_path: Path) -> None:
    lengths = [3, 6, 1, 4, 2, 5]
    _, graph = traced_walk_graph(tmp_path)
    one = run_to_end(spec_for(executor, tmp_path, lengths, graph, worker_count=1),
                     tmp_path / "k1")
    many = run_to_end(spec_for(executor, tmp_path, lengths, graph, worker_count=3),
                      tmp_path / "k3")
    rows_1, rows_k = episode_rows(one), episode_rows(many)
    assert [r["episode_index"] for r in rows_k] == list(range(len(lengths)))
    assert [comparable(r) | {"worker_count": 0} for r in rows_1] == \
        [comparable(r) | {"worker_count": 0} for r in rows_k]
    assert all(r["status"] == "ok" and r["attempts"] == 1 for r in rows_k)
    assert {r["worker_id"] for r in rows_k} <= {0, 1, 2}
    assert read_json(many / "summary.json")["metrics"] == \
        read_json(one / "summary.json")["metrics"]


def test_a_worker_killed_mid_episode_fails_that_attempt_only(executor: Executor,
                                                             tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, hang_once=["walk-0001"])
    spec = spec_for(executor, tmp_path, [3] * 4, graph, worker_count=2, max_episode_retries=1)
    run_dir, victim, rows = kill_the_hung_worker(spec, tmp_path / "out", trace, "walk-0001",
                                                 timeout=90)
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[1]["status"] == "ok" and rows[1]["attempts"] == 2
    assert all(r["status"] == "ok" and r["attempts"] == 1 for i, r in rows.items() if i != 1)
    pids = start_pids(trace, "walk-0001")
    assert len(pids) == 2 and pids[0] == victim and pids[1] != victim
    assert read_json(run_dir / "summary.json")["counts_by_status"] == {"ok": 4}


def test_the_episodes_behind_a_dead_worker_run_once(executor: Executor,
                                                    tmp_path: Path) -> None:
    """One worker, so the next episode may sit dealt ahead in the one that dies."""
    trace, graph = traced_walk_graph(tmp_path, hang_once=["walk-0002"])
    spec = spec_for(executor, tmp_path, [3] * 5, graph, worker_count=1)
    run_dir, victim, rows = kill_the_hung_worker(spec, tmp_path / "out", trace, "walk-0002",
                                                 timeout=90)
    assert sorted(rows) == list(range(5))
    assert rows[2]["status"] == "error" and rows[2]["error"].startswith("worker died (")
    assert all(rows[i]["status"] == "ok" and rows[i]["attempts"] == 1 for i in (0, 1, 3, 4))
    assert start_pids(trace, "walk-0003") != [victim] and starts(trace)["walk-0003"] == 1
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done" and summary["counts_by_status"] == {"ok": 4, "error": 1}


def test_a_hung_step_is_a_timeout_and_the_run_goes_on(executor: Executor,
                                                      tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, hang_once=["walk-0001"])
    spec = spec_for(executor, tmp_path, [3] * 3, graph, worker_count=1,
                    per_step_budget_sec=0.3)
    run_dir = run_to_end(spec, tmp_path / "out", timeout=90)
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert rows[1]["status"] == "timeout" and "a node is blocking" in rows[1]["error"]
    assert f"(pid {hung_worker(trace, 'walk-0001')}) was killed" in rows[1]["error"]
    assert rows[0]["status"] == rows[2]["status"] == "ok"
    assert read_json(run_dir / "summary.json")["status"] == "done"


def test_cancel_ends_the_busy_episodes_and_the_workers(executor: Executor,
                                                       tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, step_sleep_ms=50)
    spec = spec_for(executor, tmp_path, [20] * 8, graph, worker_count=2)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: len(starts(trace)) >= 2, timeout=60, what="two episodes running")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 3
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "cancelled"
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    started = {int(eid.split("-")[1]) for eid in starts(trace)}
    assert set(rows) == started and len(started) < 8  # nothing recorded that never started
    statuses = [r["status"] for r in rows.values()]
    assert set(statuses) <= {"ok", "cancelled"} and 1 <= statuses.count("cancelled") <= 2
    workers = {int(p.name.split(".")[2]) for p in trace.glob("start.*")}
    wait_until(lambda: all(gone(pid) for pid in workers), timeout=15,
               what="the run's workers to end")


def test_a_worker_that_cannot_start_fails_the_run(executor: Executor,
                                                  tmp_path: Path) -> None:
    _, graph = traced_walk_graph(tmp_path, init_error="no simulator licence")
    spec = spec_for(executor, tmp_path, [3] * 3, graph, worker_count=2)
    run_dir = run_to_end(spec, tmp_path / "out", timeout=90)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "failed"
    assert "workers cannot start" in summary["error"]
    assert "no simulator licence" in summary["error"]
    assert episode_rows(run_dir) == []
    assert (run_dir / "_DONE").exists()
