"""The queue screen driven by keys, over a real (not ticking) JobScheduler."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from textual.widgets import Input
from tuihelpers import ALL_RUNS, SIZE, open_submit, queue_ready, runs_table, select_run, wait_for

from evaltui.contract.states import RunState
from evaltui.tui.screens.confirm import ConfirmScreen
from evaltui.tui.screens.help import HelpScreen
from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.run import RunScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable

pytestmark = pytest.mark.anyio


def state_of(app, run_id: str) -> RunState | None:
    run = runs_table(app).run(run_id)
    return run.state if run else None


async def test_submit_adds_a_queued_row(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await open_submit(pilot)
        app.screen.query_one("#episodes", Input).value = "3"
        await pilot.press("ctrl+s")
        await wait_for(lambda: isinstance(app.screen, QueueScreen), timeout=20,
                       what="the form to close")
        await wait_for(lambda: runs_table(app).row_count == ALL_RUNS + 1, what="the new row")
        new = set(runs_table(app)._runs) - {p.name for p in runs.values()}
        assert len(new) == 1
        assert state_of(app, new.pop()) is RunState.QUEUED


async def test_submit_with_a_short_step_budget_warns(runs, make_backend, app_factory) -> None:
    """A step budget below the env's own limit is allowed but said at submit."""
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await open_submit(pilot)
        app.screen.query_one("#episodes", Input).value = "3"
        app.screen.query_one("#step_budget", Input).value = "10"
        await pilot.press("ctrl+s")
        await wait_for(lambda: isinstance(app.screen, QueueScreen), timeout=20,
                       what="the form to close")
        await wait_for(lambda: any("below the env's own step limit (64)" in str(n.message)
                                   for n in app._notifications), what="the warning toast")


async def test_submit_shows_backend_errors_inline(runs, make_backend, app_factory) -> None:
    """A split that does not exist passes pydantic but not the backend's full check."""
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await open_submit(pilot)
        app.screen.query_one("#split", Input).value = "NoSuchSplit"
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#split-error")
        await wait_for(lambda: error.display, timeout=20, what="the inline error")
        assert "NoSuchSplit" in str(error.render())
        assert isinstance(app.screen, SubmitScreen)
        await pilot.press("escape")
        assert runs_table(app).row_count == ALL_RUNS


def test_split_choices_come_from_the_dataset(tmp_path) -> None:
    from evaltui.benchmarks.babyai import SPLITS
    from evaltui.tui.screens.submit import dataset_splits

    assert dataset_splits("babyai") == list(SPLITS)
    (tmp_path / "train.jsonl").write_text("")
    (tmp_path / "val.jsonl").write_text("")
    assert dataset_splits(str(tmp_path)) == ["train", "val"]
    assert dataset_splits(str(tmp_path / "val.jsonl")) == ["val"]
    assert dataset_splits("") == [] and dataset_splits(str(tmp_path / "nothing")) == []


async def test_split_field_suggests_the_typed_datasets_splits(runs, make_backend, app_factory,
                                                              tmp_path) -> None:
    (tmp_path / "holdout.jsonl").write_text("")
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await open_submit(pilot)
        split = app.screen.query_one("#split", Input)
        split.value = ""
        split.focus()
        await pilot.press("G", "o", "T", "o", "O")
        await wait_for(lambda: split._suggestion == "GoToObjMaze", what="a BabyAI split")
        app.screen.query_one("#dataset", Input).value = str(tmp_path)
        split.value = ""
        split.focus()
        await pilot.press("h")
        await wait_for(lambda: split._suggestion == "holdout", what="the directory's split")
        await pilot.press("right")  # accepts the suggestion
        assert split.value == "holdout"


