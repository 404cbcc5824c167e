"""Signals and the run's worker/host subprocesses: nothing outlives the run."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from pool_helpers import (
    alive,
    engine_children,
    traced_walk_graph,
    walk_graph,
    walk_spec,
)
from runhelpers import episode_rows, running, wait_until

from evaltui.contract.pidref import PidRef
from evaltui.procs.groups import terminate_group
from evaltui.rundir.jsonfiles import read_json


def slow_spec(tmp_path: Path, **env: object) -> dict:
    graph = walk_graph({"step_sleep_ms": 40, **env}, shared_policy=True)
    return walk_spec(tmp_path, [30] * 12, graph, worker_count=3)


def wait_for_children(pid: int, count: int) -> list[psutil.Process]:
    wait_until(lambda: len(engine_children(pid)) >= count, timeout=60,
               what=f"{count} worker/host subprocesses")
    return engine_children(pid)


def test_run_sigkilled_takes_its_workers_and_host_along(tmp_path: Path) -> None:
    with running(slow_spec(tmp_path), tmp_path / "out") as (run_dir, proc):
        children = wait_for_children(proc.pid, 4)  # 3 workers + the policy host
        wait_until(lambda: (run_dir / "summary.json").exists(), what="the run to start")
        os.kill(proc.pid, signal.SIGKILL)  # the run alone, not its group
        proc.wait(timeout=10)
        t0 = time.monotonic()
        wait_until(lambda: not alive(children), timeout=2.0, what="workers to die (pdeathsig)")
        assert time.monotonic() - t0 < 2.0
    assert not (run_dir / "_DONE").exists()


@pytest.mark.parametrize("whole_group", [True, False])
def test_sigterm_cancels_and_leaves_no_process(tmp_path: Path, whole_group: bool) -> None:
    with running(slow_spec(tmp_path), tmp_path / "out") as (run_dir, proc):
        children = wait_for_children(proc.pid, 4)
        # A log with a record: the pool's recorder makes the next episodes' logs empty.
        wait_until(lambda: any(p.stat().st_size for p in
                               (run_dir / "episodes").glob("ep*/log.jsonl")),
                   what="episodes in flight")
        t0 = time.monotonic()
        if whole_group:
            assert terminate_group(PidRef.of(proc.pid), grace_sec=10.0)
        else:
            os.kill(proc.pid, signal.SIGTERM)  # the run must pass it on to its workers
        assert proc.wait(timeout=10) == 3
        wait_until(lambda: not alive(children), timeout=10.0 - (time.monotonic() - t0),
                   what="every worker and host to exit within the grace period")
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "cancelled" and (run_dir / "_DONE").exists()
    rows = episode_rows(run_dir)
    assert rows and all(r["status"] in ("ok", "cancelled") for r in rows)
    cancelled = [r for r in rows if r["status"] == "cancelled"]
    assert cancelled and all(r["error"].startswith("run cancelled") for r in cancelled)
    assert summary["episodes_finished"] == len(rows) < 12


def test_cancel_kills_a_worker_stuck_in_a_node_after_the_grace_period(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, hang_once=["walk-0000"])
    spec = walk_spec(tmp_path, [3] * 4, graph, worker_count=1)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        marker = trace / "hang.walk-0000"
        wait_until(lambda: marker.exists() and marker.read_text(), what="episode 0 to hang")
        stuck = psutil.Process(int(marker.read_text()))
        t0 = time.monotonic()
        assert terminate_group(PidRef.of(proc.pid), grace_sec=10.0)
        assert time.monotonic() - t0 < 10.0 and not alive([stuck])
        assert proc.wait(timeout=1) == 3
    row = read_json(run_dir / "episodes" / "ep0000" / "episode.json")
    assert row["status"] == "cancelled" and "grace period" in row["error"]
    assert read_json(run_dir / "summary.json")["status"] == "cancelled"
