"""``evaltui verify`` on hand-written run dirs: recomputation, mismatches, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from verifyfixture import edit_json, episodes, write_run

from evaltui.cli import main
from evaltui.results.verify import recompute_episode, verify_run


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run")


def verify(run: Path, *extra: str) -> tuple[int, dict]:
    """``evaltui verify --json`` in process: (exit code, report)."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["verify", str(run), "--json", *extra])
    return code, json.loads(buf.getvalue()) if buf.getvalue() else {}


@pytest.mark.parametrize("case", range(len(episodes())))
def test_episode_rule_matches_hand_computed_metrics(case: int) -> None:
    traj, expected = episodes()[case]
    got = recompute_episode(traj)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name


def test_consistent_run_passes(run_dir: Path, capsys) -> None:
    report = verify_run(run_dir)
    assert report.mismatches == []
    assert report.episodes_checked == 5  # the cancelled one is in no aggregate
    assert report.max_diff <= 1e-12
    # 5 episodes x 2 places (episode.json, summary row) + 2 blocks x (means, n, CIs) + count
    assert report.values_compared > 100
    assert main(["verify", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "verified 5 episodes" in out and "OK" in out


def test_metric_off_by_1e6_fails_naming_episode_and_metric(run_dir: Path, capsys) -> None:
    edit_json(run_dir / "episodes/ep0001/episode.json",
              lambda d: d["metrics"].update(ndtw=d["metrics"]["ndtw"] + 1e-6))
    code, report = verify(run_dir)
    assert code == 1 and not report["ok"]
    assert report["max_diff"] == pytest.approx(1e-6, rel=1e-6)
    assert report["max_where"] == "ep0001 (fx-01) ndtw (episode.json metrics)"
    [m] = report["mismatches"]
    assert (m["where"], m["field"], m["metric"]) == ("ep0001 (fx-01)", "episode.json metrics",
                                                      "ndtw")
    assert main(["verify", str(run_dir)]) == 1
    assert "ep0001 (fx-01) episode.json metrics ndtw" in capsys.readouterr().out
    # A tolerance above the change accepts it.
    assert verify(run_dir, "--tolerance", "1e-5")[0] == 0


def test_summary_mean_ci_and_n_are_recomputed(run_dir: Path) -> None:
    def tamper(s: dict) -> None:
        s["metrics"]["spl"] += 1e-8
        s["metrics_ok_only_ci95"]["path_length"][1] -= 1e-7
        s["metrics_n"]["ndtw"] = 3  # the n of the old rule, which left the timeout out
        s["episodes"][2]["metrics"]["steps"] = 2.0
    edit_json(run_dir / "summary.json", tamper)
    code, report = verify(run_dir)
    assert code == 1
    found = {(m["where"], m["field"], m["metric"]) for m in report["mismatches"]}
    assert found == {
        ("summary.json", "metrics", "spl"),
        ("summary.json", "metrics_ok_only_ci95", "path_length high"),
        ("summary.json", "metrics_n", "ndtw"),
        ("ep0002 (fx-02)", "summary.json episodes metrics", "steps"),
    }
    assert report["max_diff"] == 1.0


def test_error_episode_must_count_as_a_failure(run_dir: Path) -> None:
    """An error episode stored with the env's success 1 is flagged, and so is every mean."""
    def keep_success(d: dict) -> None:
        d["metrics"]["success"] = 1.0
    edit_json(run_dir / "episodes/ep0002/episode.json", keep_success)
    report = verify_run(run_dir)
    assert [(m.where, m.metric, m.stored, m.recomputed) for m in report.mismatches] == [
        ("ep0002 (fx-02)", "success", 1.0, 0.0)]


def test_metric_on_one_side_only_is_a_mismatch(run_dir: Path) -> None:
    # A timeout episode has no path length (DESIGN §12): one stored for it is one-sided.
    edit_json(run_dir / "episodes/ep0003/episode.json",
              lambda d: d["metrics"].update(path_length=0.5))
    edit_json(run_dir / "summary.json", lambda s: s["metrics_ok_only"].pop("nav_error"))
    report = verify_run(run_dir)
    got = {(m.where, m.field, m.metric, m.diff) for m in report.mismatches}
    assert got == {("ep0003 (fx-03)", "episode.json metrics", "path_length", None),
                   ("summary.json", "metrics_ok_only", "nav_error", None)}


def test_trajectory_of_another_episode_is_flagged(run_dir: Path) -> None:
    shutil.copy(run_dir / "episodes/ep0000/trajectory.json",
                run_dir / "episodes/ep0001/trajectory.json")
    report = verify_run(run_dir)
    fields = {(m.where, m.field, m.metric) for m in report.mismatches}
    assert ("ep0001 (fx-01)", "trajectory.json", "episode_id") in fields
    assert ("ep0001 (fx-01)", "episode.json metrics", "success") in fields


def test_bad_input_exits_2_and_says_why(run_dir: Path, tmp_path: Path, capsys) -> None:
    assert main(["verify", str(tmp_path / "nowhere")]) == 2
    assert "not a run dir" in capsys.readouterr().err
    (run_dir / "episodes/ep0001/trajectory.json").unlink()
    (run_dir / "episodes/ep0003/trajectory.json").unlink()
    assert main(["verify", str(run_dir)]) == 2
    assert "2 of 6 episodes have no trajectory.json: ep0001, ep0003" in capsys.readouterr().err
    (run_dir / "summary.json").write_text("{not json")
    assert main(["verify", str(run_dir)]) == 2
    assert "summary.json is unreadable" in capsys.readouterr().err


def test_replay_of_a_non_babyai_env_is_skipped(run_dir: Path) -> None:
    code, report = verify(run_dir, "--replay")
    assert code == 0
    assert "unsupported for env nodeset 'env' (fixture_envs:GridEnv)" in \
        report["replay"]["unsupported"]
    assert report["replay"]["episodes_replayed"] == 0


@pytest.mark.parametrize("plant", ["summary.json", "episodes/ep0002/trajectory.json",
                                   "episodes/ep0002/episode.json", "episodes"])
def test_a_symlink_out_of_the_run_dir_is_an_input_error(run_dir: Path, tmp_path: Path,
                                                        plant: str, capsys) -> None:
    """Issue 10: verify reads a copied run dir; a symlink out of it is never followed."""
    twin = tmp_path / "twin"
    shutil.copytree(run_dir, twin)
    path = run_dir / plant
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    path.symlink_to(twin / plant)
    assert main(["verify", str(run_dir)]) == 2
    assert "symlink that leaves the run dir" in capsys.readouterr().err
