"""The compare screen (marks on the queue, results.compare's numbers, replays of flipped
episodes), the palette's commands, and ``evaltui open``."""

from __future__ import annotations

from pathlib import Path

import pytest
from comparefixtures import FLIPPED_ID, GAINED, LOST, flipped_run
from textual.widgets import DataTable
from tuihelpers import SIZE, wait_for

from evaltui.cli import build_parser, main
from evaltui.rundir.layout import episode_dir
from evaltui.tui.screens.ask_number import AskNumberScreen
from evaltui.tui.screens.compare import CompareScreen
from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.screens.run import RunScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.runs_table import RunsTable

pytestmark = pytest.mark.anyio


async def mark_and_compare(pilot, run_a: str, run_b: str) -> CompareScreen:
    app = pilot.app
    table = app.screen.query_one(RunsTable)
    await wait_for(lambda: table.run(run_a) is not None and table.run(run_b) is not None,
                   what="both runs listed")
    for run_id in (run_a, run_b):
        table.move_cursor(row=table.get_row_index(run_id))
        await pilot.pause()
        await pilot.press("m")
    await pilot.press("x")
    await wait_for(lambda: isinstance(app.screen, CompareScreen), what="the compare screen")
    return app.screen


async def test_compare_shows_the_flips_and_opens_either_replay(runs, make_backend,
                                                               app_factory) -> None:
    run_b = flipped_run(runs["done"])
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        screen = await mark_and_compare(pilot, runs["done"].name, FLIPPED_ID)
        await wait_for(lambda: screen.result is not None, timeout=20, what="the comparison")
        result = screen.result
        assert result is not None and result.n_pairs == 20
        assert [f.episode_id for f in result.lost] == [f"GoToLocal-{i:04d}" for i in LOST]
        assert [f.episode_id for f in result.gained] == [f"GoToLocal-{i:04d}" for i in GAINED]
        metrics = screen.query_one("#compare-metrics", DataTable)
        assert [str(metrics.get_row_at(i)[0]) for i in range(metrics.row_count)][:2] == \
            ["success", "spl"]
        success = metrics.get_row_at(0)
        assert str(success[3]) == f"{(len(GAINED) - len(LOST)) / 20:+.3f}"
        assert str(success[5]) == "20"
        test = str(screen.query_one("#compare-test").render())
        assert f"p = {result.mcnemar.p_value:.4g}" in test  # type: ignore[union-attr]
        flips = screen.query_one("#compare-flips", DataTable)
        assert flips.row_count == len(LOST) + len(GAINED)
        await pilot.press("enter")  # B's replay by default
        await wait_for(lambda: isinstance(app.screen, ReplayScreen), what="B's replay")
        assert app.screen.ep_dir == episode_dir(run_b, LOST[0])  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait_for(lambda: app.screen is screen)
        await pilot.press("a")
        await wait_for(lambda: isinstance(app.screen, ReplayScreen), what="A's replay")
        assert app.screen.ep_dir == episode_dir(runs["done"], LOST[0])  # type: ignore[attr-defined]


async def test_compare_says_the_episode_sets_differ_and_offers_intersect(
        runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        screen = await mark_and_compare(pilot, runs["done"].name, runs["cancelled"].name)
        await wait_for(lambda: screen.mismatch, timeout=20, what="the mismatch")
        text = str(screen.query_one("#compare-test").render())
        assert "episode sets differ" in text and "Press i" in text
        await pilot.press("i")
        await wait_for(lambda: screen.result is not None, timeout=20, what="the intersection")
        assert screen.result is not None and screen.result.n_pairs == 6
        assert len(screen.result.dropped_a) == 14


async def test_x_without_two_marks_says_what_to_do(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.screen.query_one(RunsTable).row_count > 0)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, QueueScreen)
        assert any("mark two runs" in str(n.message) for n in app._notifications)


async def test_palette_runs_the_screen_actions(runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.screen.query_one(RunsTable).row_count > 0)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"submit a run")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, SubmitScreen), what="the submit form")
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, QueueScreen))
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*f"open run {runs['done'].name}")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, RunScreen), what="the run screen")
        assert app.screen.run_dir == runs["done"]  # type: ignore[attr-defined]


async def test_palette_jumps_to_an_episode(runs, app_factory) -> None:
    app = app_factory(run_dir=runs["done"])
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"jump to episode")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, AskNumberScreen), what="the question")
        await pilot.press("1", "2", "enter")
        await wait_for(lambda: isinstance(app.screen, ReplayScreen), what="the replay")
        assert app.screen.ep_dir == episode_dir(runs["done"], 12)  # type: ignore[attr-defined]


def test_open_refuses_a_dir_that_is_not_a_run(tmp_path: Path, capsys) -> None:
    assert main(["open", str(tmp_path)]) == 2
    assert "is not a run dir" in capsys.readouterr().err
    assert main(["open", "no-such-run"]) == 2


def test_open_refuses_an_unknown_theme(runs, capsys) -> None:
    assert main(["open", str(runs["done"]), "--theme", "neon"]) == 2
    assert "unknown theme" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["replay", "EP"], ["open", "RUN"], ["demo"],
                                     ["--attach", "127.0.0.1:1"]])
def test_the_global_theme_reaches_every_command_that_opens_the_tui(command) -> None:
    args = build_parser().parse_args(["--theme", "light", *command])
    assert args.theme == "light"
    after = build_parser().parse_args([*command, "--theme", "dark"])
    assert after.theme == "dark"
