"""A set's members as one Slurm job array (``evaltui set run FILE --executor slurm``) on
the test cluster: the throttle holds (never more than P members at once, measured from
Slurm's queue and from the run dirs), each member a complete run of its own; ``set
cancel`` ends the array with nothing left on either node; ``set resume`` submits only
the members that did not end done; an unknown partition is one line and writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from apihelpers import isolate_env, start_backend  # noqa: E402
from pool_helpers import walk_graph, write_dataset  # noqa: E402
from runhelpers import ENGINE_TESTS, episode_rows  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402
from test_slurm_executor import run_leftovers  # noqa: E402
from waiting import wait_until  # noqa: E402

from evaltui.contract.states import RunState  # noqa: E402
from evaltui.rundir.jsonfiles import read_json  # noqa: E402
from evaltui.rundir.status import read_run_status  # noqa: E402

pytestmark = pytest.mark.slurm


def evaltui(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "evaltui.cli", *args, "--outputs", str(tmp_path / "out")]


def run(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(evaltui(tmp_path, *args), capture_output=True, text=True,
                          cwd=tmp_path, timeout=timeout,
                          env={**os.environ, "EVALTUI_SLURM_LISTEN_HOST": "127.0.0.1"})


def write_set(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def set_record(tmp_path: Path, name: str) -> dict[str, Any]:
    return read_json(tmp_path / "out" / "eval_sets" / name / "set.json")


def shown_states(tmp_path: Path, name: str) -> list[str]:
    done = run(tmp_path, "set", "show", name, "--format", "json")
    assert done.returncode == 0, done.stderr
    return [m["state"] for m in json.loads(done.stdout)["members"]]


def running_tasks(cluster: SlurmCluster, name: str) -> int:
    out = cluster.run("squeue", "--noheader", "--array", "--states=RUNNING",
                      f"--name=evaltui-set-{name}", "--format=%i").stdout
    return len(out.split())


def most_at_once(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals holding one instant."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_a_six_member_set_runs_as_one_array_never_more_than_two_at_once(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    path = write_set(tmp_path, {
        "name": "arr6", "base": {"graph": "bot", "dataset": "babyai", "split": "GoToLocal",
                                 "episodes": 1, "workers": 1},
        "matrix": {"policy.noise": [0.0, 0.01, 0.02, 0.03, 0.04, 0.05]}})
    seen: list[int] = []  # RUNNING tasks of the array, sampled while it runs
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.append(running_tasks(slurm_cluster, "arr6"))
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        done = run(tmp_path, "set", "run", str(path), "--executor", "slurm",
                   "--slurm-array-parallelism", "2", "--json")
    finally:
        stop.set()
        sampler.join(timeout=30)
    assert done.returncode == 0, done.stderr
    assert "Slurm array job" in done.stderr and "at most 2 at once" in done.stderr
    assert [m["state"] for m in json.loads(done.stdout)["members"]] == ["done"] * 6
    assert max(seen) == 2, seen  # the throttle, from Slurm's queue
    record = set_record(tmp_path, "arr6")
    assert record["file"]["base"]["executor"] == "slurm"
    assert record["file"]["base"]["slurm_array_parallelism"] == 2
    manifest = read_json(tmp_path / "out" / "eval_sets" / "arr6" / "slurm_array.json")
    assert len(manifest["jobs"]) == 1  # one array for the six
    job = manifest["jobs"][0]
    intervals = []
    for index, member in enumerate(record["members"]):
        run_dir = Path(member["run_dir"])
        assert member["state"] == "done" and member["attempts"] == 1
        assert manifest["tasks"][str(index)] == {"run_dir": str(run_dir), "job": job,
                                                 "key": member["key"]}
        assert read_json(run_dir / "scheduler.json")["slurm_job_id"] == f"{job}_{index}"
        assert read_run_status(run_dir).state is RunState.DONE
        assert (run_dir / "_DONE").is_file() and (run_dir / "run.log").is_file()
        rows = episode_rows(run_dir)
        assert [r["status"] for r in rows] == ["ok"] and rows[0]["node"] in ("n1", "n2")
        summary = read_json(run_dir / "summary.json")
        intervals.append((datetime.fromisoformat(summary["started_at"]),
                          datetime.fromisoformat(summary["finished_at"])))
    assert most_at_once(intervals) == 2, intervals  # the throttle, from the run dirs
    assert shown_states(tmp_path, "arr6") == ["done"] * 6


def test_cancel_ends_the_array_and_resume_submits_only_the_unfinished(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    graph = tmp_path / "walk.json"
    graph.write_text(json.dumps(walk_graph()))
    dataset = write_dataset(tmp_path / "walk.jsonl", [40, 40, 40])
    path = write_set(tmp_path, {
        "name": "arrc", "base": {"graph": str(graph), "dataset": str(dataset), "workers": 1,
                                 "workspace": str(ENGINE_TESTS),
                                 "slurm_array_parallelism": 2},
        # member 0 is quick; 1, 2 and 3 take ~7 s each, 3 waits for the throttle
        "matrix": {"env.step_sleep_ms": [0, 60, 61, 62]}})
    follower = subprocess.Popen(evaltui(tmp_path, "set", "run", str(path), "--executor",
                                        "slurm"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                env={**os.environ, "EVALTUI_SLURM_LISTEN_HOST": "127.0.0.1"})
    try:
        def member0_done_and_two_running() -> bool:
            if follower.poll() is not None:
                raise AssertionError(f"set run exited: {follower.communicate()}")
            try:
                states = [m["state"] for m in set_record(tmp_path, "arrc")["members"]]
            except (OSError, ValueError):
                return False
            return states[0] == "done" and running_tasks(slurm_cluster, "arrc") == 2
        wait_until(member0_done_and_two_running, timeout=90,
                   what="member 0 done, members 1 and 2 running")
        cancelled = run(tmp_path, "set", "cancel", "arrc")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "scancel of Slurm array job(s)" in cancelled.stdout
        out, err = follower.communicate(timeout=90)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 130, err
    # 1 and 2 by their own word (SIGTERM), 3 (pending) by Slurm's, kept in its run dir
    assert shown_states(tmp_path, "arrc") == ["done"] + ["cancelled"] * 3
    pending = Path(set_record(tmp_path, "arrc")["members"][3]["run_dir"])
    assert read_json(pending / "scheduler.json")["note"].split(":")[1].strip() \
        .startswith("CANCELLED")
    assert not slurm_cluster.run("squeue", "--noheader").stdout.strip()
    wait_until(lambda: not run_leftovers(slurm_cluster), timeout=30,
               what="no process of the set left on either node")
    before = set_record(tmp_path, "arrc")["members"]

    resumed = run(tmp_path, "set", "resume", "arrc", "--slurm-array-parallelism", "3")
    assert resumed.returncode == 0, resumed.stderr
    after = set_record(tmp_path, "arrc")["members"]
    assert [m["state"] for m in after] == ["done"] * 4
    assert [m["attempts"] for m in after] == [1, 2, 2, 2]  # member 0 was not run again
    assert [m["run_dir"] for m in after] == [m["run_dir"] for m in before]
    manifest = read_json(tmp_path / "out" / "eval_sets" / "arrc" / "slurm_array.json")
    first, second = manifest["jobs"]
    assert [manifest["tasks"][i]["job"] for i in "0123"] == [first] + [second] * 3
    for member in after:
        rows = episode_rows(Path(member["run_dir"]))
        assert sorted(r["episode_index"] for r in rows) == [0, 1, 2]
        assert all(r["status"] == "ok" for r in rows)
        summary = read_json(Path(member["run_dir"]) / "summary.json")
        assert summary["counts_by_status"] == {"ok": 3}
    assert shown_states(tmp_path, "arrc") == ["done"] * 4


def test_an_unknown_partition_is_one_line_and_writes_nothing(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    path = write_set(tmp_path, {
        "name": "arrp", "base": {"graph": "bot", "dataset": "babyai", "split": "GoToLocal",
                                 "episodes": 1},
        "matrix": {"policy.noise": [0.0, 0.1]}})
    done = run(tmp_path, "set", "run", str(path), "--executor", "slurm",
               "--slurm-partition", "nope", timeout=60)
    assert done.returncode == 2
    assert " ".join(done.stderr.split()) == ("error: eval.slurm.partition: Slurm has no "
                                             "partition 'nope' (it has: main)")
    assert not (tmp_path / "out" / "eval_sets" / "arrp").exists()
    assert list((tmp_path / "out").glob("eval_runs/*")) == []
    assert not slurm_cluster.run("squeue", "--noheader").stdout.strip()


def test_an_array_task_requeues_itself_by_its_array_id_and_its_member_completes(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """USR1 to a task's batch step (as ``--signal=B:USR1@90`` sends it before the time
    limit): the run stops, flushes and requeues its own task as ``JOB_TASK`` (its own
    SLURM_JOB_ID would name another job: Lightning#15022); the follower reads the member
    as queued again, not as ended, and the member completes with every episode once."""
    trace = tmp_path / "trace"
    trace.mkdir()
    graph = tmp_path / "walk.json"
    graph.write_text(json.dumps(walk_graph({"trace_dir": str(trace)})))
    dataset = write_dataset(tmp_path / "walk.jsonl", [20] * 6)
    path = write_set(tmp_path, {
        "name": "arrq", "base": {"graph": str(graph), "dataset": str(dataset), "workers": 1,
                                 "workspace": str(ENGINE_TESTS)},
        "matrix": {"env.step_sleep_ms": [40, 41]}})
    follower = subprocess.Popen(evaltui(tmp_path, "set", "run", str(path), "--executor",
                                        "slurm", "--json"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                env={**os.environ, "EVALTUI_SLURM_LISTEN_HOST": "127.0.0.1"})
    try:
        def member1_run_dir() -> Path | None:
            if follower.poll() is not None:
                raise AssertionError(f"set run exited: {follower.communicate()}")
            try:
                member = set_record(tmp_path, "arrq")["members"][1]
            except (OSError, ValueError):
                return None
            run_dir = Path(member["run_dir"]) if member.get("run_dir") else None
            return run_dir if run_dir is not None and episode_rows(run_dir) else None
        run_dir = wait_until(member1_run_dir, timeout=90, what="an episode of member 1 done")
        task = read_json(run_dir / "scheduler.json")["slurm_job_id"]
        slurm_cluster.run("scancel", "--signal=USR1", "--batch", task)
        out, err = follower.communicate(timeout=150)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert follower.returncode == 0, err
    assert [m["state"] for m in json.loads(out)["members"]] == ["done", "done"]
    assert f"requeueing Slurm job {task} " in (run_dir / "run.log").read_text()
    info = slurm_cluster.run("scontrol", "show", "job", task).stdout
    assert "Restarts=1" in info and "JobState=COMPLETED" in info
    rows = episode_rows(run_dir)
    assert sorted(r["episode_index"] for r in rows) == list(range(6))
    assert read_json(run_dir / "summary.json")["counts_by_status"] == {"ok": 6}


def test_set_run_again_after_a_detached_array_follows_it_and_runs_nothing_twice(
        slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """``set run --detach`` leaves set.json saying ``queued``; run again (without
    ``--executor slurm``: set.json keeps it) once the array has ended, it reads each
    member's end from its run dir: nothing is submitted again."""
    path = write_set(tmp_path, {
        "name": "arrd", "base": {"graph": "bot", "dataset": "babyai", "split": "GoToLocal",
                                 "episodes": 1, "workers": 1},
        "matrix": {"policy.noise": [0.0, 0.1]}})
    detached = run(tmp_path, "set", "run", str(path), "--executor", "slurm", "--detach")
    assert detached.returncode == 0, detached.stderr
    assert [m["state"] for m in set_record(tmp_path, "arrd")["members"]] == ["queued"] * 2
    wait_until(lambda: not slurm_cluster.run("squeue", "--noheader").stdout.strip(),
               timeout=90, what="the array to end")
    again = run(tmp_path, "set", "run", str(path), "--json")
    assert again.returncode == 0, again.stderr
    assert "nothing to submit" in again.stderr
    assert [m["state"] for m in json.loads(again.stdout)["members"]] == ["done"] * 2
    assert [m["attempts"] for m in set_record(tmp_path, "arrd")["members"]] == [1, 1]
    manifest = read_json(tmp_path / "out" / "eval_sets" / "arrd" / "slurm_array.json")
    assert len(manifest["jobs"]) == 1


def test_the_apis_cancel_of_a_slurm_set_scancels_its_array(
        slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``POST /sets/{id}/cancel`` of a set run as an array (``set run --detach``): scancel
    of the array, as ``evaltui set cancel`` does; the running member ends cancelled by its
    own word, the pending one by Slurm's, both in set.json."""
    graph = tmp_path / "walk.json"
    graph.write_text(json.dumps(walk_graph()))
    dataset = write_dataset(tmp_path / "walk.jsonl", [40, 40])
    path = write_set(tmp_path, {
        "name": "arra", "base": {"graph": str(graph), "dataset": str(dataset), "workers": 1,
                                 "workspace": str(ENGINE_TESTS),
                                 "slurm_array_parallelism": 1},
        "matrix": {"env.step_sleep_ms": [60, 61]}})  # ~5 s each, one at a time
    detached = run(tmp_path, "set", "run", str(path), "--executor", "slurm", "--detach")
    assert detached.returncode == 0, detached.stderr
    job = read_json(tmp_path / "out" / "eval_sets" / "arra" / "slurm_array.json")["jobs"][0]
    wait_until(lambda: running_tasks(slurm_cluster, "arra") == 1, timeout=60,
               what="member 0 running")
    isolate_env(tmp_path, monkeypatch)
    monkeypatch.setenv("EVALTUI_OUTPUTS", str(tmp_path / "out"))
    backend = start_backend()
    try:
        answer = backend.http().post("/sets/arra/cancel")
    finally:
        backend.stop()
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"set_id": "arra", "cancelled": 2, "slurm_jobs": [job]}
    assert not slurm_cluster.run("squeue", "--noheader").stdout.strip()
    assert [m["state"] for m in set_record(tmp_path, "arra")["members"]] == \
        ["cancelled"] * 2
