"""The submit form's executor choice (local or a Ray cluster) and Ray address."""

from __future__ import annotations

import sys

import pytest
from textual.widgets import Input, Select
from tuihelpers import SIZE, open_submit, wait_for

from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.submit import SubmitScreen

pytestmark = pytest.mark.anyio


class BlockRay:
    """An import blocker: ``ray`` cannot be found, as where the extra is not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "ray" or name.startswith("ray."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


async def test_choosing_ray_puts_the_executor_and_address_into_the_spec(
        runs, make_backend, app_factory, outputs) -> None:
    pytest.importorskip("ray")
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        form = await open_submit(pilot)
        form.query_one("#episodes", Input).value = "2"
        form.query_one("#executor", Select).value = "ray"
        form.query_one("#ray_address", Input).value = "10.0.0.5:6379"
        await pilot.pause()
        assert not form.query_one("#executor-error").display
        await pilot.press("ctrl+s")
        await wait_for(lambda: isinstance(app.screen, QueueScreen), timeout=20,
                       what="the form to close")
    new = [p for p in runs_root(outputs).iterdir() if p.name not in
           {r.name for r in runs.values()} and (p / "spec.json").exists()]
    assert len(new) == 1
    spec = read_json(new[0] / "spec.json")
    assert spec["eval"]["executor"] == "ray"
    assert spec["eval"]["ray_address"] == "10.0.0.5:6379"


async def test_without_ray_the_form_says_install_inline(
        runs, make_backend, app_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [BlockRay(), *sys.meta_path])
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        form = await open_submit(pilot)
        form.query_one("#executor", Select).value = "ray"
        error = form.query_one("#executor-error")
        await wait_for(lambda: error.display, what="the inline install hint")
        assert "install evaltui[ray]" in str(error.render())
        await pilot.press("ctrl+s")  # and submit refuses it, the form stays
        await pilot.pause()
        assert isinstance(app.screen, SubmitScreen) and error.display
        assert "install evaltui[ray]" in str(error.render())
        form.query_one("#executor", Select).value = "local"
        await wait_for(lambda: not error.display, what="the hint to go with local")
