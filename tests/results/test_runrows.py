"""Reading run dirs offline: summary rows, rebuilt rows, run ids under the outputs root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import resultruns as rr

from evaltui.results.runrows import RunDirError, load_run, resolve_run_dir


def test_rows_and_header_from_summary(tmp_path: Path) -> None:
    a, _ = rr.write_pair(tmp_path)
    run = load_run(a)
    assert (run.run_id, run.graph_name, run.dataset, run.split) == \
        ("20250101_120000", "bot", "babyai", "GoToLocal")
    assert run.summary is not None and run.problems == []
    assert [r["episode_index"] for r in run.rows] == list(range(13))
    assert run.rows == rr.rows_a()


def test_missing_or_broken_summary_is_rebuilt_from_episode_files(tmp_path: Path) -> None:
    run_dir = rr.write_run(tmp_path / "20250101_120000", rr.rows_b(), graph_name="model",
                           summary=False)
    run = load_run(run_dir)
    assert run.summary is None and run.graph_name == "model"
    assert [r["status"] for r in run.rows] == rr.STATUS_B + ["cancelled"]
    assert [r["metrics"] for r in run.rows] == [r["metrics"] for r in rr.rows_b()]

    (run_dir / "summary.json").write_text('{"run_id": "x", "episodes": [')
    (run_dir / "episodes" / "ep0003" / "episode.json").write_text("not json")
    run = load_run(run_dir)
    assert run.summary is None
    # Issue 10: a torn episode.json is an unreadable row, not a missing ("not finished") one.
    assert [r["episode_index"] for r in run.rows] == list(range(13))
    assert run.rows[3]["status"] == "unreadable" and "ep0003" in run.rows[3]["error"]
    assert len(run.problems) == 2
    assert "summary.json" in run.problems[0] and "ep0003" in run.problems[1]


def test_a_symlink_out_of_the_run_dir_is_never_read(tmp_path: Path) -> None:
    """Issue 10: a copied run dir with symlinks planted in it (``evaltui show RUN_DIR``,
    ``compare``) reads nothing outside it."""
    run_dir = rr.write_run(tmp_path / "20250101_120000", rr.rows_b(), graph_name="model",
                           summary=False)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"episode_index": 3, "status": "ok", "run_id": "SECRET",
                                  "episodes": [{"episode_index": 0, "status": "SECRET"}]}))
    (run_dir / "summary.json").symlink_to(secret)
    (run_dir / "episodes" / "ep0003" / "episode.json").unlink()
    (run_dir / "episodes" / "ep0003" / "episode.json").symlink_to(secret)
    run = load_run(run_dir)
    assert "SECRET" not in json.dumps(run.rows) and run.summary is None
    assert run.rows[3]["status"] == "unreadable"
    assert "leaves the run dir" in run.rows[3]["error"]
    assert len(run.problems) == 2 and all("leaves the run dir" in p for p in run.problems)


def test_episodes_newer_than_the_summary_are_added(tmp_path: Path) -> None:
    rows = rr.rows_a()
    run_dir = rr.write_run(tmp_path / "r", rows, graph_name="bot")
    # A summary written before the last two episodes finished.
    data = json.loads((run_dir / "summary.json").read_text())
    data["episodes"] = data["episodes"][:11]
    (run_dir / "summary.json").write_text(json.dumps(data))
    assert [r["episode_index"] for r in load_run(run_dir).rows] == list(range(13))


def test_resolve_run_dir(tmp_path: Path, isolated_dirs: dict[str, Path]) -> None:
    a, _ = rr.write_pair(tmp_path)
    assert resolve_run_dir(str(a)) == a.resolve()
    assert resolve_run_dir("20250101_130000", outputs=tmp_path) == \
        tmp_path.resolve() / "eval_runs" / "20250101_130000"
    rr.write_run(isolated_dirs["outputs"] / "eval_runs" / "20250102_000000", rr.rows_a(),
                 graph_name="bot")  # the default root: $EVALTUI_OUTPUTS
    assert resolve_run_dir("20250102_000000").name == "20250102_000000"
    with pytest.raises(RunDirError, match="no run 20250101_140000 under"):
        resolve_run_dir("20250101_140000", outputs=tmp_path)
    with pytest.raises(RunDirError, match="neither a run dir nor a run id"):
        resolve_run_dir(str(tmp_path / "nope"))
    with pytest.raises(RunDirError, match="not a run dir"):
        load_run(tmp_path)
