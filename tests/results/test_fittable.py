"""Command tables at 80 columns (issue 25): ids, states and numbers whole, one line a row,
columns left out by priority when even cut free text does not fit."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from evaltui.api.models import EpisodeRow, Run
from evaltui.commands.runs import episodes_table, runs_table
from evaltui.results.tablewriter import one_line

TRACEBACK_ERROR = ("cannot build the graph's nodesets: workers cannot start: Traceback (most "
                   "recent call last):\n  File \"/x/bot.py\", line 39, in __init__\n    raise "
                   "ValueError(...)\nValueError: noise must be in [0, 1], got 5")


def a_run(run_id: str, state: str, sr: float | None = None, error: str | None = None,
          graph: str = "babyai-bot") -> Run:
    summary = {"run_id": run_id, "graph_name": graph, "dataset": "babyai",
               "split": "GoToObjMaze", "episodes_total": 500, "episodes_finished": 500,
               "metrics": {"success": sr} if sr is not None else {}, "error": error,
               "status": "done"}
    return Run.model_validate({"run_id": run_id, "state": state, "run_dir": f"/o/{run_id}",
                               "summary": summary})


RUNS = [a_run("20261201_085901_2", "running", 0.12345),
        a_run("20261201_085901_3", "cancelled", 0.5),
        a_run("20261201_085901", "failed", error=TRACEBACK_ERROR),
        a_run("20261201_085900", "done", 1.0, graph="babyai-noisy-bot-with-a-long-name")]


def rendered(renderable: Any, width: int) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [80, 60, 120])
def test_ls_keeps_ids_states_and_sr_whole_one_line_a_run(width: int) -> None:
    lines = rendered(runs_table(RUNS, width=width), width)
    assert len(lines) == 1 + len(RUNS)  # a header, then one line per run
    assert all(len(line) <= width for line in lines)
    for line, run in zip(lines[1:], RUNS, strict=True):
        assert line.split()[:2] == [run.run_id, run.state.value]
    assert "0.123" in lines[1] and "1.000" in lines[4]


def test_ls_at_80_columns_keeps_what_fits_of_the_free_text() -> None:
    lines = rendered(runs_table(RUNS), 80)
    assert lines[0].split() == ["run", "state", "graph", "data", "episodes", "SR", "note"]
    assert "500/500" in lines[1]
    assert "…" in lines[3]  # the failed run's note is cut, not wrapped onto more lines


def test_a_narrow_terminal_leaves_the_least_needed_columns_out() -> None:
    lines = rendered(runs_table(RUNS, width=40), 40)
    assert lines[0].split() == ["run", "state", "SR"]
    assert lines[1].split() == ["20261201_085901_2", "running", "0.123"]


def test_a_traceback_folds_to_what_it_says() -> None:
    assert one_line(TRACEBACK_ERROR) == ("cannot build the graph's nodesets: workers cannot "
                                         "start: ValueError: noise must be in [0, 1], got 5")
    assert one_line("first line\nsecond line") == "first line"
    assert one_line(None) == ""
    wide = rendered(runs_table(RUNS, width=250), 250)
    assert wide[3].endswith("workers cannot start: ValueError: noise must be in [0, 1], got 5")


def test_show_episodes_one_line_each_at_80_columns() -> None:
    rows = [EpisodeRow.model_validate({
        "episode_index": i, "episode_id": f"GoToObjMaze-{i:04d}", "status": "error",
        "scene_id": f"BabyAI-GoToObjMaze-v0:seed={i}", "metrics": {"success": 0.0},
        "step_count": 12, "elapsed_sec": 1.25,
        "error": "Traceback (most recent call last):\n  File x\nKeyError: 'obs'"})
        for i in (7, 1234)]
    lines = rendered(episodes_table(rows), 80)
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines)
    assert lines[2].split()[:5] == ["1234", "error", "0.000", "12", "1.2"]
    assert lines[1].split()[:2] == ["7", "error"] and "KeyError: 'obs'" in lines[1]


def test_a_log_line_is_whole_when_piped_and_cut_at_the_terminal_width() -> None:
    from evaltui.commands.runs import format_log_record

    outputs = {"obs": {"mission": "go to the red ball " * 12}, "reward": 0.0, "done": False}
    record = {"step": 3, "event": "fire", "node": "env_step", "dur_ms": 1.5, "outputs": outputs}
    whole = format_log_record(record)
    assert whole.endswith('"reward": 0.0, "done": false}') and len(whole) > 250
    cut = format_log_record(record, 80)
    assert len(cut) == 80 and cut.endswith("…") and whole.startswith(cut[:-1])
