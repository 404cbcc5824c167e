"""The replay screen driven by keys: steps, firings, errors, go-to, play, a live log."""

from __future__ import annotations

import json

import pytest
from runfixtures import log_records
from tuihelpers import SIZE, replay_opened, wait_for

from evaltui.rundir.layout import episode_dir
from evaltui.tui.screens.ask_number import AskNumberScreen
from evaltui.tui.screens.replay import ReplayScreen
from evaltui.tui.widgets.frame_view import FrameView

pytestmark = pytest.mark.anyio


async def at(screen: ReplayScreen, step: int, current: int | None = None) -> None:
    def arrived() -> bool:
        return (screen.step == step and bool(screen.firings) and
                screen.firings[0].record.get("step") == step and
                (current is None or screen.current == current))
    await wait_for(arrived, what=f"step {step}, record {current}")


async def test_steps_and_firings(runs, app_factory) -> None:
    app = app_factory(replay_dir=episode_dir(runs["done"], 0))
    async with app.run_test(size=SIZE) as pilot:
        screen = await replay_opened(app)
        assert screen.step == 0 and screen.last_step == 4
        assert screen.firings[0].event == "episode_start"
        await pilot.press("right")
        await at(screen, 1, 0)
        assert [f.record["node"] for f in screen.firings] == ["policy", "env_step"]
        await pilot.press("n")
        await at(screen, 1, 1)
        await pilot.press("n")  # past the last firing: the next step's first
        await at(screen, 2, 0)
        await pilot.press("N")  # before the first: the previous step's last
        await at(screen, 1, 1)
        await pilot.press("end")
        await at(screen, 4)
        assert [f.event for f in screen.firings][-1] == "episode_end"
        await pilot.press("right")  # clamps at the last step
        await at(screen, 4)
        await pilot.press("home", "left")
        await at(screen, 0)


async def test_frame_follows_the_step(runs, app_factory) -> None:
    app = app_factory(replay_dir=episode_dir(runs["done"], 0))
    async with app.run_test(size=SIZE) as pilot:
        screen = await replay_opened(app)
        frame = screen.query_one(FrameView)
        await wait_for(lambda: frame.path is not None)
        assert frame.path.name == "step00000_episode_start_00001.png"
        await pilot.press("right", "right", "right")
        await at(screen, 3)
        await wait_for(lambda: frame.path is not None and frame.path.name.startswith("step00003"))


async def test_error_navigation(runs, app_factory) -> None:
    app = app_factory(replay_dir=episode_dir(runs["done"], 5))
    async with app.run_test(size=SIZE) as pilot:
        screen = await replay_opened(app)
        await wait_for(lambda: screen.error_steps == frozenset({2}))
        await pilot.press("e")
        await at(screen, 2)
        assert screen.firings[screen.current].is_error
        assert "wall" in screen.firings[screen.current].record["error"]
        frame = screen.query_one(FrameView)
        await wait_for(lambda: "none at step 2" in frame.caption, what="earlier-frame caption")
        await pilot.press("home", "E")  # previous error wraps around to the last
        await at(screen, 2)


async def test_no_errors_says_so(runs, app_factory) -> None:
    app = app_factory(replay_dir=episode_dir(runs["done"], 0))
    async with app.run_test(size=SIZE) as pilot:
        screen = await replay_opened(app)
        await pilot.press("e")
        await pilot.pause()
        assert screen.step == 0
        assert any("no errors" in str(n.message) for n in app._notifications)


async def test_go_to_step(runs, app_factory) -> None:
    app = app_factory(replay_dir=episode_dir(runs["done"], 0))
    async with app.run_test(size=SIZE) as pilot:
        screen = await replay_opened(app)
        await pilot.press("g")
        await wait_for(lambda: isinstance(app.screen, AskNumberScreen))
        await pilot.press("ctrl+u", "9", "enter")  # out of range: refused, stays open
        assert isinstance(app.screen, AskNumberScreen)
        await pilot.press("ctrl+u", "3", "enter")
        await wait_for(lambda: app.screen is screen)
        await at(screen, 3)


async def test_play_advances_and_pauses(runs, app_factory) -> None:
    app = app_factory(replay_dir=episode_dir(runs["done"], 0))
    async with app.run_test(size=SIZE) as pilot:
        screen = await replay_opened(app)
        await pilot.press("space")
        await wait_for(lambda: screen.step >= 2, what="playback")
        await pilot.press("space")
        stopped = screen.step
        await pilot.pause(0.6)
        assert screen.step == stopped
        await pilot.press("space")
        await wait_for(lambda: screen.step == 4, what="the end")
        await pilot.pause(0.4)
        assert screen._player is None  # stops by itself at the last step


async def test_live_log_with_truncated_last_line(tmp_path, app_factory) -> None:
    """An episode still running: no episode.json, a half-written last line. The replay
    shows what is complete and picks up later lines by itself."""
    ep = tmp_path / "ep0000"
    ep.mkdir()
    lines = [json.dumps(r, separators=(",", ":")) for r in log_records(0, 6, None)]
    (ep / "log.jsonl").write_text("\n".join(lines[:5]) + "\n" + lines[5][:30])
    app = app_factory(replay_dir=ep)
    async with app.run_test(size=SIZE) as pilot:
        screen = await replay_opened(app)
        assert screen.last_step == 2
        assert "not written yet" in (screen.replay.episode_error or "")
        with open(ep / "log.jsonl", "a") as fh:
            fh.write(lines[5][30:] + "\n" + "\n".join(lines[6:]) + "\n")
        await wait_for(lambda: screen.last_step == 6, timeout=4, what="the log to grow")
        await pilot.press("end")
        await at(screen, 6)


async def test_escape_quits_standalone_replay(runs, app_factory) -> None:
    app = app_factory(replay_dir=episode_dir(runs["done"], 0))
    async with app.run_test(size=SIZE) as pilot:
        await replay_opened(app)
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_code == 0
