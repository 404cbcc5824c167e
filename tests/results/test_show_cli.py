"""``evaltui show RUN_DIR``: a run dir read locally, and --format tables for a paper."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import resultruns as rr

from evaltui.cli import main

METRICS = {"metrics": {"success": 0.25, "spl": 0.2, "path_length": 5.5},
           "metrics_ci95": {"success": [0.0, 0.55], "spl": [0.01, 0.39],
                            "path_length": [3.9, 7.1]},
           "metrics_n": {"success": 12, "spl": 12, "path_length": 11},
           "error_count": 1}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return rr.write_run(tmp_path / "20250101_120000", rr.rows_a(), graph_name="bot",
                        summary_extra=METRICS)


def test_format_prints_only_the_table(run_dir: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    # No backend runs in this test: a dir is read locally.
    assert main(["show", str(run_dir), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "| metric | mean | 95% CI | n |", "|:---|---:|---:|---:|",
        "| success | 0.250 | [0.000, 0.550] | 12 |", "| spl | 0.200 | [0.010, 0.390] | 12 |",
        "| path_length | 5.500 | [3.900, 7.100] | 11 |", "",
        "errors count as failures (1 of 12 episodes errored)"]
    assert main(["show", str(run_dir), "--format", "csv", "--digits", "1"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows[2] == {"metric": "path_length", "mean": "5.5", "ci_low": "3.9",
                       "ci_high": "7.1", "n": "11"}
    assert main(["show", str(run_dir), "--format", "latex"]) == 0
    tex = capsys.readouterr().out
    assert tex.startswith("\\begin{tabular}{lrrr}\n\\toprule") and "path\\_length" in tex


def test_local_show_for_people_and_as_json(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["show", str(run_dir), "--episodes"]) == 0
    out = capsys.readouterr().out
    assert "run 20250101_120000" in out and "graph: bot" in out
    assert "path_length" in out and "GoToLocal-v0:seed=11" in out
    assert main(["show", str(run_dir), "--json", "--episodes"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run_id"] == "20250101_120000" and doc["run_dir"] == str(run_dir.resolve())
    assert doc["summary"]["metrics"] == METRICS["metrics"]
    assert [e["status"] for e in doc["episodes"]] == rr.STATUS_A + ["cancelled"]


def test_local_show_errors(tmp_path: Path, run_dir: Path,
                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / "20250101_120000"), "--json", "--format", "md"]) == 2
    assert "not both" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["show", str(empty)]) == 2
    assert "not a run dir" in capsys.readouterr().err
    bare = rr.write_run(tmp_path / "bare", rr.rows_b(), graph_name="x")  # metrics: {}
    assert main(["show", str(bare), "--format", "md"]) == 1
    assert "has no metrics yet" in capsys.readouterr().err


def test_plain_show_gives_n_per_metric_and_says_errors_count_as_failures(
        run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "errors count as failures" in out
    lines = [ln for ln in out.splitlines() if "path_length" in ln]
    assert lines and lines[0].split("│")[4].strip() == "11"  # metric | mean | CI | n


def test_a_symlinked_episode_json_out_of_the_run_dir_is_not_shown(
        run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``evaltui show`` of a copied run dir with an episode.json that leads out of it: the
    episode is unreadable, nothing of the file outside is printed."""
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"episode_index": 3, "status": "ok", "instruction": "SECRET",
                                  "metrics": {"success": 1.0}}))
    episode = run_dir / "episodes" / "ep0003" / "episode.json"
    episode.unlink()
    episode.symlink_to(secret)
    (run_dir / "summary.json").unlink()  # the rows come from the episode files alone
    assert main(["show", str(run_dir), "--episodes"]) == 0
    out = capsys.readouterr().out
    assert "SECRET" not in out
    row = next(line.split() for line in out.splitlines() if line.startswith(" 3 "))
    assert row[1] == "unreadable" and "1.000" not in row  # not the outside file's success
