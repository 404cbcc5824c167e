"""Prepare a run dir from a JobSpec and spawn its run subprocess detached.

``prepare_run`` validates first and writes nothing on bad input (DESIGN §4); only then
is a run_id allocated and spec.json, shared_urls.json and scheduler.json written.
``spawn_run`` starts ``python -m evaltui.engine.main RUN_DIR`` in its own session, so
the run outlives whoever started it; its stdout and stderr go to ``run.log``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from evaltui.engine.summary import now_iso
from evaltui.rundir import PidRef, allocate_run_dir, read_json, write_json_atomic
from evaltui.spec import CheckedSpec, validate_spec
from evaltui.states import RunState


def prepare_run(spec_data: Any, outputs: Path, *, state: RunState = RunState.QUEUED
                ) -> tuple[Path, CheckedSpec]:
    """Validate (raising SpecError), then allocate the run dir and write its records."""
    checked = validate_spec(spec_data)
    run_dir = allocate_run_dir(outputs)
    spec_json = checked.spec.to_json_dict()
    write_json_atomic(run_dir / "spec.json", spec_json)
    write_json_atomic(run_dir / "shared_urls.json", dict(checked.spec.shared_urls))
    write_json_atomic(run_dir / "scheduler.json", {
        "state": state.value,
        "priority": checked.spec.scheduling.priority,
        "queued_at": now_iso(),
        "admitted_at": None,
        "pid": None,
        "pid_create_time": None,
        "reservation": None,
        "cancel_requested_at": None,
        "exit_code": None,
    })
    return run_dir, checked


def spawn_run(run_dir: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start the run subprocess in a new session and record its PID in scheduler.json."""
    child_env = dict(os.environ if env is None else env)
    child_env["EVALTUI_PARENT_PID"] = str(os.getpid())
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    with open(run_dir / "run.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "evaltui.engine.main", str(run_dir)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=child_env, cwd=run_dir,
        )
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


def update_scheduler_record(run_dir: Path, **fields: Any) -> dict[str, Any]:
    path = run_dir / "scheduler.json"
    record = read_json(path) if path.exists() else {}
    record.update(fields)
    write_json_atomic(path, record)
    return record
