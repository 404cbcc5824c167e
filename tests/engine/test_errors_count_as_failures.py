"""Errors count as failures: headline metrics over every episode, exit codes and states.

Real runs of the BabyAI expert whose policy raises on chosen episodes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaltui.rundir.jsonfiles import read_json
from tests.engine.runhelpers import builtin_graph

ENGINE_TESTS = Path(__file__).resolve().parent


def crashy_graph(crash_on: list[str]) -> dict:
    graph = builtin_graph("bot", env__frame_stride=0)
    graph["nodesets"]["policy"] = {"impl": "crashy_nodesets:CrashyBot", "parallelism": "inline",
                                   "params": {"crash_on": crash_on}}
    return graph


def run_eval(tmp_path: Path, graph: dict, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    spec = tmp_path / "graph.json"
    spec.write_text(json.dumps(graph))
    proc = subprocess.run(
        [sys.executable, "-m", "evaltui.cli", "eval", str(spec), "--outputs", str(tmp_path / "o"),
         "--workspace", str(ENGINE_TESTS), *args],
        capture_output=True, text=True, timeout=180)
    runs = sorted((tmp_path / "o" / "eval_runs").iterdir())
    return proc, read_json(runs[-1] / "summary.json")


IDS = [f"GoToLocal-{i:04d}" for i in range(20)]


def test_errored_episodes_count_as_failures_and_exit_1(tmp_path: Path) -> None:
    crash = IDS[:5]
    proc, summary = run_eval(tmp_path, crashy_graph(crash), "--split", "GoToLocal",
                             "--episodes", "20", "--workers", "2")
    assert proc.returncode == 1, proc.stderr
    rows = summary["episodes"]
    assert sum(r["status"] == "error" for r in rows) == 5
    ok_success = sum(r["metrics"]["success"] for r in rows if r["status"] == "ok")
    assert summary["metrics"]["success"] == pytest.approx(ok_success / 20, abs=1e-15)
    assert summary["metrics_n"]["success"] == 20
    assert summary["metrics_ok_only"]["success"] == pytest.approx(ok_success / 15, abs=1e-15)
    assert summary["metrics_ok_only_n"]["success"] == 15
    assert summary["error_count"] == 5 and summary["error_rate_exceeded"] is True
    assert summary["first_error"]["episode_index"] == 0
    assert summary["first_error"]["message"] == "RuntimeError: policy crashed on GoToLocal-0000"
    for row in rows:
        if row["status"] == "error":
            m = row["metrics"]
            # DESIGN §12: the partial trajectory (one step before the crash) scores no nDTW
            # of its own: every metric with a failure value is 0, path length and nav
            # error have none and leave the episode out.
            assert m["success"] == m["spl"] == m["ndtw"] == m["sdtw"] == 0.0
            assert "path_length" not in m and "nav_error" not in m
    ok_ndtw = sum(r["metrics"]["ndtw"] for r in rows if r["status"] == "ok")
    assert summary["metrics"]["ndtw"] == pytest.approx(ok_ndtw / 20, abs=1e-12)
    assert summary["metrics_n"]["ndtw"] == summary["metrics_n"]["sdtw"] == 20
    assert summary["metrics_n"]["path_length"] == summary["metrics_n"]["nav_error"] == 15
    # The results table shows that n beside path length and nav error.
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in proc.stdout.splitlines()]
    n_of = {row[0]: row[3] for row in cells if len(row) == 5}
    assert n_of["path_length"] == n_of["nav_error"] == "15", proc.stdout
    assert n_of["ndtw"] == n_of["success"] == "20", proc.stdout
    # And `evaltui verify` recomputes the same numbers from the stored trajectories.
    runs = sorted((tmp_path / "o" / "eval_runs").iterdir())
    check = subprocess.run([sys.executable, "-m", "evaltui.cli", "verify", str(runs[-1])],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "errors count as failures" in proc.stdout
    assert "5 of 20 episodes errored" in proc.stderr
    assert "policy crashed on GoToLocal-0000" in proc.stderr


def test_max_error_rate_allows_errors(tmp_path: Path) -> None:
    proc, summary = run_eval(tmp_path, crashy_graph(IDS[:2]), "--split", "GoToLocal",
                             "--episodes", "6", "--max-error-rate", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert summary["status"] == "done" and summary["error_count"] == 2
    assert summary["metrics"]["success"] == pytest.approx(4 / 6)


def test_every_episode_erroring_fails_the_run(tmp_path: Path) -> None:
    proc, summary = run_eval(tmp_path, crashy_graph(IDS[:3]), "--split", "GoToLocal",
                             "--episodes", "3", "--max-error-rate", "1")
    assert proc.returncode == 1
    assert summary["status"] == "failed"
    assert summary["error"].startswith("all 3 episodes failed; first error (episode 0, "
                                       "GoToLocal-0000): RuntimeError: policy crashed")
    assert "all 3 episodes failed" in proc.stderr
    assert "failed" in proc.stdout
    assert summary["metrics"]["success"] == 0.0 and summary["metrics_n"]["success"] == 3


def test_expert_on_gotoobjmaze_42_succeeds_with_the_default_budget(tmp_path: Path) -> None:
    graph = builtin_graph("bot", env__frame_stride=0)
    proc, summary = run_eval(tmp_path, graph, "--split", "GoToObjMaze", "--indices", "42")
    assert proc.returncode == 0, proc.stderr
    row = summary["episodes"][0]
    assert row["status"] == "ok" and row["metrics"]["success"] == 1.0
    assert row["step_count"] == 200  # exactly the old default budget: 199 would cut it
    spec = read_json(next((tmp_path / "o" / "eval_runs").iterdir()) / "spec.json")
    assert spec["eval"]["step_budget"] == 576


def test_a_budget_below_the_env_limit_is_warned_about(tmp_path: Path) -> None:
    graph = builtin_graph("bot", env__frame_stride=0)
    proc, summary = run_eval(tmp_path, graph, "--split", "GoToObjMaze", "--indices", "42",
                             "--step-budget", "199")
    assert "eval.step_budget 199 is below the env's own step limit (576)" in proc.stderr
    assert summary["episodes"][0]["metrics"]["success"] == 0.0


def test_dataset_rows_without_references_are_warned_about_and_counted(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parents[2] / "evaltui/benchmarks/babyai/data/GoToLocal.jsonl"
    rows = [json.loads(line) for line in src.read_text().splitlines()[:4]]
    del rows[1]["reference_path"]
    del rows[2]["geodesic_distance"]
    data = tmp_path / "mini.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    graph = builtin_graph("bot", env__frame_stride=0)
    proc, summary = run_eval(tmp_path, graph, "--dataset", str(data))
    assert proc.returncode == 0, proc.stderr
    assert "1 of 4 episodes have no reference_path: nDTW and SDTW leave them out" in proc.stderr
    assert "1 of 4 episodes have no geodesic_distance: SPL leaves them out" in proc.stderr
    assert summary["metrics_n"] == {**summary["metrics_n"], "success": 4, "spl": 3, "ndtw": 3,
                                    "sdtw": 3}
