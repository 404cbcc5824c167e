"""The Slurm executor on the test cluster, beyond the conformance suite
(tests/executors): the built-in bot's rows are the local pool's with the workers on both
nodes, nothing of the run is left on either node, and a run outside an allocation says
so in one line."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from pool_helpers import start_pids, starts, walk_graph, walk_spec  # noqa: E402
from runhelpers import (  # noqa: E402
    builtin_graph,
    comparable,
    episode_rows,
    run_to_end,
    running,
)
from slurmcluster import SlurmCluster, _cmdline  # noqa: E402
from waiting import wait_until  # noqa: E402

from evaltui.rundir.jsonfiles import read_json  # noqa: E402
from evaltui.slurm.commands import missing_commands  # noqa: E402


def run_leftovers(cluster: SlurmCluster) -> list[str]:
    """Command lines of the processes of the cluster's jobs still alive (the daemons and
    their own children, slurmctld's slurmscriptd, aside)."""
    daemons = {p.pid for p in cluster.procs.values()}
    left = []
    for pid in cluster.leftovers():
        try:
            if pid in daemons or psutil.Process(pid).ppid() in daemons:
                continue
        except psutil.NoSuchProcess:
            continue
        left.append(_cmdline(pid))
    return left


def bot_spec(tmp_path: Path, **eval_fields: object) -> dict[str, object]:
    return {"graph": builtin_graph("bot"), "active_workspace_dir": str(tmp_path),
            "eval": {"dataset": "babyai", "split": "GoToLocal", "episode_count": 6,
                     "worker_count": 3, **eval_fields}}


@pytest.mark.slurm
def test_bot_rows_are_the_local_pools_with_workers_on_both_nodes(
        slurm_session: SlurmCluster, slurm_allocation: str, tmp_path: Path) -> None:
    local = run_to_end(bot_spec(tmp_path), tmp_path / "local")
    slurm = run_to_end(bot_spec(tmp_path, executor="slurm"), tmp_path / "slurm")
    rows_local, rows_slurm = episode_rows(local), episode_rows(slurm)
    assert [r["episode_index"] for r in rows_slurm] == list(range(6))
    assert [comparable(r) | {"worker_count": 0} for r in rows_slurm] == \
        [comparable(r) | {"worker_count": 0} for r in rows_local]
    assert {r["node"] for r in rows_local} == {None}
    assert read_json(slurm / "summary.json")["metrics"] == \
        read_json(local / "summary.json")["metrics"]
    # the run's workers are on both nodes (the allocation has two tasks on each); the
    # bot's episodes are too quick for that to be sure (under load one worker, started
    # first, can run all six before the others dial in), so a walk whose every episode
    # waits until all three workers have started one shows it; a row's node is the node
    # of the worker that ran it
    trace = tmp_path / "trace"
    trace.mkdir()
    walk = run_to_end(walk_spec(tmp_path, [3] * 6, walk_graph(
        {"trace_dir": str(trace), "together": 3}), worker_count=3, executor="slurm"),
        tmp_path / "walk")
    rows_slurm = episode_rows(walk)
    node_of = dict(re.findall(r"worker (\d+) is step \S+, pid \d+ on node (\w+)",
                              (walk / "run.log").read_text()))
    assert set(node_of.values()) == {"n1", "n2"}
    assert all(r["node"] == node_of[str(r["worker_id"])] for r in rows_slurm)
    wait_until(lambda: not run_leftovers(slurm_session), timeout=15,
               what="no process of the run left on either node")


def test_a_slurm_run_outside_an_allocation_fails_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if missing := missing_commands():
        pytest.skip(f"needs Slurm's client commands: {', '.join(missing)} not found")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    run_dir = run_to_end(bot_spec(tmp_path, executor="slurm"), tmp_path / "out")
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "failed"
    assert summary["error"] == (
        "eval.executor slurm: this run is not inside a Slurm allocation (SLURM_JOB_ID is "
        "not set): start it with `evaltui eval --executor slurm` on a login node, or "
        "inside sbatch/salloc")
    assert episode_rows(run_dir) == []


@pytest.mark.slurm
def test_a_lost_nodes_episodes_are_retried_on_the_other_node(
        slurm_session: SlurmCluster, slurm_allocation: str, tmp_path: Path) -> None:
    """n2's slurmd and every process of its steps killed mid-run (``lose_node``): the
    episodes its workers ran go again on n1, as node losses (no error rows), and the run
    completes."""
    trace = tmp_path / "trace"
    trace.mkdir()
    graph = walk_graph({"trace_dir": str(trace), "step_sleep_ms": 40})
    spec = walk_spec(tmp_path, [30] * 8, graph, worker_count=4, executor="slurm")
    try:
        with running(spec, tmp_path / "out") as (run_dir, proc):
            def busy_on_n2() -> bool:
                log = (run_dir / "run.log").read_text() if (run_dir / "run.log").exists() else ""
                pids = set(re.findall(r"pid (\d+) on node n2", log))
                return bool(pids) and any(str(p) in pids for e in starts(trace)
                                          for p in start_pids(trace, e))
            wait_until(busy_on_n2, timeout=60, what="an episode running on n2")
            slurm_session.lose_node("n2")
            assert proc.wait(timeout=120) == 0
        rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
        assert sorted(rows) == list(range(8))
        assert all(r["status"] == "ok" for r in rows.values())
        retried = [r for r in rows.values() if r["attempts"] > 1]
        assert retried and all(r["node"] == "n1" for r in retried)
        assert "Node failure on n2" in (run_dir / "run.log").read_text()
    finally:
        if "n2" not in slurm_session.procs:
            slurm_session.start_node("n2")
        slurm_session.wait_nodes("idle", nodes=("n2",), timeout=30)  # n1: still allocated
