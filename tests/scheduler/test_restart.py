"""Restart safety: SIGKILL the scheduler process; runs go on, a new scheduler takes over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from schedhelpers import HERE, group_members, line_spec, record, wait_until

from evaltui.contract.pidref import PidRef
from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.runs import claims as claims_module
from evaltui.scheduler.scheduler import JobScheduler
from tests.runprep import prepare_run

Make = Callable[..., JobScheduler]


def start_driver(popen: Callable[..., subprocess.Popen[bytes]], tmp_path: Path,
                 items: list[dict[str, Any]]) -> tuple[subprocess.Popen[bytes], list[str]]:
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps(items))
    proc = popen([sys.executable, str(HERE / "sched_driver.py"), "serve", str(specs)],
                 stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the driver died before submitting"
    return proc, json.loads(line)


def sigkill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the driver's own group: its runs are elsewhere
    proc.wait()


def test_killed_scheduler_leaves_runs_running_and_the_queue_on_disk(
        popen: Callable[..., subprocess.Popen[bytes]], make_scheduler: Make,
        fake_gpus: Callable[[str], None], dataset: Path, tmp_path: Path) -> None:
    fake_gpus("1x24576")
    items = [{"spec": line_spec(dataset, episodes=6, marginal_vram_mb=20480, vram_mb=20480,
                                sleep_sec=0.1), "wait_running": True}]
    items += [{"spec": line_spec(dataset, episodes=1, marginal_vram_mb=8192, priority=p)}
              for p in (0, 5, 0, -3)]
    driver, (running, *queued) = start_driver(popen, tmp_path, items)
    rec = record(Path(os.environ["EVALTUI_OUTPUTS"]), running)
    run_ref = PidRef(rec["pid"], rec["pid_create_time"])
    sigkill(driver)
    assert run_ref.alive()  # its own session: the scheduler's death did not reach it

    sched = make_scheduler()  # restores the queue and adopts the run
    assert sched.get_run(running).state is RunState.RUNNING
    assert [q.run_id for q in sched.queue()] == [queued[1], queued[0], queued[2], queued[3]]
    assert [r.run_id for r in sched.resources().ledger] == [running]  # still reserved
    sched.tick()
    assert sched.queue()[0].waiting_reason.startswith("needs 8.0 GiB on GPU0")
    sched.start()
    assert sched.wait(running, timeout=30) is RunState.DONE
    for run_id in queued:
        assert sched.wait(run_id, timeout=30) is RunState.DONE
    admitted = [record(sched.outputs, r)["admitted_at"] for r in queued]
    assert admitted[1] < admitted[0] < admitted[2] < admitted[3]  # priority, then age


def test_adopted_run_can_be_cancelled(popen: Callable[..., subprocess.Popen[bytes]],
                                      make_scheduler: Make, dataset: Path,
                                      tmp_path: Path) -> None:
    items = [{"spec": line_spec(dataset, sleep_sec=0.2), "wait_running": True}]
    driver, (run_id,) = start_driver(popen, tmp_path, items)
    sigkill(driver)
    sched = make_scheduler(cancel_grace_sec=2.0).start()
    assert sched.get_run(run_id).state is RunState.RUNNING
    pgid = record(sched.outputs, run_id)["pid"]
    sched.cancel(run_id)
    assert sched.wait(run_id, timeout=20) is RunState.CANCELLED
    wait_until(lambda: not group_members(pgid), timeout=5, what="no process of the run")
    summary = json.loads((runs_root(sched.outputs) / run_id / "summary.json").read_text())
    assert summary["status"] == "cancelled"


def test_tie_to_backend_runs_die_with_their_scheduler(
        popen: Callable[..., subprocess.Popen[bytes]], make_scheduler: Make, dataset: Path,
        tmp_path: Path) -> None:
    items = [{"spec": line_spec(dataset, sleep_sec=0.2, tie_to_backend=True),
              "wait_running": True},
             {"spec": line_spec(dataset, sleep_sec=0.2), "wait_running": True}]
    driver, (tied, free) = start_driver(popen, tmp_path, items)
    outputs = Path(os.environ["EVALTUI_OUTPUTS"])
    tied_ref, free_ref = (PidRef(record(outputs, r)["pid"], record(outputs, r)["pid_create_time"])
                          for r in (tied, free))
    sigkill(driver)
    wait_until(lambda: not tied_ref.alive(), timeout=10, what="the tied run to die")
    assert free_ref.alive()
    sched = make_scheduler()
    assert sched.get_run(tied).state is RunState.ABORTED
    assert sched.get_run(free).state is RunState.RUNNING
    assert sched.resume(tied) is RunState.QUEUED  # an aborted run resumes


def test_shared_hosts_outlive_a_killed_scheduler_and_are_adopted(
        popen: Callable[..., subprocess.Popen[bytes]], make_scheduler: Make, dataset: Path,
        tmp_path: Path) -> None:
    spec = line_spec(dataset, episodes=4, sleep_sec=0.15)
    spec["graph"]["nodesets"]["policy"]["parallelism"] = "shared"
    driver, (run_id,) = start_driver(popen, tmp_path, [{"spec": spec, "wait_running": True}])
    sigkill(driver)
    sched = make_scheduler().start()
    (ns,) = sched.nodesets()  # the host the dead scheduler started still serves the run
    assert ns.holders == [run_id] and ns.origin == "scheduler"
    assert sched.wait(run_id, timeout=30) is RunState.DONE
    wait_until(lambda: sched.nodesets() == [], what="the adopted host's unload")
    wait_until(lambda: not group_members(ns.pid), timeout=10, what="the host to exit")


def test_two_schedulers_on_one_outputs_root_never_share_a_job(
        make_scheduler: Make, dataset: Path) -> None:
    a = make_scheduler(disk_sync_sec=0.1)
    a.lock("alice", ttl_sec=60)
    first, _ = a.submit(line_spec(dataset, episodes=1))
    second, _ = a.submit(line_spec(dataset, episodes=1))
    b = make_scheduler(disk_sync_sec=0.1).start()
    assert b.queue() == []  # a lives: its queue is its own
    assert b.cancel(second) is RunState.CANCELLED  # any backend may cancel any run
    a.start()
    wait_until(lambda: [q.run_id for q in a.queue()] == [first], what="a to see the cancel")
    a.stop()  # a is gone: b takes its queue over
    wait_until(lambda: [q.run_id for q in b.queue()] == [first], what="b to claim the job")
    b.unlock()
    assert b.wait(first, timeout=30) is RunState.DONE
    assert record(b.outputs, second)["pid"] is None  # the cancelled one never ran


def test_a_run_dir_queued_by_a_script_is_taken_over_after_a_grace_period(
        make_scheduler: Make, dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(claims_module, "UNOWNED_GRACE_SEC", 0.5)
    sched = make_scheduler(disk_sync_sec=0.05).start()
    run_dir, _ = prepare_run(line_spec(dataset, episodes=1), sched.outputs)  # no owner
    time.sleep(0.2)
    assert sched.queue() == [] and record(sched.outputs, run_dir.name)["pid"] is None
    assert sched.wait(run_dir.name, timeout=20) is RunState.DONE


def test_a_run_that_ended_while_no_scheduler_ran_is_recorded_ended_at_restart(
        popen: Callable[..., subprocess.Popen[bytes]], make_scheduler: Make,
        fake_gpus: Callable[[str], None], dataset: Path, tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from evaltui.commands.runs import print_run

    fake_gpus("1x24576")
    items = [{"spec": line_spec(dataset, episodes=2, marginal_vram_mb=4096, sleep_sec=0.1),
              "wait_running": True}]
    driver, (run_id,) = start_driver(popen, tmp_path, items)
    outputs = Path(os.environ["EVALTUI_OUTPUTS"])
    rec = record(outputs, run_id)
    run_ref = PidRef(rec["pid"], rec["pid_create_time"])
    sigkill(driver)
    wait_until(lambda: not run_ref.alive(), timeout=30, what="the run to end unwatched")
    assert record(outputs, run_id)["state"] in ("starting", "running")  # as it was left

    assert record(outputs, run_id).get("finished_at") is None
    sched = make_scheduler()  # its claims at start find the run ended
    rec = record(outputs, run_id)
    assert rec["state"] == "done", rec
    # When it ended and how, from what the run left (its real parent, who got the exit
    # status, was gone): the summary's end time, and the exit code a done run exits with.
    summary = read_json(outputs / "eval_runs" / run_id / "summary.json")
    assert rec["finished_at"] == summary["finished_at"] and rec["exit_code"] == 0, rec
    assert sched.get_run(run_id).state is RunState.DONE
    out = io.StringIO()
    print_run(Console(file=out, width=200), sched.get_run(run_id))
    assert "reserved" not in out.getvalue(), out.getvalue()  # nothing is held any more
