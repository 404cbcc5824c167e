"""The GPU meters list each GPU's reservations by run while a run holds several GPUs
(replicas, issue 22), at 80 columns; without such a run they are as before."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from proctools import end_session
from tuihelpers import wait_for

from evaltui.scheduler.admission.resources import FakeGpuProbe, HostProbe
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.specbuild import build_spec
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


def held(meters: ResourceMeters) -> dict[str, int]:
    """Ledger entries per run, as the meters last got them."""
    counts: dict[str, int] = {}
    for entry in meters.resources.ledger if meters.resources else ():
        counts[entry.run_id] = counts.get(entry.run_id, 0) + 1
    return counts


async def test_each_gpu_lists_its_reservations_by_run(isolated_dirs, monkeypatch,
                                                      app_factory) -> None:
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "4x24576")
    scheduler = JobScheduler(isolated_dirs["outputs"], gpu_probe=FakeGpuProbe([24576] * 4),
                             host_probe=HostProbe(), spawner=holding_spawner,
                             host_shared=False)  # each run hosts its shared nodeset
    try:
        one, _ = scheduler.submit(spec(20 * GIB, None))
        scheduler.tick()
        app = app_factory(EmbeddedBackend(scheduler, api_note="", owner="tester"))
        async with app.run_test(size=(80, 24)) as pilot:
            meters = app.screen.query_one(ResourceMeters)
            await wait_for(lambda: held(meters) == {one: 1}, what="the first run", timeout=20)
            await pilot.pause()
            assert " rsv 20" not in app.export_screenshot().replace("&#160;", " ")
            rep, _ = scheduler.submit(spec(8 * GIB, 3))
            scheduler.tick()
            await wait_for(lambda: held(meters) == {one: 1, rep: 3}, what="three more",
                           timeout=20)
            await pilot.pause()
            shot = app.export_screenshot().replace("&#160;", " ")
            lines = [line for line in shot.splitlines() if " rsv " in line]
            # The replicas go best fit: GPU0 (4 GiB left) cannot, so GPUs 1-3 take one each.
            assert len(lines) == 4, shot
            assert any(one in line and "20.0" in line for line in lines)
            assert sum(rep in line and "8.0" in line for line in lines) == 3
    finally:
        scheduler.stop()
        while SPAWNED:
            end_session(SPAWNED.pop())
