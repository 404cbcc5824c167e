"""The run screen's progress says a remote policy's round trips (p50/p99) when the run
asked one over the network (the run dir's ``policy_server/``, evaltui.nodesets)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from evaltui.tui.screens.run import RunScreen
from evaltui.tui.widgets.run_progress import Progress, RunProgress

pytestmark = pytest.mark.anyio


def test_the_screen_reads_the_workers_samples_again_only_when_they_change(
        tmp_path: Path) -> None:
    screen = RunScreen(tmp_path)
    assert screen._server_latency() is None  # no policy_server/: a local policy
    server = tmp_path / "policy_server"
    server.mkdir()
    (server / "latency-11.json").write_text(json.dumps({"ms": [1.0, 2.0, 3.0]}))
    (server / "latency-12.json").write_text(json.dumps({"ms": [4.0]}))
    first = screen._server_latency()
    assert first is not None and first["steps"] == 4 and first["p50_ms"] == 2.5
    assert screen._server_latency() is first  # unchanged files: not read again
    (server / "latency-12.json").write_text(json.dumps({"ms": [4.0, 100.0]}))
    again = screen._server_latency()
    assert again is not None and again["steps"] == 5 and again["p99_ms"] > 90


async def test_the_progress_panel_shows_the_round_trips() -> None:
    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield RunProgress()

    app = One()
    async with app.run_test(size=(120, 10)):
        widget = app.query_one(RunProgress)
        widget.progress = Progress.of({"episodes_total": 10}, Counter(ok=3), True,
                                      datetime.now().astimezone(),
                                      {"p50_ms": 3.25, "p99_ms": 9.5, "steps": 40})
        rendered = widget.render()
        text = "\n".join(r.plain for r in rendered.renderables)  # type: ignore[union-attr]
        assert "policy server p50 3.25 ms p99 9.5 ms" in text
        widget.progress = Progress.of({"episodes_total": 10}, Counter(ok=3), True,
                                      datetime.now().astimezone())
        text = "\n".join(r.plain for r in widget.render().renderables)  # type: ignore
        assert "policy server" not in text
