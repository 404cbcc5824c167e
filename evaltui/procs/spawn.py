"""Spawning a run: ``python -m evaltui.engine.main RUN_DIR`` in its own session, detached, so
the run outlives whoever started it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import psutil

from evaltui.contract.pidref import PidRef
from evaltui.contract.records import (
    RUN_LOG_FILENAME,
)
from evaltui.contract.states import RunState
from evaltui.rundir.layout import now_iso
from evaltui.rundir.store import update_scheduler_record


def spawn_run(run_dir: Path, env: Mapping[str, str] | None = None, *, record: bool = True
              ) -> subprocess.Popen[bytes]:
    """Start the run subprocess in a new session.

    ``env`` replaces the environment (default: this process's); the scheduler passes one
    with ``CUDA_VISIBLE_DEVICES`` set. With ``record`` the PID is merged into
    scheduler.json here; the scheduler passes False and writes its own record.
    """
    child_env = dict(os.environ if env is None else env)
    child_env["EVALTUI_PARENT_PID"] = str(os.getpid())
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    with open(run_dir / RUN_LOG_FILENAME, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evaltui.engine.main", str(run_dir)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=child_env, cwd=run_dir,
        )
    if record:
        ref = spawned_ref(proc)
        update_scheduler_record(run_dir, state=RunState.STARTING.value, admitted_at=now_iso(),
                                pid=proc.pid, pid_create_time=ref.create_time)
    return proc


def spawned_ref(proc: subprocess.Popen[bytes]) -> PidRef:
    """The PidRef of a child we spawned; while unreaped its PID cannot be reused."""
    try:
        return PidRef.of(proc.pid)
    except psutil.Error:
        # Exited and reaped already: a create time of 0 never matches a live process.
        return PidRef(proc.pid, 0.0)
