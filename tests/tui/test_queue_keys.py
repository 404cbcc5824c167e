"""The queue screen driven by keys over a real (not ticking) scheduler:
one-line header, footer keys that act, the submit form's draft and errors, the priority
toast, the detail pane, columns by width, sort, marks and empty states."""

from __future__ import annotations

import pytest
from textual.widgets import Input
from textual.widgets._footer import FooterKey
from tuihelpers import ALL_RUNS, SIZE, open_submit, queue_ready, runs_table, select_run, wait_for

from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.queue_lines import RunDetail, RunsCaption, SchedulerHeader

pytestmark = pytest.mark.anyio


def footer_keys(app) -> set[str]:
    return {k.key for k in app.screen.query(FooterKey)}


async def test_header_stays_one_line_at_120_with_the_lock_held(runs, make_backend,
                                                               app_factory) -> None:
    backend = make_backend()
    backend.owner = "evaltui TUI (someone, pid 4242424) on a-long-hostname.example.org"
    app = app_factory(backend)
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await pilot.press("l")
        header = app.screen.query_one(SchedulerHeader)
        await wait_for(lambda: "locked" in str(header.content), what="the lock")
        await pilot.pause()
        assert header.region.height == 1
        assert "\n" not in str(header.content)


async def test_footer_hides_the_run_keys_while_typing_a_filter(runs, make_backend,
                                                               app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await select_run(pilot, runs["queued"].name)
        assert {"plus", "c", "s"} <= footer_keys(app)
        assert "escape" not in footer_keys(app)  # no filter open: esc does nothing here
        await pilot.press("slash")
        await pilot.pause()
        keys = footer_keys(app)
        assert not keys & {"plus", "minus", "c", "s", "R", "l"}, keys
        assert "escape" in keys
        await pilot.press("escape")
        await pilot.pause()
        assert "plus" in footer_keys(app)


async def test_footer_shows_only_what_the_selected_run_takes(runs, make_backend,
                                                             app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await select_run(pilot, runs["done"].name)
        keys = footer_keys(app)
        assert "R" in keys and "plus" not in keys and "c" not in keys and "x" not in keys
        await pilot.press("plus")  # hidden, but it still says why it does nothing
        await pilot.pause()
        assert any("only a queued run" in str(n.message) for n in app._notifications)


async def test_submit_form_keeps_its_values_across_escape(runs, make_backend,
                                                          app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await open_submit(pilot)
        app.screen.query_one("#episodes", Input).value = "7"
        app.screen.query_one("#split", Input).value = "GoTo"
        await pilot.pause()
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, QueueScreen))
        await pilot.press("s")
        await wait_for(lambda: isinstance(app.screen, SubmitScreen))
        assert app.screen.query_one("#episodes", Input).value == "7"
        assert app.screen.query_one("#split", Input).value == "GoTo"


async def test_an_empty_workers_field_is_not_submitted_as_one(runs, make_backend,
                                                              app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await open_submit(pilot)
        app.screen.query_one("#workers", Input).value = ""
        await pilot.press("ctrl+s")
        await pilot.pause(0.3)
        assert isinstance(app.screen, SubmitScreen)
        error = app.screen.query_one("#workers-error")
        assert error.display and "required" in str(error.render())
        await pilot.press("escape")
        await pilot.pause(0.3)
        assert runs_table(app).row_count == ALL_RUNS  # nothing was submitted


async def test_a_field_error_goes_when_the_field_changes(runs, make_backend,
                                                         app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await open_submit(pilot)
        field = app.screen.query_one("#episodes", Input)
        field.value = "0"
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#episodes-error")
        await wait_for(lambda: bool(error.display), what="the episodes error")
        field.value = "5"
        await pilot.pause()
        assert not error.display


async def test_the_priority_toast_says_the_new_value(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await select_run(pilot, runs["queued_low"].name)
        await pilot.press("plus", "plus")
        await wait_for(lambda: any("now 2" in str(n.message) for n in app._notifications),
                       what="the toast with the new priority")


async def test_the_detail_pane_shows_the_whole_reason_and_the_vram_decision(
        runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        await queue_ready(app)
        await select_run(pilot, runs["queued"].name)
        run = runs_table(app).selected
        assert run is not None and run.waiting_reason
        pane = app.screen.query_one(RunDetail)
        text = str(pane.content)
        assert run.waiting_reason in text  # whole, wrapped, not cut to the column
        assert "asked 30,720 MiB" in text and f"{run.estimate_source} " in text
        assert pane.region.height >= 3


@pytest.mark.parametrize(("size", "hidden"), [((80, 24), "why"), ((200, 50), None)])
async def test_columns_are_chosen_by_width(size, hidden, runs, make_backend,
                                           app_factory) -> None:
    """At 80 columns the run id stays (same-named runs told apart) and the reason goes
    to the pane below (the selected run's, whole)."""
    app = app_factory(make_backend())
    async with app.run_test(size=size) as pilot:
        await queue_ready(app)
        await pilot.pause()
        t = runs_table(app)
        keys = t.column_keys
        assert {"state", "graph", "progress", "sr", "run_id"} <= set(keys)
        if hidden:
            assert hidden not in keys
        widths = sum(c.get_render_width(t) for c in t.columns.values())
        assert widths <= size[0]
        assert widths >= size[0] - 4  # no empty band on the right: names take it
        longest = max(len(r.graph) for r in t.all_runs)
        assert t.columns["graph"].width >= min(longest, 12)  # type: ignore[index]


async def test_o_cycles_the_sort_and_the_header_shows_it(runs, make_backend,
                                                         app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        await pilot.press("o")
        await pilot.pause()
        t = runs_table(app)
        assert str(t.columns["graph"].label) == "name ▼"  # type: ignore[index]
        names = [t.run(str(r.key.value)).graph for r in t.ordered_rows]  # type: ignore[union-attr]
        assert names == sorted(names, key=str.lower)
        assert "by name" in str(app.screen.query_one(RunsCaption).content)


async def test_empty_states_say_the_next_step(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        empty = app.screen.query_one("#runs-empty")
        assert not empty.display
        await pilot.press("slash", *"zzzz")
        await pilot.pause()
        assert empty.display and "no run matches “zzzz”" in str(empty.render())
        assert "esc" in str(empty.render())


async def test_no_runs_says_how_to_start_one(make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        empty = app.screen.query_one("#runs-empty")
        await wait_for(lambda: bool(empty.display), what="the empty message")
        await pilot.pause()
        assert "press s to submit" in str(empty.render())
        assert "evaltui eval --demo" in str(empty.render())


async def test_marks_are_visible_and_a_third_replaces_the_oldest(runs, make_backend,
                                                                 app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await queue_ready(app)
        t = runs_table(app)
        for name in ("done", "cancelled", "failed"):
            await select_run(pilot, runs[name].name)
            await pilot.press("m")
        await pilot.pause()
        assert t.marks == [runs["cancelled"].name, runs["failed"].name]
        marks = {str(t.get_cell(rid, "mark")) for rid in t.marks}
        assert marks == {"A", "B"}
        assert "x" in footer_keys(app)
