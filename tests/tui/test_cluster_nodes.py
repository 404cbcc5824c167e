"""A scheduler admitting across a Ray cluster (``--ray``) as the TUI and
``evaltui ls`` show it: GPU meters grouped under their node (with its host RAM), a dim
line for a node that left, and a node column for runs placed on one. The cluster is the
stand-in of tests/clusterstandin.py behind a real JobScheduler (reads, Sampler, API);
the runs are the fixture run dirs, some of them placed on nodes.

Regenerate the snapshots with ``pytest tests/tui/test_cluster_nodes.py --snapshot-update``
and look at the SVGs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterstandin import two_nodes_and_a_lost_one
from test_run_layout import screen_lines
from textual.pilot import Pilot
from tuihelpers import wait_for

from evaltui import cli
from evaltui.api.app import make_api
from evaltui.api.server import ApiServer
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.scheduler.admission.resources import HostSnapshot
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.tui.attached import AttachedBackend
from evaltui.tui.embedded import EmbeddedBackend
from evaltui.tui.widgets.meters import ResourceMeters
from evaltui.tui.widgets.runs_table import RunsTable

pytestmark = pytest.mark.anyio
SIZES = [(80, 24), (120, 36)]
ALL_RUNS = 9
TOKEN = "n" * 32
PLACED = {"running": "node-a", "starting": "node-b", "done": "node-a", "cancelled": "node-b",
          "queued_low": "node-b"}
"""Fixture run -> the node its scheduler.json names. The queued one keeps the node of an
earlier attempt (as a resumed run does): it is not on a node now and shows none."""


class ThisMachine:
    """The scheduler's own host: 16 cores, 62.5 GiB of RAM, 37.5% busy."""

    def read(self) -> HostSnapshot:
        return HostSnapshot(ram_total_mb=64000, ram_available_mb=40000, cpu_percent=37.5,
                            cpu_count=16, load_avg_1m=4.2)


@pytest.fixture
def placed(runs: dict[str, Path]) -> dict[str, Path]:
    """The fixture runs, with ``node`` (and the reservation's) in their scheduler.json as
    a cluster scheduler writes them when it admits (scheduler/starting.py)."""
    for name, node in PLACED.items():
        path = runs[name] / "scheduler.json"
        record = json.loads(path.read_text())
        record["node"] = node
        if record.get("reservation"):
            record["reservation"]["node"] = node
        write_json_atomic(path, record)
    return runs


@pytest.fixture
def cluster(outputs: Path) -> Iterator[EmbeddedBackend]:
    scheduler = JobScheduler(outputs, gpu_probe=two_nodes_and_a_lost_one(),
                             host_probe=ThisMachine())
    try:
        yield EmbeddedBackend(scheduler, api_note="API: 127.0.0.1:8000", owner="tester")
    finally:
        scheduler.stop()


