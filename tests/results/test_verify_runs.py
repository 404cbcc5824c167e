"""``evaltui verify`` on real runs: bot, noisy_bot and model with K = 1 and 2, errors, tampering.

Each run is a real ``evaltui eval`` subprocess on 6 GoToLocal episodes; the tampering
tests change a copy of a run dir by as little as 1e-6 or one logged action.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evaltui.cli import main
from evaltui.rundir.jsonfiles import read_json
from tests.engine.runhelpers import builtin_graph
from tests.proctools import kill_group, kill_runs

ENGINE_TESTS = Path(__file__).resolve().parents[1] / "engine"  # crashy_nodesets.py
GRAPHS = [("bot", 1), ("bot", 2), ("noisy_bot", 1), ("noisy_bot", 2), ("model", 1), ("model", 2)]
RAISE_ON = ["GoToLocal-0001", "GoToLocal-0004"]


def start_eval(root: Path, target: str, workers: int, *extra: str) -> subprocess.Popen:
    """Start one ``evaltui eval`` subprocess (its own process group) writing under ``root``."""
    env = {**os.environ, "EVALTUI_OUTPUTS": str(root / "outputs"),
           "EVALTUI_STATE_DIR": str(root / "state")}
    return subprocess.Popen(
        [sys.executable, "-m", "evaltui.cli", "eval", target, "--split", "GoToLocal",
         "--episodes", "6", "--workers", str(workers), "--outputs", str(root / "outputs"),
         *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        stdin=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int] | str, Path]:
    """The six graph x K runs and one with error episodes, run side by side."""
    roots: dict[tuple[str, int] | str, Path] = {}
    procs: dict[tuple[str, int] | str, subprocess.Popen] = {}
    try:
        for g, k in GRAPHS:
            roots[g, k] = tmp_path_factory.mktemp(f"{g}{k}")
            procs[g, k] = start_eval(roots[g, k], g, k)
        root = roots["raising"] = tmp_path_factory.mktemp("raising")
        graph = builtin_graph("bot")
        graph["nodesets"]["policy"] = {"impl": "crashy_nodesets:CrashyBot",
                                       "parallelism": "inline", "params": {"crash_on": RAISE_ON}}
        (root / "graph.json").write_text(json.dumps(graph))
        procs["raising"] = start_eval(root, str(root / "graph.json"), 2, "--workspace",
                                      str(ENGINE_TESTS))
        for key, proc in procs.items():
            _out, err = proc.communicate(timeout=180)
            # Exit 1: the run with error episodes (errors count, max_error_rate 0).
            assert proc.returncode == (1 if key == "raising" else 0), err
    finally:
        for key, proc in procs.items():
            if proc.poll() is None:
                kill_group(proc.pid)
                proc.wait()
            kill_runs(roots[key] / "outputs")
    return {key: next((root / "outputs" / "eval_runs").iterdir())
            for key, root in roots.items()}


def verify(run_dir: Path, *extra: str) -> tuple[int, dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["verify", str(run_dir), "--json", *extra])
    return code, json.loads(buf.getvalue())


def step_counts(run_dir: Path) -> int:
    return sum(read_json(p)["step_count"] for p in run_dir.glob("episodes/ep*/episode.json"))


@pytest.mark.parametrize(("graph", "workers"), GRAPHS)
def test_verify_and_replay_pass_on_real_runs(runs, graph: str, workers: int) -> None:
    run_dir = runs[graph, workers]
    code, report = verify(run_dir, "--replay")
    assert code == 0, report
    assert report["episodes_checked"] == 6
    assert report["max_diff"] <= 1e-9
    assert report["replay"]["episodes_replayed"] == 6
    # Every env step of every episode was re-run (one action per step).
    assert report["replay"]["steps_replayed"] == step_counts(run_dir) > 6


def test_verify_passes_on_a_run_with_error_episodes(runs) -> None:
    raising_run = runs["raising"]
    summary = read_json(raising_run / "summary.json")
    assert summary["error_count"] == 2
    assert summary["metrics_n"]["success"] == 6 and summary["metrics_ok_only_n"]["success"] == 4
    code, report = verify(raising_run, "--replay")
    assert code == 0, report
    assert report["episodes_checked"] == 6
    assert report["replay"]["episodes_replayed"] == 6  # the errored ones up to the error


def test_one_metric_off_by_1e6_fails(runs, tmp_path: Path) -> None:
    run_dir = shutil.copytree(runs["noisy_bot", 2], tmp_path / "run")
    path = run_dir / "episodes/ep0003/episode.json"
    record = read_json(path)
    record["metrics"]["ndtw"] += 1e-6
    path.write_text(json.dumps(record))
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "verify", str(run_dir)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "largest absolute difference: 1e-06 at ep0003 (GoToLocal-0003) ndtw " \
        "(episode.json metrics)" in proc.stdout
    assert "ep0003 (GoToLocal-0003) episode.json metrics ndtw" in proc.stdout
    assert "MISMATCH: 1 value differs" in proc.stdout


def test_replay_reports_the_first_divergence(runs, tmp_path: Path) -> None:
    run_dir = shutil.copytree(runs["bot", 1], tmp_path / "run")
    # The expert ends each episode with 'done' (6); logging 'left' (0) instead must
    # show up at exactly that step as a reward the fresh env does not give.
    log = run_dir / "episodes/ep0002/log.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    last = max(i for i, r in enumerate(records)
               if r["event"] == "fire" and r["node"] == "env_step")
    assert records[last]["inputs"]["action"] == 6 and records[last]["outputs"]["reward"] > 0
    records[last]["inputs"]["action"] = 0
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    # And a trajectory whose last position is moved: a metric and a replay difference.
    traj_path = run_dir / "episodes/ep0004/trajectory.json"
    traj = read_json(traj_path)
    traj["positions"][-1][0] += 1
    traj_path.write_text(json.dumps(traj))
    code, report = verify(run_dir, "--replay")
    assert code == 1
    # The moved position changes ep0004's path length (and so the run means); no other
    # episode's metrics.
    assert {m["where"] for m in report["mismatches"]} == {"ep0004 (GoToLocal-0004)",
                                                          "summary.json"}
    assert ("ep0004 (GoToLocal-0004)", "episode.json metrics", "path_length") in \
        {(m["where"], m["field"], m["metric"]) for m in report["mismatches"]}
    first, second = report["replay"]["divergences"]
    assert first["episode"] == "ep0002 (GoToLocal-0002)"
    assert first["step"] == records[last]["step"] and first["what"].startswith("reward: replay")
    assert second["episode"] == "ep0004 (GoToLocal-0004)"
    k = len(traj["positions"]) - 1
    assert second["what"].startswith(f"position #{k}: replay")


def test_verify_replay_takes_a_run_dir_relative_to_the_working_dir(
        runs, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user types it (``evaltui verify outputs/eval_runs/RUN --replay``)."""
    run_dir = runs["bot", 1]
    monkeypatch.chdir(run_dir.parents[2])
    code, report = verify(run_dir.relative_to(run_dir.parents[2]), "--replay")
    assert code == 0, report
    assert report["replay"]["episodes_replayed"] == 6
