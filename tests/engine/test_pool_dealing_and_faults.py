"""EnvWorkerPool through the real run subprocess: determinism, dealing, retries, restarts."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from pool_helpers import (
    hung_worker,
    kill_the_hung_worker,
    start_pids,
    starts,
    traced_walk_graph,
    walk_graph,
    walk_spec,
)
from runhelpers import (
    builtin_graph,
    comparable,
    episode_rows,
    finished_count,
    run_to_end,
    running,
    wait_until,
)

from evaltui.engine.hosting.channel import host_secret
from evaltui.engine.hosting.host import NodesetServer
from evaltui.procs.spawn import spawn_run
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.logread import iter_log


@pytest.mark.parametrize("graph,workers", [("bot", 4), ("model", 3)])
def test_one_worker_and_k_workers_give_identical_rows(tmp_path: Path, graph: str,
                                                      workers: int) -> None:
    spec = {"graph": builtin_graph(graph, env__frame_stride=4),
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": 16}}
    one = run_to_end({**spec, "eval": {**spec["eval"], "worker_count": 1}}, tmp_path / "k1")
    many = run_to_end({**spec, "eval": {**spec["eval"], "worker_count": workers}},
                      tmp_path / "kn")
    rows_1, rows_k = episode_rows(one), episode_rows(many)
    assert [r["episode_index"] for r in rows_k] == list(range(16))
    # Rows carry the run's worker_count; everything else but timings and worker ids agrees.
    assert [comparable(r) | {"worker_count": 0} for r in rows_1] == \
        [comparable(r) | {"worker_count": 0} for r in rows_k]
    assert {r["worker_id"] for r in rows_1} == {0}
    assert {r["worker_id"] for r in rows_k} <= set(range(workers))
    assert len({r["worker_id"] for r in rows_k}) > 1  # the work was actually shared
    assert all(r["status"] == "ok" and r["attempts"] == 1 for r in rows_k)
    summary = read_json(many / "summary.json")
    assert summary["status"] == "done" and summary["worker_count"] == workers
    assert summary["metrics"] == read_json(one / "summary.json")["metrics"]
    for row in rows_k:  # each episode ran once: one episode_start in its own log
        log = [rec for _, rec in iter_log(many / "episodes" / f"ep{row['episode_index']:04d}"
                                          / "log.jsonl")]
        assert [r["event"] for r in log].count("episode_start") == 1
        assert log[-1]["event"] == "episode_end"
        assert {r["step"] for r in log if r["event"] == "fire"} == set(
            range(1, row["step_count"] + 1))
    if graph == "model":
        urls = read_json(many / "shared_urls.json")
        assert urls["policy"].startswith("evaltui+unix://")


def test_a_long_episode_does_not_hold_up_the_others(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, slow={"walk-0000": 2.0})
    spec = walk_spec(tmp_path, [2] * 12, graph, worker_count=2)
    rows = {r["episode_index"]: r for r in episode_rows(run_to_end(spec, tmp_path / "out"))}
    slow_worker = rows[0]["worker_id"]
    others = Counter(r["worker_id"] for i, r in rows.items() if i)
    # While one worker sat in episode 0, the other took (nearly) everything else.
    assert others[1 - slow_worker] >= 9, others
    assert set(starts(trace).values()) == {1} and len(starts(trace)) == 12


def test_worker_killed_mid_episode_is_retried_on_a_fresh_worker(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, hang_once=["walk-0002"])
    spec = walk_spec(tmp_path, [3] * 8, graph, worker_count=2, max_episode_retries=1)
    run_dir, victim, rows = kill_the_hung_worker(spec, tmp_path / "out", trace, "walk-0002")
    assert sorted(rows) == list(range(8))
    assert rows[2]["status"] == "ok" and rows[2]["attempts"] == 2
    assert all(r["status"] == "ok" and r["attempts"] == 1 for i, r in rows.items() if i != 2)
    pids = start_pids(trace, "walk-0002")
    assert len(pids) == 2 and pids[0] == victim and pids[1] != victim
    assert all(n == 1 for eid, n in starts(trace).items() if eid != "walk-0002")
    assert read_json(run_dir / "summary.json")["counts_by_status"] == {"ok": 8}


def test_worker_killed_without_retries_records_the_death(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, hang_once=["walk-0001"])
    spec = walk_spec(tmp_path, [3] * 6, graph, worker_count=2)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        os.kill(hung_worker(trace, "walk-0001"), signal.SIGKILL)
        assert proc.wait(timeout=60) == 0
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert rows[1]["status"] == "error" and rows[1]["attempts"] == 1
    assert "worker died (signal 9)" in rows[1]["error"]
    assert all(r["status"] == "ok" for i, r in rows.items() if i != 1)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done" and summary["counts_by_status"] == {"ok": 5, "error": 1}


def test_after_a_node_exception_the_worker_is_replaced(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, raise_on=["walk-0003"])
    spec = walk_spec(tmp_path, [3] * 7, graph, worker_count=1)
    rows = {r["episode_index"]: r for r in episode_rows(run_to_end(spec, tmp_path / "out"))}
    assert rows[3]["status"] == "error" and "RuntimeError: boom in walk-0003" in rows[3]["error"]
    assert all(rows[i]["status"] == "ok" for i in (0, 1, 2, 4, 5, 6))
    before = {start_pids(trace, f"walk-{i:04d}")[0] for i in range(4)}
    after = {start_pids(trace, f"walk-{i:04d}")[0] for i in range(4, 7)}
    assert len(before) == 1 and len(after) == 1 and before != after


def test_node_errors_are_retried_up_to_the_limit(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, raise_on=["walk-0001"])
    spec = walk_spec(tmp_path, [2] * 3, graph, worker_count=2, max_episode_retries=2)
    rows = {r["episode_index"]: r for r in episode_rows(run_to_end(spec, tmp_path / "out"))}
    assert rows[1]["status"] == "error" and rows[1]["attempts"] == 3
    assert starts(trace)["walk-0001"] == 3 and starts(trace)["walk-0000"] == 1


def test_a_killed_host_is_restarted_and_the_run_completes(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    graph = walk_graph({"step_sleep_ms": 20}, shared_policy=True,
                       policy={"trace_dir": str(trace)})
    spec = walk_spec(tmp_path, [5] * 16, graph, worker_count=2, max_episode_retries=2)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        wait_until(lambda: finished_count(run_dir) >= 3, what="a few episodes")
        hosts = list(trace.glob("host.*"))
        assert len(hosts) == 1
        os.kill(int(hosts[0].name.split(".")[1]), signal.SIGKILL)
        assert proc.wait(timeout=60) == 0
    rows = episode_rows(run_dir)
    assert len(rows) == 16 and all(r["status"] == "ok" for r in rows)
    assert len(list(trace.glob("host.*"))) == 2  # a fresh host took over
    assert read_json(run_dir / "summary.json")["status"] == "done"


def test_a_shared_nodeset_at_a_given_url_is_used_not_restarted(tmp_path: Path) -> None:
    from faulty_nodesets import BatchedStepPolicy

    graph = walk_graph(shared_policy=True)
    spec = walk_spec(tmp_path, [3] * 6, graph, worker_count=2)
    model = BatchedStepPolicy()
    with NodesetServer(model, "evaltui+tcp://127.0.0.1:0", host_secret(create=True)) as host:
        spec["_shared_urls"] = {"policy": host.url}
        run_dir = run_to_end(spec, tmp_path / "out")
        assert host.stats()["requests"] == 18
    assert all(r["status"] == "ok" for r in episode_rows(run_dir))
    assert read_json(run_dir / "shared_urls.json") == {"policy": host.url}


def test_resume_ignores_the_hosts_of_an_earlier_attempt(tmp_path: Path) -> None:
    trace, graph = traced_walk_graph(tmp_path, shared_policy=True, hang_once=["walk-0002"])
    spec = walk_spec(tmp_path, [2] * 4, graph, worker_count=2)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        os.kill(hung_worker(trace, "walk-0002"), signal.SIGKILL)
        assert proc.wait(timeout=60) == 0
    first_url = read_json(run_dir / "shared_urls.json")["policy"]
    assert read_json(run_dir / "episodes" / "ep0002" / "episode.json")["status"] == "error"
    (run_dir / "_DONE").unlink()
    proc = spawn_run(run_dir)  # resume into the same dir: only episode 2 runs again
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    row = read_json(run_dir / "episodes" / "ep0002" / "episode.json")
    assert row["status"] == "ok" and row["attempts"] == 2
    assert starts(trace)["walk-0000"] == 1
    assert read_json(run_dir / "shared_urls.json")["policy"] != first_url
