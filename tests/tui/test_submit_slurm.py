"""The submit form's Slurm choice: partition and time into ``eval.slurm``; submitting goes
through the login-node submission of ``evaltui eval --executor slurm`` (sbatch from here,
the run table follows the job); without Slurm, one line under the executor."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, Select
from tuihelpers import SIZE, wait_for

from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.tui.screens.queue import QueueScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.runs_table import RunsTable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "slurm"))

pytestmark = pytest.mark.anyio


async def open_form(pilot: Any) -> SubmitScreen:
    app = pilot.app
    await wait_for(lambda: isinstance(app.screen, QueueScreen))
    await pilot.press("s")
    await wait_for(lambda: isinstance(app.screen, SubmitScreen))
    return app.screen


async def test_without_slurm_choosing_it_says_what_is_missing_inline(
        make_backend, app_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, squeue, ... here
    app = app_factory(make_backend())
    async with app.run_test(size=SIZE) as pilot:
        form = await open_form(pilot)
        form.query_one("#executor", Select).value = "slurm"
        error = form.query_one("#executor-error")
        await wait_for(lambda: error.display, what="the inline line")
        assert "Slurm is not available here: sbatch" in str(error.render())


@pytest.mark.slurm
async def test_submitting_with_slurm_submits_one_job_the_table_follows(
        slurm_session: Any, make_backend, app_factory, outputs: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("SLURM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SLURM_CONF", str(slurm_session.conf))
    monkeypatch.setenv("EVALTUI_SLURM_LISTEN_HOST", "127.0.0.1")
    backend = make_backend()
    app = app_factory(backend)
    try:
        async with app.run_test(size=SIZE) as pilot:
            form = await open_form(pilot)
            form.query_one("#episodes", Input).value = "2"
            form.query_one("#executor", Select).value = "slurm"
            form.query_one("#slurm_partition", Input).value = "main"
            form.query_one("#slurm_time", Input).value = "7"
            await pilot.pause()
            assert not form.query_one("#executor-error").display
            await pilot.press("ctrl+s")
            await wait_for(lambda: isinstance(app.screen, QueueScreen), timeout=30,
                           what="the form to close")
            [run_dir] = list(runs_root(outputs).iterdir())
            job = read_json(run_dir / "scheduler.json")["slurm_job_id"]
            table = app.screen.query_one(RunsTable)
            await wait_for(lambda: table.row_count == 1, timeout=10, what="the run listed")
            info = slurm_session.run("scontrol", "show", "job", job).stdout
            assert "Partition=main" in info and "TimeLimit=00:07:00" in info
            spec = read_json(run_dir / "spec.json")
            assert spec["eval"]["executor"] == "slurm"
            assert spec["eval"]["slurm"] == {**spec["eval"]["slurm"], "partition": "main",
                                             "time": "7"}
            assert backend.scheduler.get_run(run_dir.name).state.value in \
                ("queued", "starting", "running", "done")
            await wait_for(lambda: backend.scheduler.get_run(run_dir.name).state.value
                           == "done", timeout=90, what="the run read done from Slurm's job")
    finally:
        for job in slurm_session.run("squeue", "--noheader", "--format=%i").stdout.split():
            slurm_session.run("scancel", job, check=False)
