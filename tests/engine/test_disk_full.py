"""A full outputs disk is a condition, not a crash (DESIGN §12).

The outputs root is a small tmpfs filled to the last byte (root only; skipped elsewhere):
real BabyAI runs (``evaltui eval``, and a run of an embedded scheduler) meet ENOSPC on
every write of their run dir, for 2 s or for good.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runhelpers import finished_count, wait_until

from evaltui.contract.states import RunState
from evaltui.engine.graph.specbuild import build_spec
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.scheduler import JobScheduler

EPISODES = 24


def eval_cli(outputs: Path, tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    """``evaltui eval`` of slow BabyAI episodes (20 ms a step) on two workers."""
    return subprocess.Popen(
        [sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes", str(EPISODES),
         "--workers", "2", "--set", "env.sim_latency_ms=20", "--outputs", str(outputs)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env={**os.environ, **env})


def run_dir_of(outputs: Path) -> Path:
    return wait_until(lambda: next(iter(runs_root(outputs).glob("*/spec.json")), None),
                      what="the run dir").parent


def end(cli: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    try:
        return cli.communicate(timeout=timeout)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.communicate()


def statuses(run_dir: Path) -> dict[int, str]:
    found = {}
    for path in run_dir.glob("episodes/ep*/episode.json"):
        found[int(path.parent.name[2:])] = read_json(path)["status"]
    return found


def test_a_disk_full_for_two_seconds_mid_run_and_the_run_completes(tmp_path: Path,
                                                                  small_disk) -> None:
    disk = small_disk("outputs", "64m")
    cli = eval_cli(disk.path, tmp_path)
    run_dir = run_dir_of(disk.path)
    wait_until(lambda: finished_count(run_dir) >= 3, timeout=60, what="3 episodes")
    disk.fill()
    time.sleep(2.0)  # the fault itself: the disk stays full for 2 s
    disk.free()
    out, err = end(cli, 120)
    assert cli.returncode == 0, out + err
    assert "Traceback" not in out + err
    summary = read_json(run_dir / "summary.json")
    assert summary["status"] == "done" and summary["counts_by_status"] == {"ok": EPISODES}
    wait = summary["disk_wait"]
    assert wait["waited_sec"] >= 1.0 and wait["waiting_since"] is None, wait
    assert wait["path"].startswith(str(run_dir))
    assert statuses(run_dir) == dict.fromkeys(range(EPISODES), "ok")  # each exactly once
    assert all(r["attempts"] == 1 for r in summary["episodes"])


def test_evaltui_eval_on_a_disk_full_for_good_fails_in_one_line(tmp_path: Path,
                                                                small_disk) -> None:
    disk = small_disk("outputs", "64m")
    cli = eval_cli(disk.path, tmp_path, EVALTUI_DISK_FULL_WAIT_SEC="1")
    run_dir = run_dir_of(disk.path)
    wait_until(lambda: finished_count(run_dir) >= 3, timeout=60, what="3 episodes")
    disk.fill()
    out, err = end(cli, 60)
    assert cli.returncode == 1, out + err
    assert "Traceback" not in out + err
    assert f"disk full: {run_dir}" in err, err
    assert "failed" in out
    assert "cannot record" not in err  # one line says it all


def test_a_scheduled_run_on_a_disk_full_for_good_fails_then_resumes_the_missing_ones(
        tmp_path: Path, small_disk, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = small_disk("outputs", "64m")
    monkeypatch.setenv("EVALTUI_DISK_FULL_WAIT_SEC", "1")
    spec = build_spec("bot", episodes=EPISODES, workers=2, sets=["env.sim_latency_ms=20"])
    with JobScheduler(disk.path, tick_interval=0.05) as sched:
        run_id, _ = sched.submit(spec)
        run_dir = runs_root(disk.path) / run_id
        wait_until(lambda: finished_count(run_dir) >= 3, timeout=60, what="3 episodes")
        disk.fill()
        # Nothing of the run dir can be written: until there is room it reads as ended
        # without a word (aborted); the scheduler keeps the record it could not write.
        assert sched.wait(run_id, timeout=60).terminal
        disk.free()
        wait_until(lambda: sched.get_run(run_id).state is RunState.FAILED,
                   what="the run to read failed once its record could be written")
        record = sched.get_run(run_id).scheduler
        assert record is not None and record.exit_code == 4
        assert f"disk full: {run_dir}" in (record.error or ""), record.error
        # Its summary, which it could not write at the end, says so too (not `running`).
        summary = read_json(run_dir / "summary.json")
        assert summary["status"] == "failed" and "disk full" in summary["error"], summary
        kept = {i: read_json(run_dir / f"episodes/ep{i:04d}/episode.json")["finished_at"]
                for i, s in statuses(run_dir).items() if s == "ok"}
        assert 3 <= len(kept) < EPISODES
        sched.resume(run_id)
        assert sched.wait(run_id, timeout=120) is RunState.DONE
    summary = read_json(run_dir / "summary.json")
    assert summary["counts_by_status"] == {"ok": EPISODES}
    assert statuses(run_dir) == dict.fromkeys(range(EPISODES), "ok")
    for i, finished_at in kept.items():  # resume re-ran exactly the missing episodes
        assert read_json(run_dir / f"episodes/ep{i:04d}/episode.json")["finished_at"] == \
            finished_at
