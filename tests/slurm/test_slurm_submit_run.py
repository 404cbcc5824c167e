"""``evaltui eval --executor slurm`` from the login node (here: the same machine): one
sbatch job whose batch step is the run process, followed to the end -- pending with
Slurm's reason, done with rows from both nodes, ``scancel`` read as ``cancelled`` with
nothing left on either node."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from pool_helpers import starts, walk_graph, write_dataset  # noqa: E402
from runhelpers import ENGINE_TESTS, episode_rows  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402
from test_slurm_executor import run_leftovers  # noqa: E402
from waiting import wait_until  # noqa: E402

from evaltui.contract.states import RunState  # noqa: E402
from evaltui.rundir.jsonfiles import read_json  # noqa: E402
from evaltui.rundir.status import read_run_status  # noqa: E402

pytestmark = pytest.mark.slurm


def walk_job(tmp_path: Path, lengths: list[int], **env: object) -> Path:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({
        "graph": walk_graph(dict(env)), "active_workspace_dir": str(ENGINE_TESTS),
        "eval": {"dataset": str(write_dataset(tmp_path / "walk.jsonl", lengths)),
                 "executor": "slurm"}}))
    return job


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """The eval processes a test starts, killed at its end if still there."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def evaltui_eval(started: list[subprocess.Popen[str]], tmp_path: Path, *args: str
                 ) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaltui.cli", "eval", "--outputs", str(tmp_path / "out"),
         *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "EVALTUI_SLURM_LISTEN_HOST": "127.0.0.1"})
    started.append(proc)
    proc.said = []  # type: ignore[attr-defined]  # stderr's lines so far
    threading.Thread(target=lambda: proc.said.extend(iter(proc.stderr.readline, "")),  # type: ignore[attr-defined, union-attr]
                     daemon=True).start()
    return proc


def said(proc: subprocess.Popen[str]) -> str:
    return " ".join("".join(proc.said).split())  # type: ignore[attr-defined]


def the_run_dir(tmp_path: Path, proc: subprocess.Popen[str]) -> Path:
    """The run dir eval made, once it has; AssertionError with eval's output if it ended
    without one."""
    def made() -> Path | None:
        found = list((tmp_path / "out").glob("eval_runs/*/scheduler.json"))
        if not found and proc.poll() is not None:
            raise AssertionError(f"eval exited {proc.returncode}: {proc.communicate()}")
        return found[0].parent if found else None
    return wait_until(made, timeout=30, what="the run dir")


def test_eval_submits_one_job_shows_it_pending_and_ends_done(
        slurm_cluster: SlurmCluster, tmp_path: Path,
        started: list[subprocess.Popen[str]]) -> None:
    job = walk_job(tmp_path, [3, 5, 2, 4])
    proc = evaltui_eval(started, tmp_path, str(job), "--workers", "2", "--json",
                        "--slurm-arg=--hold", "--slurm-time", "10")
    run_dir = the_run_dir(tmp_path, proc)
    job_id = wait_until(lambda: read_json(run_dir / "scheduler.json").get("slurm_job_id"),
                        timeout=30, what="the job id")
    wait_until(lambda: f"queued: Slurm job {job_id}: PENDING (JobHeldUser)" in said(proc),
               timeout=30, what="eval to show the job held")
    slurm_cluster.run("scontrol", "release", job_id)
    out = proc.stdout.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=90) == 0, said(proc)
    assert json.loads(out)["state"] == "done"
    rows = episode_rows(run_dir)
    assert [r["status"] for r in rows] == ["ok"] * 4 and all(r["node"] for r in rows)
    info = slurm_cluster.run("scontrol", "show", "job", job_id).stdout
    assert "JobState=COMPLETED" in info and "TimeLimit=00:10:00" in info
    assert "BatchHost=" in info and "NumTasks=2" in info


@pytest.mark.parametrize("how", ["scancel", "ctrl-c"])
def test_a_cancelled_job_reads_cancelled_and_leaves_nothing(
        how: str, slurm_cluster: SlurmCluster, tmp_path: Path,
        started: list[subprocess.Popen[str]]) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    job = walk_job(tmp_path, [40] * 6, step_sleep_ms=50, trace_dir=str(trace))
    proc = evaltui_eval(started, tmp_path, str(job), "--workers", "2")
    run_dir = the_run_dir(tmp_path, proc)
    wait_until(lambda: len(list(trace.glob("start.*"))) >= 2, timeout=60,
               what="two episodes running")
    if how == "scancel":
        slurm_cluster.run("scancel", read_json(run_dir / "scheduler.json")["slurm_job_id"])
    else:
        proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, said(proc)
    assert read_run_status(run_dir).state is RunState.CANCELLED
    wait_until(lambda: not run_leftovers(slurm_cluster), timeout=20,
               what="no process of the run left on either node")


@pytest.mark.parametrize("how", ["scontrol requeue", "USR1"])
def test_a_requeued_run_completes_with_every_episode_once(
        how: str, slurm_cluster: SlurmCluster, tmp_path: Path,
        started: list[subprocess.Popen[str]]) -> None:
    """From outside (``scontrol requeue``: Slurm ends the job and queues it again) or from
    the run itself (USR1, as ``--signal=B:USR1@90`` sends it before the time limit: it
    stops, flushes and requeues its own job): the restarted run keeps what was ``ok``
    and runs the rest, each episode ending ``ok`` exactly once."""
    trace = tmp_path / "trace"
    trace.mkdir()
    lengths = [15] * 8
    job = walk_job(tmp_path, lengths, step_sleep_ms=40, trace_dir=str(trace))
    proc = evaltui_eval(started, tmp_path, str(job), "--workers", "2", "--json")
    run_dir = the_run_dir(tmp_path, proc)
    wait_until(lambda: len(episode_rows(run_dir)) >= 2, timeout=60, what="two episodes done")
    job_id = read_json(run_dir / "scheduler.json")["slurm_job_id"]
    if how == "USR1":
        slurm_cluster.run("scancel", "--signal=USR1", "--batch", job_id)
    else:
        slurm_cluster.run("scontrol", "requeue", job_id)
    out = proc.stdout.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=120) == 0, said(proc)
    assert json.loads(out)["state"] == "done"
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert sorted(rows) == list(range(len(lengths)))
    assert all(r["status"] == "ok" for r in rows.values())
    summary = read_json(run_dir / "summary.json")
    assert summary["counts_by_status"] == {"ok": len(lengths)}
    # each started once, or again after the requeue when it was cut short by it
    for index, row in rows.items():
        assert row["attempts"] == starts(trace)[f"walk-{index:04d}"], (index, row)
    assert max(r["attempts"] for r in rows.values()) == 2  # the requeue cut some short
    info = slurm_cluster.run("scontrol", "show", "job", job_id).stdout
    assert "Restarts=1" in info and "JobState=COMPLETED" in info


def test_a_job_slurm_refuses_is_one_line_and_leaves_no_run_dir(
        slurm_cluster: SlurmCluster, tmp_path: Path,
        started: list[subprocess.Popen[str]]) -> None:
    job = walk_job(tmp_path, [3, 3])
    proc = evaltui_eval(started, tmp_path, str(job), "--slurm-partition", "nope")
    assert proc.wait(timeout=60) == 2
    proc.stdout.read()  # type: ignore[union-attr]
    wait_until(lambda: said(proc), timeout=5, what="eval's error")
    assert said(proc) == ("error: eval.slurm.partition: Slurm has no partition 'nope' "
                          "(it has: main)")
    assert list((tmp_path / "out").glob("eval_runs/*")) == []
    assert not slurm_cluster.run("squeue", "--noheader").stdout.strip()
