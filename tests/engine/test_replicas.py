"""Replicated shared nodesets (issue 22, the run's half): one host per GPU, through real
run subprocesses on fake GPUs (``EVALTUI_FAKE_GPUS``, the same code path as real ones)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from pool_helpers import walk_graph, walk_spec
from runhelpers import builtin_graph, comparable, episode_rows, finished_count, running, wait_until

from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.logread import iter_log

EPISODES = 12


def model_spec(workers: int, episodes: int = EPISODES, replicas: Any = None,
               min_replicas: int | None = None, **policy: Any) -> dict[str, Any]:
    graph = builtin_graph("model", env__frame_stride=0,
                          **{f"policy__{k}": v for k, v in policy.items()})
    if replicas is not None:
        graph["nodesets"]["policy"]["replicas"] = replicas
    if min_replicas is not None:
        graph["nodesets"]["policy"]["min_replicas"] = min_replicas
    return {"graph": graph, "eval": {"dataset": "babyai", "split": "GoToLocal",
                                     "episode_count": episodes, "worker_count": workers,
                                     "max_episode_retries": 2}}


def run_spec(spec: dict[str, Any], outputs: Path, timeout: float = 120) -> Path:
    with running(spec, outputs) as (run_dir, proc):
        assert proc.wait(timeout=timeout) == 0, (run_dir / "run.log").read_text()
        return run_dir


def same(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [comparable(r) | {"worker_count": 0} for r in rows]


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in raw if b"=" in e)


@pytest.fixture
def four_fake_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "4x24576")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "0,1,2,3")


def test_rows_are_identical_with_one_worker_one_replica_and_four_replicas(
        tmp_path: Path, four_fake_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    base_dir = run_spec(model_spec(1), tmp_path / "k1")
    base = episode_rows(base_dir)
    one = run_spec(model_spec(4, replicas=1), tmp_path / "r1")
    four = run_spec(model_spec(4, replicas=4), tmp_path / "r4")
    monkeypatch.setenv("EVALTUI_REPLICA_SPREAD", "least_loaded")
    least = run_spec(model_spec(4, replicas="per_gpu"), tmp_path / "ll")
    assert [r["episode_index"] for r in base] == list(range(EPISODES))
    for run_dir in (one, four, least):
        assert same(episode_rows(run_dir)) == same(base)
    notes = read_json(one / "summary.json")["replicas"]["policy"]
    assert [(n["gpu"], n["state"]) for n in notes] == [("GPU0", "up")]
    for run_dir in (four, least):
        notes = read_json(run_dir / "summary.json")["replicas"]["policy"]
        assert [(n["gpu"], n["state"]) for n in notes] == [
            ("GPU0", "up"), ("GPU1", "up"), ("GPU2", "up"), ("GPU3", "up")]
        assert len({n["pid"] for n in notes}) == 4
        # Every replica served: the workers spread over all four.
        assert all(n["requests"] > 0 for n in notes), notes
        steps = sum(r["step_count"] for r in episode_rows(run_dir))
        assert sum(n["requests"] for n in notes) == steps  # one policy call per step
    assert read_json(base_dir / "summary.json")["replicas"] is None  # no replicas: as before


def test_a_replica_killed_mid_run_is_lost_and_the_run_completes(
        tmp_path: Path, four_fake_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2,3")  # as the scheduler would give
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "1,2,3")
    episodes = 30
    spec = model_spec(3, episodes, replicas="per_gpu", forward_latency_ms=20)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        def replicas() -> list[dict[str, Any]] | None:
            try:
                return read_json(run_dir / "summary.json").get("replicas", {})["policy"]
            except (OSError, ValueError, KeyError, TypeError):
                return None

        notes = wait_until(replicas, what="the replicas in summary.json")
        assert [n["gpu"] for n in notes] == ["GPU1", "GPU2", "GPU3"]
        for note in notes:  # each host sees its own GPU alone
            env = environ(note["pid"])
            assert env["CUDA_VISIBLE_DEVICES"] == note["gpu"][3:]
            assert env["EVALTUI_FAKE_GPU_INDEX"] == note["gpu"][3:]
        # Kill it once summary.json shows every replica serving (and the run well short
        # of its end): its requests served so far must survive its death.
        notes = wait_until(lambda: (n := replicas()) and all(r["requests"] for r in n) and n,
                           timeout=60, what="every replica serving")
        assert finished_count(run_dir) < episodes
        victim = notes[1]
        os.kill(victim["pid"], signal.SIGKILL)
        assert proc.wait(timeout=120) == 0, (run_dir / "run.log").read_text()
    rows = episode_rows(run_dir)
    assert sorted(r["episode_index"] for r in rows) == list(range(episodes))
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    for row in rows:  # the final attempt of each episode ran once, start to end
        log = [rec for _, rec in iter_log(run_dir / "episodes" /
                                          f"ep{row['episode_index']:04d}" / "log.jsonl")]
        assert [r["event"] for r in log].count("episode_end") == 1
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done"
    states = {n["gpu"]: n["state"] for n in summary["replicas"]["policy"]}
    assert states == {"GPU1": "up", "GPU2": "lost", "GPU3": "up"}
    lost = [n for n in summary["replicas"]["policy"] if n["state"] == "lost"][0]
    assert lost["pid"] == victim["pid"]  # not restarted
    assert lost["requests"] >= victim["requests"] > 0
    log = (run_dir / "run.log").read_text()
    assert log.count("going on degraded with 2 of 3 replicas") == 1


def test_per_gpu_without_a_gpu_is_one_replica_on_the_host_said_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, whatever NVML would say
    run_dir = run_spec(model_spec(2, 4, replicas="per_gpu"), tmp_path / "out")
    notes = read_json(run_dir / "summary.json")["replicas"]["policy"]
    assert [(n["gpu"], n["state"]) for n in notes] == [(None, "up")]
    assert notes[0]["requests"] == sum(r["step_count"] for r in episode_rows(run_dir))
    assert (run_dir / "run.log").read_text().count("no GPU visible") == 1


def test_fewer_gpus_than_min_replicas_fails_the_run_naming_them(
        tmp_path: Path, four_fake_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "2")
    with running(model_spec(2, 2, replicas=3, min_replicas=2), tmp_path / "out") as (
            run_dir, proc):
        assert proc.wait(timeout=60) == 1
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "failed"
    assert "needs min_replicas=2 GPUs; the run has 1 (GPU2)" in summary["error"]


def test_the_last_replica_that_dies_is_restarted_as_any_host(
        tmp_path: Path, four_fake_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "0,1")
    episodes = 40
    spec = model_spec(2, episodes, replicas=2, forward_latency_ms=20)
    with running(spec, tmp_path / "out") as (run_dir, proc):
        def notes() -> list[dict[str, Any]] | None:
            try:
                return read_json(run_dir / "summary.json")["replicas"]["policy"]
            except (OSError, ValueError, KeyError, TypeError):
                return None

        first, last = wait_until(notes, what="the replicas in summary.json")
        os.kill(first["pid"], signal.SIGKILL)
        wait_until(lambda: (n := notes()) and n[0]["state"] == "lost", timeout=60,
                   what="the first replica lost")
        assert finished_count(run_dir) < episodes
        os.kill(last["pid"], signal.SIGKILL)
        assert proc.wait(timeout=120) == 0, (run_dir / "run.log").read_text()
    rows = episode_rows(run_dir)
    assert sorted(r["episode_index"] for r in rows) == list(range(episodes))
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    lost, restarted = read_json(run_dir / "summary.json")["replicas"]["policy"]
    assert (lost["gpu"], lost["state"], lost["pid"]) == ("GPU0", "lost", first["pid"])
    assert (restarted["gpu"], restarted["state"]) == ("GPU1", "up")
    assert restarted["pid"] != last["pid"]  # a fresh host, on the same GPU
    assert "host of shared nodeset 'policy' died (signal 9); restarting it" in (
        run_dir / "run.log").read_text()


def test_an_unknown_spread_fails_the_run_before_any_replica_starts(
        tmp_path: Path, four_fake_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTUI_REPLICA_SPREAD", "random")
    with running(model_spec(2, 2, replicas=2), tmp_path / "out") as (run_dir, proc):
        assert proc.wait(timeout=60) == 1
    error = read_json(run_dir / "summary.json")["error"]
    assert "EVALTUI_REPLICA_SPREAD='random': must be one of ['slot', 'least_loaded']" in error
    assert "host of" not in (run_dir / "run.log").read_text()


def test_a_replica_that_cannot_start_fails_the_run_naming_its_gpu(
        tmp_path: Path, four_fake_gpus: None) -> None:
    spec = model_spec(2, 2, replicas=2)
    spec["graph"]["nodesets"]["policy"]["params"]["weights"] = str(tmp_path / "w.npz")
    (tmp_path / "w.npz").write_bytes(b"not an npz")  # passes the spec check, fails to load
    with running(spec, tmp_path / "out") as (run_dir, proc):
        assert proc.wait(timeout=60) == 1
    error = read_json(run_dir / "summary.json")["error"]
    assert error.startswith("cannot build the graph's nodesets: the replica on GPU0: host of "
                            "nodeset 'policy' failed to start"), error


def test_a_replica_that_cannot_start_is_lost_when_min_replicas_started(
        tmp_path: Path, four_fake_gpus: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    monkeypatch.setenv("EVALTUI_FAKE_GPU_INDEX", "0,1,2")
    graph = walk_graph(shared_policy=True)
    graph["nodesets"]["policy"].update(impl="replica_nodesets:GpuPickyPolicy",
                                       params={"refuse_gpu": "1"}, replicas="per_gpu",
                                       min_replicas=2)
    run_dir = run_spec(walk_spec(tmp_path, [3] * 8, graph, worker_count=3), tmp_path / "out")
    rows = episode_rows(run_dir)
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    notes = read_json(run_dir / "summary.json")["replicas"]["policy"]
    assert [(n["gpu"], n["state"]) for n in notes] == [
        ("GPU0", "up"), ("GPU1", "lost"), ("GPU2", "up")]
    assert notes[1]["pid"] is None and notes[1]["requests"] == 0
    assert notes[0]["requests"] + notes[2]["requests"] == sum(r["step_count"] for r in rows)
    log = (run_dir / "run.log").read_text()
    assert "the replica of shared nodeset 'policy' on GPU1 could not start" in log
    assert "going on degraded with 2 of 3 replicas" in log
    # With min_replicas=3 the same failure fails the run, naming the GPU.
    graph["nodesets"]["policy"]["min_replicas"] = 3
    with running(walk_spec(tmp_path, [3] * 2, graph, worker_count=1), tmp_path / "o3") as (
            failed_dir, proc):
        assert proc.wait(timeout=60) == 1
    assert "the replica on GPU1: host of nodeset 'policy' failed to start" in read_json(
        failed_dir / "summary.json")["error"]
