"""The scheduler's own reads of run dirs it does not track (the TUI's runs list, ``GET
/runs``) never follow a symlink out of the outputs root (DESIGN §11)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from evaltui.rundir.jsonfiles import touch_done, write_json_atomic
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.core import RunNotFound
from evaltui.scheduler.scheduler import JobScheduler

SECRET = "secret-outside-the-outputs-root"


def _run(run_dir: Path, graph: str) -> None:
    (run_dir / "episodes").mkdir(parents=True)
    write_json_atomic(run_dir / "scheduler.json", {"state": "done", "exit_code": 0})
    write_json_atomic(run_dir / "spec.json", {"eval": {"graph_name": graph}, "graph": {}})
    write_json_atomic(run_dir / "summary.json", {"status": "done", "graph_name": graph,
                                                 "episodes": []})
    touch_done(run_dir)


@pytest.mark.parametrize("plant", ["", "summary.json", "scheduler.json", "spec.json"])
def test_a_run_with_a_symlink_out_is_not_listed(make_scheduler: Callable[..., JobScheduler],
                                                tmp_path: Path, plant: str) -> None:
    sched = make_scheduler()
    secret = tmp_path / "elsewhere" / "20250101_000000"
    _run(secret, SECRET)
    good = runs_root(sched.outputs) / "20250101_000001"
    _run(good, "fine")
    planted = runs_root(sched.outputs) / "20250101_000002"
    if plant:
        _run(planted, "fine")
        (planted / plant).unlink()
        (planted / plant).symlink_to(secret / plant)
    else:
        planted.symlink_to(secret)
    listed = sched.list_runs()
    assert [r.run_id for r in listed] == [good.name]
    assert SECRET not in json.dumps([str(r) for r in listed])
    with pytest.raises(RunNotFound):
        sched.get_run(planted.name)
    shutil.rmtree(secret)
