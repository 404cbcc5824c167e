"""One quit key on every screen, shown in every footer at 80 columns with the screen's
core keys; help names keys as they are typed; the list keys people expect of tables."""

from __future__ import annotations

import pytest
from everyscreen import CORE, SCREENS, build_app, footer_keys, open_screen
from textual.containers import VerticalScroll
from tuihelpers import wait_for

from evaltui.tui.screens.help import HelpScreen
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.widgets.episodes_table import EpisodesTable
from evaltui.tui.widgets.keys_footer import FooterEntry, fit_keys
from evaltui.tui.widgets.runs_table import RunsTable

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("name", SCREENS)
async def test_the_quit_key_in_the_footer_quits(name, runs, make_backend, app_factory) -> None:
    app = build_app(name, runs, make_backend, app_factory)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(name, pilot, runs)
        keys = footer_keys(app)
        quit_keys = [key for key, words, _ in keys if words == "Quit"]
        assert quit_keys, f"no quit key in the {name} footer: {keys}"
        await pilot.press({"^q": "ctrl+q"}.get(quit_keys[0], quit_keys[0]))
        await wait_for(lambda: app.return_code is not None, what=f"{name}: quit")


@pytest.mark.parametrize("name", SCREENS)
async def test_the_footer_keeps_the_core_keys_at_80_columns(name, runs, make_backend,
                                                           app_factory) -> None:
    app = build_app(name, runs, make_backend, app_factory)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(name, pilot, runs)
        keys = footer_keys(app)
        words = [w for _, w, _ in keys]
        missing = [w for w in (*CORE[name], "Quit") if w not in words]
        assert not missing, f"{name} footer lacks {missing}: {keys}"
        assert all(right <= 80 for _, _, right in keys), f"{name} footer is cut: {keys}"


async def test_q_quits_from_the_run_screen_and_ctrl_c_names_it(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["running"])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+c")
        await wait_for(lambda: bool(app._notifications), what="the ctrl+c hint")
        assert "Press [b]q[/b] to quit" in next(iter(app._notifications)).message
        await pilot.press("q")
        await wait_for(lambda: app.return_code is not None, what="quit")


async def test_help_shows_keys_as_they_are_typed(runs, app_factory) -> None:
    app = app_factory(replay_dir=runs["done"] / "episodes" / "ep0000")
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.pause()
        text = " ".join(str(s.render()) for s in app.screen.query("Static"))
        shot = app.export_screenshot()
        assert "left_square_bracket" not in shot and "question_mark" not in shot, text
        assert "[/]" in shot and "home/end" in shot


def test_the_footer_drops_the_lowest_ranked_keys_first() -> None:
    entries = [FooterEntry("a", "a", "Alpha", "alpha"), FooterEntry("b", "b", "Beta", "beta"),
               FooterEntry("?", "?", "Help", "help"), FooterEntry("q", "q", "Quit", "quit")]
    palette = FooterEntry("ctrl+p", "^p", "palette", "command_palette")
    shown, with_palette = fit_keys(entries, 80, ("beta",), palette)
    assert [e.action for e in shown] == ["alpha", "beta", "help", "quit"] and with_palette
    shown, with_palette = fit_keys(entries, 22, ("beta",), palette)
    assert [e.action for e in shown] == ["beta", "help", "quit"] and not with_palette
    shown, _ = fit_keys(entries, 7, ("beta",), palette)
    assert [e.action for e in shown] == ["quit"]


async def test_home_end_j_k_move_the_episode_table_cursor(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["done"])
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(EpisodesTable)
        await wait_for(lambda: table.row_count == 20, what="episode rows")
        await pilot.press("end")
        await wait_for(lambda: table.cursor_row == 19, what="end: the last row")
        # Scrolled to it on the next refresh (CI's loaded machine checked before it).
        await wait_for(table.cursor_on_screen, timeout=15, what="end: the last row on screen")
        await pilot.press("k", "k")
        await wait_for(lambda: table.cursor_row == 17, what="k k")
        await pilot.press("home", "j")
        await wait_for(lambda: table.cursor_row == 1, what="home j")


async def test_end_goes_to_the_last_run_in_the_queue(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(RunsTable)
        await wait_for(lambda: table.row_count == 9, what="runs")
        await pilot.press("end")
        await wait_for(lambda: table.cursor_row == 8, what="end: the last run")
        await pilot.press("home")
        await wait_for(lambda: table.cursor_row == 0, what="home: the first run")


async def test_replay_home_end_work_on_a_step_taller_than_its_panel(runs,
                                                                    app_factory) -> None:
    """At 80x18 the first step's records overflow their panel: home/end still step."""
    app = app_factory(replay_dir=runs["done"] / "episodes" / "ep0000")
    async with app.run_test(size=(80, 18)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await wait_for(lambda: screen.indexed and bool(screen.firings), what="first step")
        await pilot.pause()
        await pilot.press("end")
        await wait_for(lambda: screen.step == screen.last_step == 4, what="end: last step")
        await pilot.press("home")
        await wait_for(lambda: screen.step == 0, what="home: first step")
        await pilot.press("right")
        await wait_for(lambda: screen.step == 1, what="→")


async def test_help_at_80x24_shows_every_key_without_scrolling(runs, make_backend,
                                                               app_factory) -> None:
    """The queue's 17 keys in two columns at 80x24; ``-`` shown once, inside ``+/-``."""
    app = app_factory(make_backend())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.pause()
        scroll = app.screen.query_one(VerticalScroll)
        assert scroll.max_scroll_y == 0, "help scrolls at 80x24"
        shot = app.export_screenshot().replace("&#160;", " ")
        assert "+/-" in shot and "Priority -" not in shot and "ctrl+p" in shot
        assert "Clear filter" in shot and "Compare" in shot


async def test_the_cursor_row_stays_on_screen_when_the_table_is_rebuilt(runs, app_factory) -> None:
    """A resize that changes the columns rebuilds the table: the cursor row (the last,
    after ``end``) is brought back into view, not left below a view reset to the top
    (what CI's full run hit: a late layout pass rebuilt the table after ``end``)."""
    app = app_factory(run_dir=runs["done"])
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(EpisodesTable)
        await wait_for(lambda: table.row_count == 20, what="episode rows")
        await pilot.press("end")
        await wait_for(table.cursor_on_screen, timeout=15, what="end: the last row on screen")
        columns = table.visible_columns
        await pilot.resize_terminal(200, 24)
        await wait_for(lambda: table.visible_columns != columns, what="the columns refit")
        await pilot.pause()
        assert table.cursor_row == 19
        await wait_for(table.cursor_on_screen, timeout=15, what="the last row on screen again")


async def test_the_cursor_row_stays_on_screen_when_the_table_gets_shorter(runs, app_factory
                                                                          ) -> None:
    """A table made shorter after ``end`` (a smaller terminal; under load, a line that
    appeared beside it after the key) still shows the cursor row: the scroll ``end`` made
    was reckoned for the old height."""
    app = app_factory(run_dir=runs["done"])
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.screen.query_one(EpisodesTable)
        await wait_for(lambda: table.row_count == 20, what="episode rows")
        await pilot.press("end")
        await wait_for(table.cursor_on_screen, timeout=15, what="end: the last row on screen")
        height = table.size.height
        await pilot.resize_terminal(80, 24)
        await wait_for(lambda: table.size.height < height, what="a shorter table")
        await pilot.pause()
        assert table.cursor_row == 19
        await wait_for(table.cursor_on_screen, what="the last row on screen still")