async def test_cancel_asks_then_cancels(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    run_id = runs["queued"].name
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await select_run(pilot, run_id)
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(lambda: isinstance(app.screen, QueueScreen))
        assert state_of(app, run_id) is RunState.QUEUED
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(lambda: state_of(app, run_id) is RunState.CANCELLED,
                       what="the row to read cancelled")


async def test_filter_narrows_and_escape_clears(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await pilot.press("slash", *"failed")
        assert runs_table(app).row_count == 1
        assert runs_table(app).selected.run_id == runs["failed"].name
        await pilot.press("enter")  # leaves the box; the filter stays
        assert runs_table(app).row_count == 1
        await pilot.press("escape")
        assert runs_table(app).row_count == ALL_RUNS


async def test_corrupt_summary_is_badged_and_ui_keeps_working(runs, make_backend,
                                                              app_factory) -> None:
    app = app_factory(make_backend())
    run_id = runs["corrupt"].name
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        row = runs_table(app).run(run_id)
        assert row is not None and row.file_error and "summary.json" in (row.error or "")
        await select_run(pilot, run_id)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, RunScreen))
        header = app.screen.query_one("#run-header")
        await wait_for(lambda: "⚠" in str(header.render()), what="the run screen badge")
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, QueueScreen))
        await select_run(pilot, runs["done"].name)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, RunScreen) and
                       app.screen.query_one(EpisodesTable).row_count == 20)


async def test_priority_keys_move_a_queued_run(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    low, high = runs["queued_low"].name, runs["queued"].name
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)

        def priority(run_id: str) -> int:
            run = runs_table(app).run(run_id)
            return run.priority if run else -999

        def order() -> list[str]:
            return [str(r.key.value) for r in runs_table(app).ordered_rows]

        assert order().index(high) < order().index(low)
        await select_run(pilot, low)
        await pilot.press(*["plus"] * 6)  # 0 -> 6 overtakes the other queued run (5)
        await wait_for(lambda: priority(low) == 6, what="priority 6")
        assert order().index(low) < order().index(high)
        assert runs_table(app).selected.run_id == low  # the selection moved with the row
        await pilot.press("minus")
        await wait_for(lambda: priority(low) == 5, what="priority 5")
        await select_run(pilot, runs["done"].name)
        await pilot.press("plus")  # not queued: refused with a message, nothing breaks
        await pilot.pause(0.2)
        assert any("queued" in str(n.message) for n in app._notifications)


async def test_lock_toggles_the_scheduler_mode(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        screen = app.screen
        assert screen.snapshot.scheduler.mode == "paused"
        await pilot.press("l")
        await wait_for(lambda: screen.snapshot.scheduler.mode == "locked", what="locked")
        assert screen.snapshot.scheduler.lock_owner == "tester"
        await pilot.press("l")
        await wait_for(lambda: screen.snapshot.scheduler.mode == "paused", what="unlocked")


async def test_resume_requeues_a_finished_run(runs, make_backend, app_factory) -> None:
    """The done fixture has an error and a timeout episode: resume queues it again."""
    app = app_factory(make_backend())
    run_id = runs["done"].name
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await select_run(pilot, run_id)
        await pilot.press("R")
        await wait_for(lambda: state_of(app, run_id) is RunState.QUEUED, timeout=20,
                       what="the resumed run queued")
        assert not (runs["done"] / "_DONE").exists()


async def test_help_lists_the_screen_keys(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen))
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(app.screen._render_help())
        text = console.export_text()
        for words in ("Submit", "Cancel", "Priority", "Resume", "Lock", "Filter", "Sort",
                      "Mark", "Compare"):
            assert words in text
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, QueueScreen))


async def test_run_screen_of_a_queued_run_shows_its_episode_total(runs, make_backend,
                                                                   app_factory) -> None:
    # A queued run has no summary.json; the screen showed "0/0 episodes".
    from evaltui.tui.widgets.run_progress import RunProgress

    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await select_run(pilot, runs["queued"].name)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, RunScreen))
        progress = app.screen.query_one(RunProgress)
        await wait_for(lambda: progress.progress is not None, what="the progress panel")
        assert progress.progress.total == 20
