"""A shared nodeset with its own Python environment is hosted by its run, not the
scheduler (whose hosts run in evaltui's interpreter)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from schedhelpers import line_spec

from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.scheduler import JobScheduler


def test_a_shared_nodeset_in_its_own_environment_is_left_to_its_run(
        make_scheduler: Callable[..., JobScheduler], fake_gpus: Callable[[str], None],
        dataset: Path, tmp_path: Path) -> None:
    fake_gpus("1x24576")
    sched = make_scheduler(tick_interval=0.05)
    spec = line_spec(dataset, episodes=3)
    marker = tmp_path / "host.pid"
    spec["graph"]["nodesets"]["policy"] = {
        "impl": "own_env_policy:LinePolicyOwnEnv", "parallelism": "shared",
        "params": {"marker": str(marker)}, "environment": {"python": sys.executable}}
    run_id, _ = sched.submit(spec)
    sched.start()
    assert sched.wait(run_id, 120) is RunState.DONE
    assert sched.nodesets() == []  # never hosted by the scheduler
    run_dir = runs_root(sched.outputs) / run_id
    assert read_json(run_dir / "summary.json")["status"] == "done"
    assert marker.read_text().strip().isdigit()  # its host over there ran it
    urls = read_json(run_dir / "shared_urls.json")
    assert set(urls) == {"policy"}  # the run's own host, fronting the one over there
