"""The resources panel names who holds each GPU's memory (pid, user, MiB, run or shared
nodeset), from real processes charging fake GPUs through the scheduler's own probe."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gpuscene import HOST_NODESET, RUN_ID, GpuScene, build_scene
from runfixtures import bot_spec
from tuihelpers import wait_for

from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.scheduler.admission.resources import FakeGpuProbe, HostProbe
from evaltui.scheduler.scheduler import JobScheduler
from evaltui.tui.embedded import EmbeddedBackend
from evaltui.tui.widgets.meters import ResourceMeters

pytestmark = pytest.mark.anyio


@pytest.fixture
def scene(isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
          ) -> Iterator[GpuScene]:
    monkeypatch.setenv("EVALTUI_FAKE_GPUS", "2x24576")
    built = build_scene(isolated_dirs["outputs"], isolated_dirs["state"])
    write_json_atomic(built.run_dir / "spec.json", bot_spec())
    try:
        yield built
    finally:
        built.close()


@pytest.mark.parametrize(("size", "lines_gpu0"), [((80, 24), 1), ((120, 36), 3)],
                         ids=["80x24", "120x36"])
async def test_the_panel_lists_each_gpus_processes(size, lines_gpu0, scene, isolated_dirs,
                                                   app_factory) -> None:
    scheduler = JobScheduler(isolated_dirs["outputs"], gpu_probe=FakeGpuProbe([24576, 24576]),
                             host_probe=HostProbe())
    try:
        app = app_factory(EmbeddedBackend(scheduler, api_note="", owner="tester"))
        async with app.run_test(size=size) as pilot:
            meters = app.screen.query_one(ResourceMeters)
            await wait_for(lambda: bool(meters.holders.get(0)), what="GPU processes")
            await pilot.pause()
            shot = app.export_screenshot().replace("&#160;", " ")
            assert f"{scene.worker}" in shot and f"run {RUN_ID}" in shot
            assert f"{scene.run.pid}" in shot  # GPU1's one process, its run's own
            if lines_gpu0 > 1:
                assert f"shared {HOST_NODESET}" in shot and f"{scene.stranger}" in shot
            else:  # small terminals: the biggest holder, and how many more
                assert "+2 more" in shot
    finally:
        scheduler.stop()
