"""The GPU meters keep a short history of used and reserved memory, shown when tall."""

from __future__ import annotations

import pytest
from rich.style import Style
from test_run_layout import screen_lines
from tuihelpers import wait_for

from evaltui.tui.widgets.braille import stacked_columns
from evaltui.tui.widgets.meters import HISTORY_MIN_HEIGHT, ResourceMeters

pytestmark = pytest.mark.anyio


def test_stacked_columns_stacks_reserved_on_used_newest_right() -> None:
    lower, upper = Style(color="red"), Style(color="blue")
    lines = stacked_columns([(0.5, 0.5), (0.25, 0.0)], 4, 2, lower, upper)
    assert [line.plain for line in lines] == ["  █ ", "  █▄"]
    assert [s.style.color.name for s in lines[0].spans if s.end - s.start == 1
            and lines[0].plain[s.start] == "█"] == ["blue"]  # reserved sits on used
    assert {s.style.color.name for s in lines[1].spans if lines[1].plain[s.start] != " "} \
        == {"red"}


@pytest.mark.parametrize("height, shown", [(24, False), (HISTORY_MIN_HEIGHT, True)])
async def test_gpu_history_under_each_meter(runs, make_backend, app_factory, height,
                                            shown) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=(200, height)) as pilot:
        meters = app.screen.query_one(ResourceMeters)
        await wait_for(lambda: sum(len(h) for h in meters.history.values()) >= 4,
                       timeout=10, what="two readings of each GPU")
        await pilot.pause()
        assert set(meters.history) == {0, 1}
        _, used, reserved = meters.history[1][-1]
        gpu = meters.resources.gpus[1]
        assert (round(used * 24576), round(reserved * 24576)) == (gpu.used_mb, gpu.reserved_mb)
        assert gpu.used_mb == 22528  # the fake GPU 1's reading
        lines = [line for line in screen_lines(app) if "history" in line]
        assert len(lines) == (2 if shown else 0)