@pytest.fixture
def served(cluster: EmbeddedBackend, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The same scheduler behind the HTTP API (as ``evaltui serve --ray`` runs it)."""
    monkeypatch.setenv("EVALTUI_TOKEN", TOKEN)
    server = ApiServer(make_api(cluster.scheduler, TOKEN), port=0).start()
    try:
        yield server.url
    finally:
        server.stop()


async def queue_ready(pilot: Pilot[None]) -> None:
    await wait_for(lambda: pilot.app.screen.query_one(RunsTable).row_count == ALL_RUNS,
                   what="all runs listed")
    await wait_for(lambda: pilot.app.screen.query_one(ResourceMeters).resources is not None,
                   what="a resource reading")
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_queue_screen_on_a_cluster(size, snap_compare, placed, cluster, app_factory) -> None:
    """Meters under node-a (2 GPUs, one with a reservation) and node-b, node-c gone 12 s
    ago, this machine's CPU and RAM; runs with their node."""
    assert snap_compare(app_factory(cluster), terminal_size=size, run_before=queue_ready)


async def test_meters_group_gpus_by_node_and_say_a_lost_node_is_gone(
        placed, cluster, app_factory) -> None:
    app = app_factory(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await queue_ready(pilot)
        lines = [line[3:] for line in screen_lines(app)]  # inside "│ " and the padding
        panel = lines[lines.index(next(x for x in lines if x.startswith("node-a"))):]
        starts = ["node-a ", "  GPU0 fake GPU 0 ", "  GPU1 fake GPU 1 ", "node-b ",
                  "  GPU0 fake GPU 0 ", "node-c — gone 12 s ago", "CPU 16 cores "]
        assert [x[:len(start)] for x, start in zip(panel, starts, strict=False)] == starts
        assert panel[5].rstrip("│ ") == "node-c — gone 12 s ago"  # one line, nothing else
        assert "used / 62.5 GiB RAM · 16 cores 38%" in panel[0]
        assert "4.0 rsv" in panel[1]  # the cluster ledger's reservation on node-a GPU0
        meters = app.screen.query_one(ResourceMeters)
        await wait_for(lambda: len(meters.history) == 3, what="a history per node GPU")
        assert set(meters.history) == {("node-a", 0), ("node-a", 1), ("node-b", 0)}

        table = app.screen.query_one(RunsTable)
        assert "node" in table.column_keys
        rids = [str(row.key.value) for row in table.ordered_rows]
        node_of = {rid: table.get_cell(rid, "node").plain for rid in rids}
        assert {rid: n for rid, n in node_of.items() if n} == {
            placed[name].name: node for name, node in PLACED.items() if name != "queued_low"}


def test_ls_shows_the_node_column_and_the_attached_backend_reads_nodes(
        placed, cluster, served, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per row
    assert cli.main(["ls", "--url", served]) == 0
    out = capsys.readouterr().out.splitlines()
    header = out[0].split()
    assert header[:3] == ["run", "state", "node"]
    rows = {line.split()[0]: line.split() for line in out[1:] if line.strip()}
    for name, run_dir in placed.items():
        expected = "-" if name == "queued_low" else PLACED.get(name, "-")
        assert rows[run_dir.name][2] == expected, name
    assert cli.main(["show", placed["running"].name, "--url", served]) == 0
    assert "node: node-a" in capsys.readouterr().out

    attached = AttachedBackend(served, TOKEN, owner="tester")
    try:
        attached.start()
        there = attached.snapshot()
    finally:
        attached.stop()
    here = cluster.snapshot()
    assert [(g.node, g.index) for g in there.resources.gpus] == \
        [("node-a", 0), ("node-a", 1), ("node-b", 0)]
    assert there.resources.nodes == here.resources.nodes
    assert [n.name for n in there.resources.nodes_lost] == ["node-c"]
    assert there.runs == here.runs  # node included, through one run_row()


def test_one_machine_ls_has_no_node_column(runs, make_backend, capsys, monkeypatch) -> None:
    backend = make_backend()
    monkeypatch.setenv("EVALTUI_TOKEN", TOKEN)
    monkeypatch.setenv("COLUMNS", "200")
    server = ApiServer(make_api(backend.scheduler, TOKEN), port=0).start()
    try:
        assert cli.main(["ls", "--url", server.url]) == 0
    finally:
        server.stop()
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["run", "state", "graph"]
    assert "node" not in out[0].split()


def test_ls_at_80_columns_is_one_line_a_run(runs, make_backend, capsys, monkeypatch
                                            ) -> None:
    """A long waiting reason is cut with an ellipsis (``show`` has it whole), not wrapped
    into a column one word wide."""
    backend = make_backend()
    monkeypatch.setenv("EVALTUI_TOKEN", TOKEN)
    monkeypatch.setenv("COLUMNS", "80")
    server = ApiServer(make_api(backend.scheduler, TOKEN), port=0).start()
    try:
        assert cli.main(["ls", "--url", server.url]) == 0
        out = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
        listed = cli.main(["ls", "--url", server.url, "--json"]) == 0 and \
            json.loads(capsys.readouterr().out)
    finally:
        server.stop()
    assert len(out) == 1 + len(listed), out
    assert any(line.rstrip().endswith("…") for line in out), out
    assert all(len(line) <= 80 for line in out)
