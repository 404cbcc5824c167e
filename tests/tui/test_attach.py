"""``evaltui --attach URL``: the TUI over a real ``evaltui serve`` (scheduler + uvicorn on an
ephemeral loopback port, from tests/api/apihelpers.py), driven by Pilot."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ports import free_port
from tuihelpers import SIZE, wait_for

API_TESTS = Path(__file__).resolve().parents[1] / "api"
if str(API_TESTS) not in sys.path:
    sys.path.insert(0, str(API_TESTS))

from apihelpers import Backend, bot_spec, isolate_env, start_backend  # noqa: E402
from proctools import kill_runs  # noqa: E402

from evaltui import cli  # noqa: E402
from evaltui.api.app import make_api  # noqa: E402
from evaltui.api.server import ApiServer  # noqa: E402
from evaltui.contract.states import RunState  # noqa: E402
from evaltui.tui.app import EvalApp, make_app  # noqa: E402
from evaltui.tui.attached import AttachedBackend  # noqa: E402
from evaltui.tui.screens.confirm import ConfirmScreen  # noqa: E402
from evaltui.tui.screens.help import HelpScreen  # noqa: E402
from evaltui.tui.screens.queue import QueueScreen  # noqa: E402
from evaltui.tui.screens.run import RunScreen  # noqa: E402
from evaltui.tui.screens.submit import SubmitScreen  # noqa: E402
from evaltui.tui.widgets.episodes_table import EpisodesTable  # noqa: E402
from evaltui.tui.widgets.queue_lines import SchedulerHeader  # noqa: E402
from evaltui.tui.widgets.runs_table import RunsTable  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    """A ticking scheduler behind the API; stopped, and its runs killed, whatever happens."""
    env = isolate_env(tmp_path, monkeypatch)
    backend = start_backend()
    try:
        yield backend
    finally:
        backend.stop()
        kill_runs(env["outputs"])


@pytest.fixture
def attached(served: Backend) -> Iterator[AttachedBackend]:
    """The TUI's backend over ``served``, started as ``evaltui --attach`` starts it."""
    backend = AttachedBackend(served.url, owner="tester")
    backend.start()
    try:
        yield backend
    finally:
        backend.stop()


def attach_app(backend: AttachedBackend, poll_interval: float = 0.3) -> EvalApp:
    return make_app(backend, poll_interval=poll_interval)


EVENTS_ONLY = 600.0
"""A poll interval no test waits for: what changes on screen was driven by /events."""


def table(app: EvalApp) -> RunsTable:
    return app.screen.query_one(RunsTable)


def header(app: EvalApp) -> str:
    return str(app.screen.query_one(SchedulerHeader).content)


def state_of(app: EvalApp, run_id: str) -> RunState | None:
    run = table(app).run(run_id)
    return run.state if run else None


async def select(pilot, run_id: str) -> None:
    t = table(pilot.app)
    t.move_cursor(row=t.get_row_index(run_id))
    await pilot.pause()


async def test_queue_lists_a_run_submitted_through_the_api(served, attached) -> None:
    app = attach_app(attached, EVENTS_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, QueueScreen)
        run_id = served.client().submit(bot_spec(2)).run_id
        await wait_for(lambda: table(app).run(run_id) is not None, what="the submitted run")
        assert served.url in header(app)
        assert "unreachable" not in header(app)
        await wait_for(lambda: state_of(app, run_id) is RunState.DONE, timeout=20,
                       what="the run to finish, live")
        run = table(app).run(run_id)
        assert run is not None and run.episodes_finished == 2
        assert run.graph == "babyai-bot" and run.run_dir is not None and run.run_dir.is_dir()
        # The run dir the API reports is on this machine: the run screen reads it.
        await select(pilot, run_id)
        await pilot.press("enter")
        await wait_for(lambda: isinstance(app.screen, RunScreen), what="the run screen")
        await wait_for(lambda: app.screen.query_one(EpisodesTable).total == 2,
                       what="its episodes")


