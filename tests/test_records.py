"""evaltui.contract.records: what the engine writes fits its models exactly; older and newer files
still load; a file that does not fit is named instead of served half-read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from evaltui import cli
from evaltui.contract.recordparse import parse_lenient
from evaltui.contract.records import (
    EPISODE_FILENAME,
    SCHEDULER_FILENAME,
    SUMMARY_FILENAME,
    TRAJECTORY_FILENAME,
    EpisodeRow,
    SchedulerRecord,
    Summary,
    SummaryHeader,
    TrajectoryRecord,
)
from evaltui.contract.states import EpisodeStatus, RunState, SummaryStatus
from evaltui.contract.views import SpecBrief, run_view
from evaltui.graphs import builtin_graph_path
from evaltui.procs.spawn import spawn_run
from evaltui.results.runrows import load_run
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import episode_dir
from tests.runprep import prepare_run

# The field order of DESIGN §2's row, then what the run adds: readers may rely on it.
ROW_KEYS = ["episode_index", "episode_id", "scene_id", "instruction", "task", "seed", "metrics",
            "step_count", "elapsed_sec", "status", "error", "worker_id", "node",  # node: DESIGN §12
            "attempts", "finished_at", "run_id", "graph_name", "dataset", "split",
            "worker_count", "nodes"]


def no_extras(model: BaseModel) -> list[str]:
    """Fields of ``model`` (and of the models inside it) that its schema does not declare."""
    found = list(model.model_extra or {})
    for value in model.__dict__.values():
        items = value if isinstance(value, list) else [value]
        found += [k for item in items if isinstance(item, BaseModel) for k in no_extras(item)]
    return found


@pytest.fixture(scope="module")
def bot_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-episode run of the built-in bot (read-only: copy it to change it)."""
    graph = json.loads(builtin_graph_path("bot").read_text())  # type: ignore[union-attr]
    run_dir, _ = prepare_run({"graph": graph, "eval": {"episode_count": 2}},
                             tmp_path_factory.mktemp("outputs"))
    assert spawn_run(run_dir).wait(timeout=120) == 0
    return run_dir


def test_every_file_a_real_run_writes_fits_its_record(bot_run: Path) -> None:
    run_dir = bot_run

    raw = read_json(run_dir / SUMMARY_FILENAME)
    summary = Summary.model_validate(raw)
    assert summary.status is SummaryStatus.DONE and summary.episodes_finished == 2
    assert "summary_unreadable" not in raw  # a reader's note, never written by the run
    assert no_extras(summary) == []
    for index in (0, 1):
        row_raw = read_json(episode_dir(run_dir, index) / EPISODE_FILENAME)
        assert list(row_raw) == ROW_KEYS
        row = EpisodeRow.model_validate(row_raw)
        assert row.status is EpisodeStatus.OK and row.nodes and no_extras(row) == []
        assert row.model_dump(mode="json") == row_raw  # what the run wrote, field for field
        assert summary.episodes[index] == row
        traj = TrajectoryRecord.model_validate(
            read_json(episode_dir(run_dir, index) / TRAJECTORY_FILENAME))
        assert traj.episode_index == index and traj.positions and no_extras(traj) == []
    record = SchedulerRecord.model_validate(read_json(run_dir / SCHEDULER_FILENAME))
    assert record.state is RunState.STARTING and record.pid is not None
    assert no_extras(record) == []


