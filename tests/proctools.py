"""Teardown helpers shared by test folders: end processes by process group, never by name."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from evaltui.process import signal_group
from evaltui.rundir import PidRef, read_json, runs_root


def kill_group(pgid: int) -> None:
    signal_group(pgid, signal.SIGKILL)


def kill_runs(outputs: Path) -> None:
    """SIGKILL the process group of every live run under ``outputs`` (test teardown)."""
    root = runs_root(outputs)
    if not root.is_dir():
        return
    for run_dir in root.iterdir():
        try:
            rec = read_json(run_dir / "scheduler.json")
        except (OSError, ValueError):
            continue
        pid, ctime = rec.get("pid"), rec.get("pid_create_time")
        if isinstance(pid, int) and isinstance(ctime, int | float) and \
                PidRef(pid, float(ctime)).alive():
            kill_group(pid)





def end_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group of ``proc`` (started with ``start_new_session``), gone
    already or not, and reap it."""
    kill_group(proc.pid)
    proc.wait()
