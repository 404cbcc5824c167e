"""Teardown helpers shared by test folders: end processes by process group, never by name."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evaltui.contract.pidref import PidRef
from evaltui.procs.groups import signal_group
from evaltui.rundir.jsonfiles import read_json
from evaltui.rundir.layout import runs_root
from evaltui.scheduler.scheduler import JobScheduler


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


@contextmanager
def session_starter() -> Iterator[Callable[..., subprocess.Popen[Any]]]:
    """A ``Popen`` that starts each process in a session of its own (with this
    environment unless told); at the end every such group is killed, reaped and its
    pipes closed (the ``popen`` fixtures)."""
    procs: list[subprocess.Popen[Any]] = []

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        kwargs.setdefault("start_new_session", True)
        kwargs.setdefault("env", dict(os.environ))
        proc = subprocess.Popen(args, **kwargs)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        end_session(proc)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def scheduler_maker(outputs: Path,
                    cancel_grace_sec: float) -> Iterator[Callable[..., JobScheduler]]:
    """Build JobSchedulers with fast ticks (the ``make_scheduler`` fixtures); at the end
    all are stopped and their runs under ``outputs`` and nodeset hosts killed."""
    made: list[JobScheduler] = []

    def make(**kwargs: Any) -> JobScheduler:
        kwargs.setdefault("tick_interval", 0.05)
        kwargs.setdefault("probe_interval", 0.05)
        kwargs.setdefault("cancel_grace_sec", cancel_grace_sec)
        scheduler = JobScheduler(**kwargs)
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.stop()
    kill_runs(outputs)
    for scheduler in made:
        for ns in scheduler.nodesets():
            kill_group(ns.pid)