def test_a_row_readers_mark_unreadable_fits_the_schema(bot_run: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / bot_run.name
    shutil.copytree(bot_run, run_dir)
    (episode_dir(run_dir, 1) / EPISODE_FILENAME).write_text('{"episode_index": 1, "sta')
    summary = read_json(run_dir / SUMMARY_FILENAME)
    summary["episodes"] = summary["episodes"][:1]  # written before episode 1 ended
    (run_dir / SUMMARY_FILENAME).write_text(json.dumps(summary))
    rows = load_run(run_dir).rows
    assert [EpisodeRow.model_validate(r).status for r in rows] == [EpisodeStatus.OK,
                                                                    "unreadable"]
    monkeypatch.setenv("COLUMNS", "200")
    assert cli.main(["show", str(run_dir), "--episodes"]) == 0
    assert "unreadable" in capsys.readouterr().out


def older_summary() -> dict[str, Any]:
    """A summary as versions before the results contract wrote it, plus a field from a
    version after this one."""
    return {"run_id": "20250101_000000", "graph_name": "g", "dataset": "babyai",
            "split": "GoToLocal", "worker_count": 2, "status": "done", "error": None,
            "episodes_total": 3, "episodes_finished": 3, "counts_by_status": {"ok": 3},
            "metrics": {"success": 1.0}, "metrics_ci95": {"success": None},
            "started_at": "2025-01-01T00:00:00.000+00:00", "finished_at": None,
            "elapsed_sec": 1.5, "from_the_future": {"x": 1},
            "episodes": [{"episode_index": 0, "status": "ok", "metrics": {"success": 1}},
                         {"episode_index": 1, "status": "ok", "new_row_field": True}]}


def test_older_and_newer_files_load_and_keep_what_they_do_not_know() -> None:
    summary = Summary.model_validate(older_summary())
    assert summary.metrics_n is None and summary.error_count is None  # not recorded then
    assert summary.model_extra == {"from_the_future": {"x": 1}}
    assert summary.episodes[1].model_extra == {"new_row_field": True}
    dumped = summary.model_dump(mode="json")
    assert dumped["from_the_future"] == {"x": 1}  # served on, not dropped
    assert dumped["episodes"][0]["metrics"] == {"success": 1.0}
    assert SchedulerRecord.model_validate({"state": "done", "exit_code": 0}).priority == 0


def test_a_view_names_the_record_that_does_not_fit() -> None:
    run = run_view("20250101_000000", Path("/x"), RunState.ABORTED,
                   {"state": "running", "pid": "not a pid"}, older_summary())
    assert run.scheduler is None
    assert run.error is not None and run.error.startswith("scheduler.json does not fit its "
                                                          "schema: pid:")
    assert isinstance(run.summary, SummaryHeader) and not isinstance(run.summary, Summary)
    assert "episodes" not in run.summary.model_dump()  # rows are read per episode
    bad_summary = run_view("20250101_000000", Path("/x"), RunState.DONE, None,
                           {"status": "finished?"})
    assert bad_summary.summary is None
    assert bad_summary.error == "summary.json does not fit its schema: status: Input should " \
                                "be 'running', 'done', 'failed' or 'cancelled'"
    # An error the status read found wins: it is the first thing to fix.
    assert run_view("20250101_000000", Path("/x"), RunState.DONE, {"pid": 1}, None,
                    error="summary.json is not valid JSON").error == \
        "summary.json is not valid JSON"


def test_spec_brief_reads_what_a_spec_asks_and_ignores_garbage() -> None:
    brief = SpecBrief.of({"graph": {"name": "bot"}, "eval": {"episode_indices": [3, 1, 4],
                                                             "worker_count": 4},
                          "scheduling": {"priority": 7, "exclusive_gpu": True}})
    assert (brief.graph_name, brief.episodes_total, brief.worker_count, brief.priority,
            brief.exclusive_gpu) == ("bot", 3, 4, 7, True)
    odd = SpecBrief.of({"eval": {"graph_name": 5, "episode_count": "ten", "worker_count": True},
                        "scheduling": "fast"})
    assert odd == SpecBrief()


def test_a_lenient_parse_keeps_what_fits_and_names_what_does_not() -> None:
    """The status read's parse: a hand-written scheduler.json with float timestamps still
    yields its PID; a summary with a garbled metric still yields its status."""
    sched, bad = parse_lenient(SchedulerRecord, {
        "state": "running", "pid": 4321, "pid_create_time": 17.5, "queued_at": 1.0,
        "cancel_requested_at": 2.0, "exit_code": -9})
    assert sched is not None and (sched.pid, sched.pid_create_time, sched.exit_code) == \
        (4321, 17.5, -9)
    assert sched.queued_at is None and sched.cancel_requested_at is None
    assert bad == {"queued_at", "cancel_requested_at"}
    header, bad = parse_lenient(SummaryHeader, {"status": "done", "metrics": {"spl": "x"}})
    assert header is not None and header.status is SummaryStatus.DONE and header.metrics == {}
    assert bad == {"metrics"}
    # Without its required field there is no record to keep anything in.
    assert parse_lenient(SchedulerRecord, {"state": "bogus", "pid": 5}) == \
        (None, frozenset({"state"}))
