"""``evaltui eval`` as a user runs it: Ctrl-C cancels the detached run cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
from runhelpers import finished_count, wait_until

from evaltui.contract.states import RunState
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.status import derive_run_state


def slow_eval(tmp_path: Path, outputs: Path) -> subprocess.Popen[str]:
    """``evaltui eval`` of 300 slow episodes, in its own session (ended by group)."""
    return subprocess.Popen(
        [sys.executable, "-m", "evaltui.cli", "eval", "bot", "--episodes", "300",
         "--set", "env.sim_latency_ms=20", "--outputs", str(outputs)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def test_ctrl_c_cancels_the_run_and_leaves_no_process(tmp_path: Path) -> None:
    outputs = tmp_path / "o"
    cli = slow_eval(tmp_path, outputs)
    run_pid = None
    try:
        wait_until(lambda: any(outputs.glob("eval_runs/*/scheduler.json")), what="run dir")
        run_dir = next(outputs.glob("eval_runs/*"))
        wait_until(lambda: finished_count(run_dir) >= 2, what="2 episodes")
        run_pid = read_json(run_dir / "scheduler.json")["pid"]
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait()
        if run_pid and psutil.pid_exists(run_pid):
            try:
                os.killpg(run_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert cli.returncode == 130, err
    assert "cancelling" in err
    assert derive_run_state(run_dir) is RunState.CANCELLED
    assert read_json(run_dir / "summary.json")["status"] == "cancelled"
    assert not psutil.pid_exists(run_pid) or \
        psutil.Process(run_pid).status() == psutil.STATUS_ZOMBIE


def test_ctrl_c_before_the_run_answered_leaves_no_process_and_no_run(tmp_path: Path) -> None:
    """SIGINT as soon as the run process exists, before it has checked the spec: exit
    130; no process of the run is left, and no run dir, or a cancelled one."""
    outputs = tmp_path / "o"
    cli = slow_eval(tmp_path, outputs)
    try:
        wait_until(lambda: started_by(cli.pid), what="the run process")
        cli.send_signal(signal.SIGINT)
        _, err = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
            cli.wait()
    assert cli.returncode == 130, err
    assert "Traceback" not in err
    wait_until(lambda: not started_by(cli.pid), timeout=10, what="no process of the run")
    for run_dir in outputs.glob("eval_runs/*"):
        assert derive_run_state(run_dir) is RunState.CANCELLED


def started_by(cli_pid: int) -> list[psutil.Process]:
    """Live processes started for the CLI ``cli_pid``: its run process, and its zygote and
    workers (all inherit EVALTUI_PARENT_PID from it)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("EVALTUI_PARENT_PID") == str(cli_pid) and \
                    proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found
