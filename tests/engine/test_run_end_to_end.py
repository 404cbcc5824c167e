"""The run subprocess end to end on BabyAI: results, layout, determinism, faults."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from pathlib import Path

import orjson
import pytest
from runhelpers import (
    builtin_graph,
    comparable,
    episode_rows,
    finished_count,
    run_to_end,
    running,
    wait_until,
)

from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.logread import iter_log
from evaltui.rundir.status import derive_run_state


def bot_spec(noise: float = 0.0, episodes: int = 20, **env_params) -> dict:
    graph = builtin_graph("bot", policy__noise=noise,
                          **{f"env__{k}": v for k, v in env_params.items()})
    return {"graph": graph, "eval": {"dataset": "babyai", "split": "GoToLocal",
                                      "episode_count": episodes}}


@pytest.fixture(scope="module")
def bot_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_to_end(bot_spec(0.0), tmp_path_factory.mktemp("bot"))


def test_expert_bot_scores_perfectly_on_goto_local(bot_run: Path) -> None:
    rows = episode_rows(bot_run)
    assert [r["episode_index"] for r in rows] == list(range(20))
    for row in rows:
        assert row["status"] == "ok", row["error"]
        assert row["metrics"]["success"] == 1.0
        assert row["metrics"]["spl"] == 1.0
        assert row["metrics"]["ndtw"] == 1.0
    summary = read_json(bot_run / "summary.json")
    assert summary["status"] == "done"
    assert summary["episodes_finished"] == summary["episodes_total"] == 20
    assert summary["counts_by_status"] == {"ok": 20}
    assert summary["metrics"]["success"] == 1.0
    assert derive_run_state(bot_run) is RunState.DONE


def test_noisy_bot_fails_some_episodes_and_metrics_vary(tmp_path: Path) -> None:
    run_dir = run_to_end(bot_spec(0.3), tmp_path)
    rows = episode_rows(run_dir)
    assert len(rows) == 20 and all(r["status"] == "ok" for r in rows)
    summary = read_json(run_dir / "summary.json")
    assert summary["metrics"]["success"] < 1.0
    assert len({r["metrics"]["spl"] for r in rows}) > 2
    assert len({r["metrics"]["ndtw"] for r in rows}) > 2
    lo, hi = summary["metrics_ci95"]["success"]
    assert lo < summary["metrics"]["success"] < hi


def test_same_spec_twice_gives_identical_rows(tmp_path: Path) -> None:
    first = run_to_end(bot_spec(0.3, episodes=8), tmp_path / "a")
    second = run_to_end(bot_spec(0.3, episodes=8), tmp_path / "b")
    assert [comparable(r) for r in episode_rows(first)] == \
           [comparable(r) for r in episode_rows(second)]


def test_run_dir_has_every_file_of_the_layout(bot_run: Path) -> None:
    for name in ("spec.json", "shared_urls.json", "scheduler.json", "graph.json",
                 "summary.json", "_DONE"):
        assert (bot_run / name).is_file(), name
    for index in range(20):
        ep = bot_run / "episodes" / f"ep{index:04d}"
        assert (ep / "log.jsonl").is_file() and (ep / "episode.json").is_file()
        assert (ep / "frames.bin").is_file()  # tiled frames, no PNG per step
    graph = read_json(bot_run / "graph.json")
    # graph.json is resolved: defaults of the nodeset constructors are filled in.
    assert graph["nodesets"]["env"]["params"]["sim_latency_ms"] == 0.0
    assert graph["order"] == ["policy", "env_step"]


def test_copied_episode_dir_holds_all_the_replay_needs(bot_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "ep0003"
    shutil.copytree(bot_run / "episodes" / "ep0003", copy)
    row = read_json(copy / "episode.json")
    for key in ("run_id", "graph_name", "dataset", "split", "nodes", "instruction", "metrics"):
        assert row[key] is not None, key
    assert {n["name"] for n in row["nodes"]} == {"policy", "env_step"}
    records = [rec for _, rec in iter_log(copy / "log.jsonl")]
    assert records[0]["event"] == "episode_start" and records[-1]["event"] == "episode_end"
    fires = [r for r in records if r["event"] == "fire"]
    assert len(fires) == 2 * row["step_count"]
    frames = [r["outputs"]["frame"]["$frame"] for r in fires if r["node"] == "env_step"]
    assert frames and all((copy / f).is_file() for f in frames)


def test_frames_follow_stride_and_can_be_switched_off(tmp_path: Path) -> None:
    run_dir = run_to_end(bot_spec(0.0, episodes=3, frame_stride=0), tmp_path)
    assert not list(run_dir.glob("episodes/*/assets"))  # created at the first PNG only
    assert not list(run_dir.glob("episodes/*/frames.bin"))
    assert all(r["status"] == "ok" for r in episode_rows(run_dir))


def test_reader_never_sees_invalid_json_during_a_run(tmp_path: Path) -> None:
    spec = bot_spec(0.0, episodes=40, sim_latency_ms=2)
    seen = {"summary": 0, "episode": 0}
    errors: list[str] = []
    stop = threading.Event()

    def poll(run_dir: Path) -> None:
        while not stop.is_set():
            for path in [run_dir / "summary.json", *run_dir.glob("episodes/*/episode.json")]:
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                try:
                    orjson.loads(data)
                except orjson.JSONDecodeError as exc:
                    errors.append(f"{path.name}: {exc}")
                seen["summary" if path.name == "summary.json" else "episode"] += 1

    with running(spec, tmp_path) as (run_dir, proc):
        reader = threading.Thread(target=poll, args=(run_dir,))
        reader.start()
        try:
            proc.wait(timeout=120)
        finally:
            stop.set()
            reader.join()
    assert errors == []
    assert seen["summary"] > 5 and seen["episode"] > 5
    # No temp files left behind by the atomic writes.
    assert not [p for p in run_dir.rglob(".*.tmp")]


def test_sigkill_of_the_run_reads_aborted_and_keeps_finished_episodes(tmp_path: Path) -> None:
    spec = bot_spec(0.0, episodes=200, sim_latency_ms=20)
    with running(spec, tmp_path) as (run_dir, proc):
        wait_until(lambda: finished_count(run_dir) >= 3, what="3 finished episodes")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert derive_run_state(run_dir) is RunState.ABORTED
    assert not (run_dir / "_DONE").exists()
    rows = episode_rows(run_dir)
    assert len(rows) >= 3 and all(r["status"] == "ok" for r in rows)
    summary = read_json(run_dir / "summary.json")  # still valid JSON, last snapshot
    assert summary["status"] == "running"


def test_sigterm_cancels_with_a_consistent_summary(tmp_path: Path) -> None:
    spec = bot_spec(0.0, episodes=200, sim_latency_ms=20)
    with running(spec, tmp_path) as (run_dir, proc):
        wait_until(lambda: finished_count(run_dir) >= 2, what="2 finished episodes")
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) != 0
    assert (run_dir / "_DONE").exists()
    summary = read_json(run_dir / "summary.json")
    rows = episode_rows(run_dir)
    assert summary["status"] == "cancelled"
    assert summary["episodes_finished"] == len(rows) == len(summary["episodes"])
    assert sum(summary["counts_by_status"].values()) == len(rows)
    assert [r["episode_index"] for r in summary["episodes"]] == \
           [r["episode_index"] for r in rows]
    assert derive_run_state(run_dir) is RunState.CANCELLED
    assert len(rows) < 200


def test_run_subprocess_without_spec_exits_with_a_clear_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "evaltui.engine.main", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "has no spec.json" in out.stderr


def test_unloadable_spec_on_disk_becomes_a_failed_summary(tmp_path: Path) -> None:
    import subprocess
    import sys

    run_dir = tmp_path / "20260101_000000"
    run_dir.mkdir()
    (run_dir / "spec.json").write_text(json.dumps({"graph": {"name": "x"}}))
    out = subprocess.run([sys.executable, "-m", "evaltui.engine.main", str(run_dir)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "failed" and "graph.nodesets" in summary["error"]
    assert derive_run_state(run_dir) is RunState.FAILED
