"""A shared nodeset host loaded for runs ends with its last run, even when no scheduler is
left to unload it; one loaded by hand stays; a live owner decides alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from schedhelpers import line_spec, wait_until

from evaltui.contract.pidref import PidRef
from evaltui.rundir.jsonfiles import write_json_atomic
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.shared.hostfiles import HolderWatch, exit_reason, host_file

HERE = Path(__file__).resolve().parent


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], start_new_session=True)


def _host_data(holders: list[str], runs: Path, owner: PidRef | None,
               origin: str = "scheduler", me: PidRef | None = None) -> dict:
    me = me or PidRef.current()
    return {"name": "policy", "key": "k", "pid": me.pid, "pid_create_time": me.create_time,
            "origin": origin, "holders": holders, "runs_root": str(runs),
            "owner": None if owner is None else {"pid": owner.pid,
                                                 "create_time": owner.create_time}}


def test_exit_reason_follows_owner_and_holders(tmp_path: Path) -> None:
    runs = tmp_path / "eval_runs"
    run = _sleeper()
    owner = _sleeper()
    try:
        for name in ("r1", "r2"):
            (runs / name).mkdir(parents=True)
        write_json_atomic(runs / "r1" / "scheduler.json",
                          {"pid": run.pid, "pid_create_time": PidRef.of(run.pid).create_time})
        write_json_atomic(runs / "r2" / "scheduler.json", {"pid": None})  # never spawned
        live_owner = PidRef.of(owner.pid)
        assert exit_reason(_host_data([], runs, live_owner)) is None  # the owner decides
        assert exit_reason(_host_data(["r1", "r2"], runs, None)) is None  # r1 still runs
        assert exit_reason(_host_data([], runs, None, origin="interactive")) is None
        run.kill()
        run.wait()
        assert "no scheduler and no run" in exit_reason(_host_data(["r1", "r2"], runs, None))
        owner.kill()
        owner.wait()
        assert exit_reason(_host_data(["r1"], runs, live_owner)) is not None  # owner dead
    finally:
        for proc in (run, owner):
            proc.kill()
            proc.wait()


def test_the_host_watch_removes_its_file_when_it_leaves(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    watch = HolderWatch(hosts, grace_sec=0.2)
    assert watch.check() is None  # not written yet: its scheduler may be about to
    time.sleep(0.3)
    assert watch.check() == "no scheduler ever recorded it"
    watch = HolderWatch(hosts)
    hosts.mkdir(exist_ok=True)
    write_json_atomic(host_file(hosts, os.getpid()), _host_data([], tmp_path, None))
    assert watch.check() is not None and not host_file(hosts, os.getpid()).exists()


def _alive(ref: PidRef) -> bool:
    return ref.alive()


def test_host_ends_with_its_last_run_after_the_scheduler_is_killed(
        popen: Callable[..., subprocess.Popen[bytes]], sched_env: dict[str, Path],
        dataset: Path, tmp_path: Path) -> None:
    """A model host that runs hold exits once they ended, even if no scheduler starts
    again."""
    spec = line_spec(dataset, episodes=3, sleep_sec=0.5)
    spec["graph"]["nodesets"]["policy"]["parallelism"] = "shared"
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps([{"spec": spec, "wait_running": True}]))
    driver = popen([sys.executable, str(HERE / "sched_driver.py"), "serve", str(specs)],
                   stdout=subprocess.PIPE)
    assert driver.stdout is not None
    (run_id,) = json.loads(driver.stdout.readline())
    hosts = sched_env["state"] / "shared" / "hosts"
    (host_path,) = wait_until(lambda: list(hosts.glob("*.json")), what="the host file")
    data = json.loads(host_path.read_text())
    host = PidRef(int(data["pid"]), float(data["pid_create_time"]))
    record = json.loads((runs_root(sched_env["outputs"]) / run_id / "scheduler.json").read_text())
    run = PidRef(int(record["pid"]), float(record["pid_create_time"]))
    assert data["holders"] == [run_id] and data["origin"] == "scheduler"

    os.kill(driver.pid, signal.SIGKILL)  # no scheduler is left to unload the host
    driver.wait()
    assert _alive(run) and _alive(host)
    time.sleep(1.5)  # the host checks once a second: it must wait for its run
    assert _alive(host) or not _alive(run)
    wait_until(lambda: not _alive(run), timeout=60, what="the run to finish")
    ended = time.monotonic()
    wait_until(lambda: not _alive(host), timeout=10, what="the host to exit")
    assert time.monotonic() - ended < 5.0
    assert not host_path.exists()
    assert (runs_root(sched_env["outputs"]) / run_id / "_DONE").exists()
