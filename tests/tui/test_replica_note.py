"""The run screen's progress says when a run goes on with a replica lost (summary
``replicas``)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest
from textual.app import App, ComposeResult

from evaltui.tui.widgets.run_progress import Progress, RunProgress

pytestmark = pytest.mark.anyio


def replicas(*states: str, name: str = "policy") -> dict[str, list[dict[str, object]]]:
    return {name: [{"gpu": f"GPU{i}", "pid": 100 + i, "requests": 5, "state": s}
                   for i, s in enumerate(states)]}


def note(summary: dict[str, object]) -> str | None:
    return Progress.of({"episodes_total": 10, **summary}, Counter(ok=3), True,
                       datetime.now().astimezone()).replica_note


def test_the_note_names_the_lost_replicas_and_is_absent_otherwise() -> None:
    assert note({"replicas": replicas("up", "lost", "up")}) == "degraded: replica GPU1 lost"
    assert note({"replicas": replicas("lost", "lost", "up")}) == \
        "degraded: replicas GPU0, GPU1 lost"
    two = {**replicas("up", "lost"), **replicas("up", name="critic")}
    assert note({"replicas": two}) == "degraded: replica GPU1 of policy lost"
    assert note({"replicas": replicas("up", "up")}) is None
    assert note({"replicas": None}) is None and note({}) is None


async def test_the_progress_panel_shows_the_note() -> None:
    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield RunProgress()

    app = One()
    async with app.run_test(size=(120, 10)):
        widget = app.query_one(RunProgress)
        widget.progress = Progress.of({"episodes_total": 10, "replicas": replicas(
            "up", "lost")}, Counter(ok=3), True, datetime.now().astimezone())
        rendered = widget.render()
        text = "\n".join(r.plain for r in rendered.renderables)  # type: ignore[union-attr]
        assert "degraded: replica GPU1 lost" in text
