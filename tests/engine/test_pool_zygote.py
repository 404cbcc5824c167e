"""Workers are forks of a zygote: the process tree, deaths and secrets (checked by PID)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from pool_helpers import alive, start_pids, starts, walk_graph, walk_spec
from runhelpers import episode_rows, running, wait_until

from evaltui.contract.spec import parse_spec
from evaltui.engine.executor.local.pool import EnvWorkerPool
from evaltui.engine.executor.local.worker import WorkerConfig
from evaltui.engine.executor.local.zygote import MAX_STARTS, WorkerZygote, ZygoteError
from evaltui.engine.graph.specchecks import check_spec
from evaltui.engine.hosting.channel import SharedEndpoint
from evaltui.rundir.jsonfiles import read_json


def started_pids(trace: Path) -> set[int]:
    """PIDs of the processes that ran an episode (each leaves a start trace)."""
    return {int(p.name.split(".")[2]) for p in trace.glob("start.*")}


def slow_walk(tmp_path: Path, trace: Path, episodes: int, workers: int,
              **eval_fields: object) -> dict:
    graph = walk_graph({"trace_dir": str(trace), "step_sleep_ms": 40})
    return walk_spec(tmp_path, [6] * episodes, graph, worker_count=workers, **eval_fields)


def test_workers_are_children_of_one_zygote_child_of_the_run(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    with running(slow_walk(tmp_path, trace, 12, 3), tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: len(started_pids(trace)) >= 3, what="three workers running")
        workers = [psutil.Process(pid) for pid in started_pids(trace)]
        zygotes = {w.ppid() for w in workers}
        assert len(zygotes) == 1, zygotes
        zygote = psutil.Process(zygotes.pop())
        assert zygote.pid != proc.pid and zygote.ppid() == proc.pid
        # A worker is a fork, not a fresh interpreter: it shares the zygote's executable
        # and command line, and it is not the run's own child.
        assert all(w.ppid() != proc.pid for w in workers)
        assert all(w.cmdline() == zygote.cmdline() for w in workers)
        assert proc.wait(timeout=60) == 0
    assert all(r["status"] == "ok" for r in episode_rows(run_dir))


def test_no_orphan_after_the_run_is_sigkilled(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    with running(slow_walk(tmp_path, trace, 12, 3), tmp_path / "out") as (_, proc):
        wait_until(lambda: len(started_pids(trace)) >= 3, what="three workers running")
        workers = [psutil.Process(pid) for pid in started_pids(trace)]
        zygote = psutil.Process(workers[0].ppid())
        os.kill(proc.pid, signal.SIGKILL)  # the run alone, not its group
        proc.wait(timeout=10)
        wait_until(lambda: not alive([zygote, *workers]), timeout=2.0,
                   what="the zygote and every worker to die with the run")


def test_a_killed_zygote_is_restarted_and_its_episodes_retried(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    spec = slow_walk(tmp_path, trace, 12, 2, max_episode_retries=1)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: len(started_pids(trace)) >= 2, what="two workers running")
        first = [psutil.Process(pid) for pid in started_pids(trace)]
        zygote = psutil.Process(first[0].ppid())
        os.kill(zygote.pid, signal.SIGKILL)
        wait_until(lambda: not alive([zygote, *first]), timeout=2.0,
                   what="the workers to die with their zygote")
        assert proc.wait(timeout=60) == 0
    rows = episode_rows(run_dir)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    retried = [r for r in rows if r["attempts"] == 2]
    assert 1 <= len(retried) <= 2  # the episodes in flight when the zygote died
    for row in retried:  # the retry ran in a worker of the new zygote
        pids = start_pids(trace, f"walk-{row['episode_index']:04d}")
        assert len(pids) == 2 and pids[1] not in {p.pid for p in first}
    assert set(starts(trace).values()) <= {1, 2}
    assert read_json(run_dir / "summary.json")["status"] == "done"


def test_without_retries_the_zygote_death_is_named_in_the_episode_error(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    with running(slow_walk(tmp_path, trace, 6, 1), tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: len(started_pids(trace)) >= 1, what="the worker running")
        worker = psutil.Process(started_pids(trace).pop())
        os.kill(worker.ppid(), signal.SIGKILL)
        assert proc.wait(timeout=60) == 0
    errors = [r for r in episode_rows(run_dir) if r["status"] == "error"]
    assert len(errors) == 1
    assert "worker died (signal 9, its zygote died: pid" in errors[0]["error"]


def _checked(tmp_path: Path):
    spec = walk_spec(tmp_path, [2] * 4, walk_graph(), worker_count=2)
    return check_spec(parse_spec(spec))


def test_a_zygote_that_keeps_dying_stops_the_pool(tmp_path: Path) -> None:
    checked = _checked(tmp_path)
    zygote = WorkerZygote().start()
    try:
        for _ in range(MAX_STARTS):
            assert zygote.wait_ready(60)
            os.kill(zygote.pid, signal.SIGKILL)  # type: ignore[arg-type]
            wait_until(lambda: not zygote.alive(), timeout=10, what="the zygote's death")
            if zygote.starts < MAX_STARTS:
                zygote.start()
        with pytest.raises(ZygoteError, match=f"died {MAX_STARTS} times"):
            zygote.fork(WorkerConfig(tmp_path, 0, checked, {}), name="worker0")
    finally:
        zygote.close()


def test_the_secret_reaches_workers_only_through_pipes(tmp_path: Path) -> None:
    checked = _checked(tmp_path)
    secret = os.urandom(32)
    # An endpoint nobody serves: the worker reports it cannot connect, after the fork.
    shared = {"policy": SharedEndpoint(f"evaltui+unix://{tmp_path}/none.sock", secret)}
    with WorkerZygote() as zygote:
        child = zygote.fork(WorkerConfig(tmp_path, 0, checked, shared), name="worker0")
        worker, parent = psutil.Process(child.pid), psutil.Process(zygote.pid)
        assert worker.ppid() == zygote.pid
        for proc in (worker, parent):
            blob = " ".join(proc.cmdline()) + " ".join(f"{k}={v}" for k, v in
                                                      proc.environ().items())
            assert secret.hex() not in blob and secret.decode("latin-1") not in blob
        child.end(grace_sec=1.0)
        assert not alive([worker])


def test_k_workers_start_together_from_a_warm_zygote(tmp_path: Path) -> None:
    checked = _checked(tmp_path)
    with WorkerZygote() as zygote:
        assert zygote.wait_ready(60)
        pool = EnvWorkerPool(lambda slot: WorkerConfig(tmp_path, slot, checked, {}), 6,
                             zygote=zygote).start()
        try:
            deadline = time.monotonic() + 30
            while len(pool.start_times) < 6 and time.monotonic() < deadline:
                for slot in pool.slots:
                    if not slot.ready and slot.child and slot.child.conn.poll(0.01):
                        pool._on_message(slot)
            workers = [psutil.Process(s.child.pid) for s in pool.slots if s.child]
            assert len(pool.start_times) == 6 and len(workers) == 6
            assert {w.ppid() for w in workers} == {zygote.pid}
            assert len(alive(workers)) == 6  # all six up at once
        finally:
            pool.close()
        assert not alive(workers)
        assert zygote.alive()  # a given zygote outlives the pool; its owner closes it