async def test_submit_form_creates_a_run_on_the_server(served, attached) -> None:
    app = attach_app(attached)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await wait_for(lambda: isinstance(app.screen, SubmitScreen))
        app.screen.query_one("#episodes").value = "2"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_for(lambda: isinstance(app.screen, QueueScreen), timeout=20,
                       what="the form to close")
        runs = served.client().list_runs()
        assert len(runs) == 1
        assert runs[0].spec is not None and runs[0].spec.episodes_total == 2
        await wait_for(lambda: table(app).run(runs[0].run_id) is not None, what="its row")


async def test_submit_form_shows_the_servers_field_error(served, attached) -> None:
    app = attach_app(attached)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await wait_for(lambda: isinstance(app.screen, SubmitScreen))
        app.screen.query_one("#split").value = "NoSuchSplit"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#split-error")
        await wait_for(lambda: bool(error.display), timeout=20, what="the split's error")
        assert "NoSuchSplit" in str(error.content)  # type: ignore[attr-defined]
        assert served.client().list_runs() == []


def notifications(app: EvalApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_cancel_confirm_cancels_on_the_server(served, attached, monkeypatch) -> None:
    client = served.client()
    client.lock("someone else", ttl_sec=60)  # nothing is admitted: the run stays queued
    run_id = client.submit(bot_spec(2)).run_id
    app = attach_app(attached)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: state_of(app, run_id) is RunState.QUEUED, what="the queued run")
        await wait_for(lambda: "locked by someone else" in header(app), what="the lock")
        await select(pilot, run_id)
        # A backend on another machine: its run dirs are not readable here. Say so.
        monkeypatch.setattr("evaltui.tui.screens.queue.readable_dir", lambda _path: False)
        await pilot.press("enter")
        await wait_for(lambda: any("is not readable on this machine" in m
                                   for m in notifications(app)), what="the notification")
        assert isinstance(app.screen, QueueScreen)
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(lambda: client.get_run(run_id).state is RunState.CANCELLED,
                       what="the server to cancel the run")
        await wait_for(lambda: state_of(app, run_id) is RunState.CANCELLED,
                       what="the row to say cancelled")


async def test_backend_gone_shows_unreachable_then_recovers(served, attached) -> None:
    run_id = served.client().submit(bot_spec(1)).run_id
    app = attach_app(attached, EVENTS_ONLY)  # the event stream notices the outage
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: table(app).run(run_id) is not None, what="the run")
        port = served.server.port
        served.server.stop()
        await wait_for(lambda: f"backend unreachable: {served.url}" in header(app),
                       what="the unreachable header")
        assert "admitting" not in header(app)  # the last known mode is not shown as fact
        # The UI keeps working on what it last knew, and actions fail with a message.
        assert table(app).run(run_id) is not None
        await pilot.press("question_mark")
        await wait_for(lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_for(lambda: isinstance(app.screen, QueueScreen))
        await select(pilot, run_id)
        await pilot.press("l")
        await pilot.pause()
        # The same backend comes back on the same port: the header recovers by itself.
        served.server = ApiServer(make_api(served.scheduler, served.token,
                                           admits=served.admits, heartbeat_sec=0.5),
                                  port=port).start()
        await wait_for(lambda: "unreachable" not in header(app), timeout=15,
                       what="the header to recover")
        assert "admitting" in header(app) or "locked" in header(app)


def test_attach_with_a_wrong_token_exits_1(served) -> None:
    env = dict(os.environ, EVALTUI_TOKEN="w" * 32)
    proc = subprocess.run([sys.executable, "-m", "evaltui.cli", "--attach", served.url],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: cannot attach to {served.url}: token "
                                  "rejected")
    assert "EVALTUI_TOKEN" in proc.stderr


def test_attach_without_a_backend_exits_1(capsys) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert cli.main(["--attach", url]) == 1
    err = capsys.readouterr().err
    assert err == f"error: cannot attach to {url}: nothing answers there; start " \
                  "one with `evaltui serve`\n"
    assert cli.main(["--attach", "ftp://example.org"]) == 1
    assert "not an http(s) URL" in capsys.readouterr().err
