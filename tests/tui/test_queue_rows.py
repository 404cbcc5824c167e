"""One run_row() for both backends: the embedded and the attached backend show the same
rows for the same run dirs, and a command `evaltui run` queued waits in the same list."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from tuihelpers import SIZE, wait_for

API_TESTS = Path(__file__).resolve().parents[1] / "api"
if str(API_TESTS) not in sys.path:
    sys.path.insert(0, str(API_TESTS))

from evaltui.api.app import make_api  # noqa: E402
from evaltui.api.server import ApiServer  # noqa: E402
from evaltui.contract.pidref import PidRef  # noqa: E402
from evaltui.contract.states import AdmitState, RunState  # noqa: E402
from evaltui.tui.attached import AttachedBackend  # noqa: E402
from evaltui.tui.screens.confirm import ConfirmScreen  # noqa: E402
from evaltui.tui.screens.queue import QueueScreen  # noqa: E402
from evaltui.tui.widgets.queue_lines import RunDetail  # noqa: E402
from evaltui.tui.widgets.runs_table import RunsTable  # noqa: E402

pytestmark = pytest.mark.anyio
TOKEN = "t" * 32
COMMAND = "python train.py --epochs 3"


def test_embedded_and_attached_backends_show_the_same_rows(runs, make_backend) -> None:
    embedded = make_backend()
    # The same scheduler, in this process and behind the API (as `evaltui serve` runs it).
    server = ApiServer(make_api(embedded.scheduler, TOKEN), port=0).start()
    attached = AttachedBackend(server.url, TOKEN, owner="tester")
    try:
        attached.start()
        here, there = embedded.snapshot(), attached.snapshot()
    finally:
        attached.stop()
        server.stop()
    assert len(here.runs) == len(runs)
    assert here.runs == there.runs  # every field of every row, in the same order
    by_id = {r.run_id: r for r in here.runs}
    queued = by_id[runs["queued"].name]
    assert queued.state is RunState.QUEUED and queued.priority == 5
    assert queued.vram_estimate_mb == 30720 and queued.graph != "?"  # from its spec brief
    assert here.resources == there.resources.model_copy(update={"taken_at":
                                                                here.resources.taken_at})


async def test_a_waiting_evaltui_run_command_is_a_row_of_the_queue(runs, make_backend,
                                                                   app_factory) -> None:
    backend = make_backend()
    entry = backend.scheduler.admits.add("train", PidRef.current(), vram_mb=None,
                                         exclusive=True, command=COMMAND)
    row_id = f"admit:{entry.admit_id}"
    app = app_factory(backend)
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(RunsTable)
        await wait_for(lambda: table.run(row_id) is not None, what="the admit row")
        row = table.run(row_id)
        assert row is not None and row.kind == "admit" and row.state is RunState.QUEUED
        assert (row.graph, row.command, row.run_dir) == ("train", COMMAND, None)
        assert row.waiting_reason
        # In the queue part: after the active runs, before the finished ones.
        order = [r.run_id for r in app.screen.snapshot.runs]
        states = {r.run_id: r.state for r in app.screen.snapshot.runs}
        position = order.index(row_id)
        assert all(states[r] in (RunState.STARTING, RunState.RUNNING, RunState.QUEUED)
                   for r in order[:position])
        assert all(states[r] is RunState.QUEUED or states[r].terminal
                   for r in order[position:])
        cells = dict(zip(table.column_keys, (str(c) for c in table.get_row(row_id)),
                         strict=True))
        assert cells["graph"] == "train" and cells["progress"] == "evaltui run"
        # Run actions do not apply to it: it says what it is instead of asking to cancel.
        table.move_cursor(row=table.get_row_index(row_id))
        await pilot.pause()
        assert COMMAND in str(app.screen.query_one(RunDetail).content)  # its command line
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, QueueScreen) and not isinstance(app.screen, ConfirmScreen)
        assert any(f"{row_id} is `evaltui run train`" in str(n.message)
                   for n in app._notifications)
        backend.scheduler.admits.release(entry.admit_id)
        await wait_for(lambda: table.run(row_id) is None, timeout=10,
                       what="the row to go once released")


def test_a_run_admitted_between_the_queue_and_the_runs_reads_shows_once(tmp_path) -> None:
    """The attached backend reads the queue, then the runs: a run admitted in between is
    queued in the first and starting in the second. It was listed twice, and the runs
    table raised DuplicateKey re-adding its rows (seen in CI: the TUI's submit test)."""
    from evaltui.contract.views import QueueEntry, Run
    from evaltui.tui.backend import queue_rows

    run = Run(run_id="20261130_220920", state=RunState.STARTING, run_dir=tmp_path)
    waiting = Run(run_id="20261130_220921", state=RunState.QUEUED, run_dir=tmp_path)
    entry = {"priority": 0, "queued_at": None, "waiting_reason": "new", "waiting_kind": "new",
             "estimate_mb": 0, "ram_estimate_mb": 0, "estimate_source": "declared",
             "exclusive": False, "graph_name": None}
    queue = [QueueEntry(run_id=run.run_id, position=0, **entry),
             QueueEntry(run_id=waiting.run_id, position=1, **entry)]
    rows = queue_rows([run, waiting], queue)
    assert [(r.run_id, r.state) for r in rows] == [(run.run_id, RunState.STARTING),
                                                   (waiting.run_id, RunState.QUEUED)]


async def test_a_serving_policy_server_is_a_row_with_its_url_and_requests(
        make_backend, app_factory) -> None:
    """An admitted ``serve`` entry (what ``evaltui serve-policy`` queues) is listed with
    the active runs: kind serve, its URL, the requests it reported; its detail line says
    how to stop it. (The real server's path through the API: tests/api/
    test_api_serve_policy.py.)"""
    backend = make_backend()
    admits = backend.scheduler.admits
    entry = admits.add("pi0", PidRef.current(), vram_mb=2000, exclusive=False,
                       command="evaltui serve-policy model:policy --port 8000", kind="serve")
    backend.start()
    deadline = time.monotonic() + 60
    while admits.get(entry.admit_id).state is not AdmitState.ADMITTED:
        assert time.monotonic() < deadline, admits.get(entry.admit_id)
        admits.wait(entry.admit_id, 5)
    admits.serving(entry.admit_id, "ws://127.0.0.1:8000", 7)
    row_id = f"admit:{entry.admit_id}"
    app = app_factory(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(RunsTable)
        await wait_for(lambda: table.run(row_id) is not None, what="the serve row")
        row = table.run(row_id)
        assert row is not None and (row.kind, row.state) == ("serve", RunState.RUNNING)
        cells = dict(zip(table.column_keys, (str(c) for c in table.get_row(row_id)),
                         strict=True))
        assert cells["graph"] == "pi0" and cells["progress"] == "serve 7 req"
        table.move_cursor(row=table.get_row_index(row_id))
        await pilot.pause()
        detail = str(app.screen.query_one(RunDetail).content)
        assert "serving at ws://127.0.0.1:8000 · 7 requests served · holds 2000 MiB" in detail
        assert f"evaltui cancel {row_id} stops it" in detail
        # `c` stops it here too: the dialog, then its entry is released (the server,
        # which polls its entry, then stops: tests/api/test_api_serve_policy.py).
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), what="the dialog")
        assert "Stop serve-policy" in str(app.screen.query_one(".dialog-title").render())
        await pilot.press("y")
        await wait_for(lambda: admits.get(entry.admit_id).state is AdmitState.RELEASED,
                       timeout=10, what="the entry released")
        assert admits.get(entry.admit_id).release_reason == "cancelled in the TUI"
