"""The submit form's replicas field (issue 22): N or per_gpu on every shared nodeset, and
its error under the field."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Label
from tuihelpers import SIZE, wait_for

from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.runs_table import RunsTable

pytestmark = pytest.mark.anyio
ALL_RUNS = 9


async def open_form(pilot) -> SubmitScreen:
    app = pilot.app
    await wait_for(lambda: isinstance(app.screen, QueueScreen) and
                   app.screen.query_one(RunsTable).row_count == ALL_RUNS, what="all runs")
    await pilot.press("s")
    await wait_for(lambda: isinstance(app.screen, SubmitScreen))
    return app.screen


async def test_replicas_go_on_every_shared_nodeset_and_a_bad_one_is_said_there(
        runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        form.query_one("#graph", Input).value = "model"
        form.query_one("#replicas", Input).value = "per_gpu"
        await pilot.pause()
        nodesets = form.spec()["graph"]["nodesets"]
        assert nodesets["policy"]["replicas"] == "per_gpu"
        assert "replicas" not in nodesets["env"]
        form.query_one("#replicas", Input).value = "0"
        await pilot.pause()
        await pilot.press("ctrl+s")
        error = form.query_one("#replicas-error", Label)
        await wait_for(lambda: error.display, what="the field's error")
        assert "--replicas must be an integer >= 1" in str(error.render())
        assert isinstance(app.screen, SubmitScreen)  # nothing submitted
        form.query_one("#replicas", Input).value = ""
        await pilot.pause()
        assert "replicas" not in form.spec()["graph"]["nodesets"]["policy"]
