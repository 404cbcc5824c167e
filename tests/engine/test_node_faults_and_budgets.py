"""Node faults, timeouts and budgets through the real run subprocess (corridor fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_nodesets import corridor_graph
from runhelpers import ENGINE_TESTS, episode_rows, run_to_end, write_corridor_dataset

from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.logread import iter_log


def corridor_spec(tmp_path: Path, goals: list[int], **eval_fields) -> dict:
    dataset = write_corridor_dataset(tmp_path / "corridor.jsonl", goals)
    policy = eval_fields.pop("policy", {})
    return {"graph": corridor_graph(**policy), "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(dataset), **eval_fields}}


def test_a_node_raising_in_episode_3_fails_only_episode_3(tmp_path: Path) -> None:
    spec = corridor_spec(tmp_path, [2, 3, 4, 7, 5, 6], policy={"fail_on_goal": 7})
    run_dir = run_to_end(spec, tmp_path / "out")
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert sorted(rows) == [0, 1, 2, 3, 4, 5]
    assert rows[3]["status"] == "error"
    assert "RuntimeError: policy exploded on goal 7" in rows[3]["error"]
    assert "Traceback" in rows[3]["error"]
    for i in (0, 1, 2, 4, 5):
        assert rows[i]["status"] == "ok" and rows[i]["metrics"]["success"] == 1.0
        assert rows[i]["metrics"]["spl"] == 1.0 and rows[i]["metrics"]["ndtw"] == 1.0
    log = [rec for _, rec in iter_log(run_dir / "episodes" / "ep0003" / "log.jsonl")]
    errors = [r for r in log if r["event"] == "error"]
    assert errors[0]["node"] == "policy" and "exploded" in errors[0]["error"]
    assert any("Traceback" in (r["error"] or "") for r in errors)
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done"
    assert summary["counts_by_status"] == {"ok": 5, "error": 1}
    # the error episode counts as a failure in the headline, not in the ok-only diagnosis
    assert summary["metrics"]["success"] == pytest.approx(5 / 6)
    assert summary["metrics_ok_only"]["success"] == 1.0


def test_step_budget_ends_the_episode_without_success(tmp_path: Path) -> None:
    spec = corridor_spec(tmp_path, [3, 10], step_budget=5)
    rows = episode_rows(run_to_end(spec, tmp_path / "out"))
    assert rows[0]["metrics"]["success"] == 1.0 and rows[0]["step_count"] == 3
    assert rows[1]["status"] == "ok" and rows[1]["step_count"] == 5
    assert rows[1]["metrics"]["success"] == 0.0 and rows[1]["metrics"]["nav_error"] == 5.0


def test_slow_step_is_a_timeout(tmp_path: Path) -> None:
    spec = corridor_spec(tmp_path, [2, 2], per_step_budget_sec=0.05,
                         policy={"sleep_sec": 0.2})
    rows = episode_rows(run_to_end(spec, tmp_path / "out"))
    assert [r["status"] for r in rows] == ["timeout", "timeout"]
    assert "per_step_budget_sec" in rows[0]["error"]


def test_dataset_without_references_still_gets_success_and_path_length(tmp_path: Path) -> None:
    dataset = tmp_path / "plain.jsonl"
    dataset.write_text('{"episode_id": "a", "goal": 2}\n{"episode_id": "b", "goal": -1}\n')
    spec = {"graph": corridor_graph(), "active_workspace_dir": str(ENGINE_TESTS),
            "eval": {"dataset": str(dataset)}}
    rows = episode_rows(run_to_end(spec, tmp_path / "out"))
    assert [r["metrics"]["success"] for r in rows] == [1.0, 1.0]
    assert [r["metrics"]["path_length"] for r in rows] == [2.0, 1.0]
    assert "spl" not in rows[0]["metrics"]


def test_episode_indices_and_selectors_pick_the_episodes(tmp_path: Path) -> None:
    spec = corridor_spec(tmp_path, [1, 2, 3, 4, 5, 6], episode_indices=[5, 1, 3])
    rows = episode_rows(run_to_end(spec, tmp_path / "a"))
    assert [r["episode_index"] for r in rows] == [1, 3, 5]
    spec = corridor_spec(tmp_path, [1, 2, 3, 14, 15, 6],
                         episode_selectors={"scene_id": r"^len1\d$"})
    rows = episode_rows(run_to_end(spec, tmp_path / "b"))
    assert [r["episode_index"] for r in rows] == [3, 4]


def test_a_node_that_blocks_for_good_is_killed_as_a_timeout(tmp_path: Path) -> None:
    # The policy sleeps 60 s in the goal-7 episode: without the pool's watchdog the run
    # would hang; with it that episode is `timeout` and the others finish.
    spec = corridor_spec(tmp_path, [2, 7, 3], per_step_budget_sec=0.3,
                         policy={"hang_on_goal": 7})
    run_dir = run_to_end(spec, tmp_path / "out", timeout=60)
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert rows[1]["status"] == "timeout"
    assert "a node is blocking" in rows[1]["error"]
    assert rows[0]["status"] == rows[2]["status"] == "ok"
    assert read_json(run_dir / "summary.json")["status"] == "done"


def test_an_env_reset_that_blocks_for_good_is_killed_as_a_timeout(tmp_path: Path) -> None:
    """Issue 10: the hung-step watchdog did not bound set_episode; a hanging reset hung
    its worker (and the run) for good."""
    spec = corridor_spec(tmp_path, [2, 7, 3], reset_budget_sec=0.5)
    spec["graph"]["nodesets"]["env"]["params"] = {"hang_reset_on_goal": 7}
    run_dir = run_to_end(spec, tmp_path / "out", timeout=60)
    rows = {r["episode_index"]: r for r in episode_rows(run_dir)}
    assert rows[1]["status"] == "timeout"
    assert "set_episode (env reset) made no progress" in rows[1]["error"]
    assert "reset_budget_sec 0.5 (the env is blocking)" in rows[1]["error"]
    assert rows[0]["status"] == rows[2]["status"] == "ok"
    assert read_json(run_dir / "summary.json")["status"] == "done"
