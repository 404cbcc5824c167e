"""The submit form's replicas field (issue 22): N or per_gpu on every shared nodeset, and
its error under the field."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Label
from tuihelpers import SIZE, open_submit, wait_for

from evaltui.tui.screens.submit import SubmitScreen

pytestmark = pytest.mark.anyio


async def test_replicas_go_on_every_shared_nodeset_and_a_bad_one_is_said_there(
        runs, make_backend, app_factory) -> None:
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        form = await open_submit(pilot)
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
