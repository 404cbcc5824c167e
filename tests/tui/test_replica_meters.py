"""The GPU meters list each GPU's reservations by run while a run holds several GPUs
(replicas, issue 22), at 80 columns; without such a run they are as before."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from proctools import end_session
from rich.console import Console
from tuihelpers import wait_for

from evaltui.engine.graph.specbuild import build_spec
from evaltui.scheduler.admission.resources import FakeGpuProbe, HostProbe
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.tui.embedded import EmbeddedBackend
from evaltui.tui.widgets.meters import ResourceMeters

pytestmark = pytest.mark.anyio
GIB = 1024


SPAWNED: list[subprocess.Popen[bytes]] = []


def holding_spawner(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """A run that is a process holding until the test ends it."""
    proc = subprocess.Popen(["sleep", "60"], cwd=run_dir, env=dict(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    SPAWNED.append(proc)
    return proc


def spec(vram_mb: int, replicas: int | None) -> dict:
    built = build_spec("model", dataset="babyai", split="GoToLocal", episodes=1,
                       replicas=replicas)
    built["scheduling"] = {"marginal_vram_mb": vram_mb}
    return built


def meter_text(meters: ResourceMeters) -> str:
    """The meters as plain text, at their width on screen."""
    console = Console(width=meters.content_size.width, record=True, color_system=None,
                      file=io.StringIO())
    console.print(meters.render())
    return console.export_text()


def rsv_lines(text: str) -> list[str]:
    """The meters' reservation-by-run lines (``  rsv ...`` under the GPUs)."""
    return [line for line in text.splitlines() if line.lstrip().startswith("rsv ")]


def held(meters: ResourceMeters) -> dict[str, int]:
    """Ledger entries per run, as the meters last got them."""
    counts: dict[str, int] = {}
    for entry in meters.resources.ledger if meters.resources else ():
        counts[entry.run_id] = counts.get(entry.run_id, 0) + 1
    return counts


@pytest.mark.parametrize("size", [(80, 24), (100, 40)], ids=["80x24", "100x40"])
async def test_each_gpu_lists_its_reservations_by_run(size, isolated_dirs, monkeypatch,
                                                      app_factory) -> None:
    """Tall: a line per GPU. Short (80x24): a line per set of GPUs holding the same runs,
    so a run on many GPUs leaves the runs table its rows."""
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "4x24576")
    scheduler = JobScheduler(isolated_dirs["outputs"], gpu_probe=FakeGpuProbe([24576] * 4),
                             host_probe=HostProbe(), spawner=holding_spawner,
                             host_shared=False)  # each run hosts its shared nodeset
    try:
        one, _ = scheduler.submit(spec(20 * GIB, None))
        scheduler.tick()
        app = app_factory(EmbeddedBackend(scheduler, api_note="", owner="tester"))
        async with app.run_test(size=size) as pilot:
            meters = app.screen.query_one(ResourceMeters)
            await wait_for(lambda: held(meters) == {one: 1}, what="the first run", timeout=20)
            await pilot.pause()
            assert rsv_lines(meter_text(meters)) == []
            rep, _ = scheduler.submit(spec(8 * GIB, 3))
            scheduler.tick()
            await wait_for(lambda: held(meters) == {one: 1, rep: 3}, what="three more",
                           timeout=20)
            await pilot.pause()
            shot = meter_text(meters)
            lines = rsv_lines(shot)
            # The replicas go best fit: GPU0 (4 GiB left) cannot, so GPUs 1-3 take one each.
            if size[1] >= 36:
                assert len(lines) == 4, shot
                assert any(one in line and "20.0" in line for line in lines)
                assert sum(rep in line and "8.0" in line for line in lines) == 3
            else:
                assert len(lines) == 2, shot
                assert any(f"rsv GPU0 {one} 20.0" in line for line in lines), shot
                assert any(f"rsv GPU1-3 {rep} 8.0" in line for line in lines), shot
    finally:
        scheduler.stop()
        while SPAWNED:
            end_session(SPAWNED.pop())
