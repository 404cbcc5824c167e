"""A submit does its work once: the spec checked once here, its record written once and
held as written, its warnings returned to the caller (not read back from the run)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from schedhelpers import line_spec, record, wait_until

from evaltui.contract.records import SchedulerRecord
from evaltui.contract.spec import parse_spec
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.runs.starting import default_spawner
from evaltui.scheduler.scheduler import JobScheduler

Make = Callable[..., JobScheduler]


def test_submit_returns_its_warnings_and_holds_the_record_it_wrote(
        make_scheduler: Make, tmp_path: Path) -> None:
    bare = tmp_path / "bare.jsonl"  # no reference paths: validation warns
    bare.write_text(json.dumps({"episode_id": "e0", "goal": 2}) + "\n")
    sched = make_scheduler()  # not started: the run stays queued
    submitted = sched.submit(line_spec(bare, episodes=1))
    run_id, state = submitted  # still the (run_id, state) pair callers unpack
    assert (submitted.run_id, submitted.state) == (run_id, state)
    assert state is RunState.QUEUED
    on_disk = record(sched.outputs, run_id)
    assert any("reference_path" in w for w in submitted.warnings)
    assert list(submitted.warnings) == on_disk["warnings"]
    assert sched.get_run(run_id).scheduler == SchedulerRecord.model_validate(on_disk)


def test_a_parsed_spec_is_submitted_as_it_is(make_scheduler: Make, dataset: Path) -> None:
    spec = parse_spec(line_spec(dataset, episodes=1, priority=7))
    run_id, _ = make_scheduler().submit(spec)
    run_dir = runs_root(make_scheduler().outputs) / run_id
    assert read_json(run_dir / "spec.json") == spec.to_json_dict()
    assert read_json(run_dir / "scheduler.json")["priority"] == 7


def test_the_run_is_starting_on_disk_before_its_process_exists(
        make_scheduler: Make, dataset: Path) -> None:
    """A crash between the spawn and the next write must not leave a queued record for a
    live run (a restarted scheduler would start it twice)."""
    seen: list[dict[str, Any]] = []

    def spawner(run_dir: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        seen.append(read_json(run_dir / "scheduler.json"))
        return default_spawner(run_dir, env)

    sched = make_scheduler(spawner=spawner)
    sched.start()
    run_id, _ = sched.submit(line_spec(dataset, episodes=1))
    wait_until(lambda: seen, what="the spawn")
    assert seen[0]["state"] == "starting" and seen[0]["pid"] is None
    assert seen[0]["reservation"] is not None
    assert sched.wait(run_id, timeout=60) is RunState.DONE
    assert record(sched.outputs, run_id)["pid"] is not None
