"""The run process's side of ``evaltui eval``'s start: the spec comes in, the run dir out.

``evaltui eval`` starts ``python -m evaltui.engine.main --spec-from-stdin --reply-fd N``
before it has even built its spec, then writes one JSON object on the run's stdin,
``{"spec": {...}, "outputs": "DIR" | null}``, and closes it. The run process checks the
spec -- the only check of it: the CLI imports no nodeset module -- and answers on the
reply pipe with one JSON line:

- ``{"refused": "field: message"}``: a SpecError; nothing was written and the process
  exits with :attr:`evaltui.contract.states.RunExit.REFUSED`;
- ``{"run_dir": ..., "graph_name": ..., "dataset": ..., "split": ..., "episodes": n,
  "step_budget": n, "warnings": [...], "notes": [...]}``: the run dir is written, by the same
  ``launch.write_run`` as every submit, its scheduler.json naming this process as the
  run's (state ``starting``, PID and create time); from then on this is that run dir's
  run process, as ``launch.spawn_run`` would have started it: stdout and stderr in
  run.log, stdin /dev/null, the run dir its working dir.

An empty stdin (the CLI refused the options itself, or is gone) means: exit, write nothing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from evaltui.contract.pidref import PidRef
from evaltui.contract.records import RUN_LOG_FILENAME
from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunState
from evaltui.engine.graph.specchecks import validate_spec
from evaltui.rundir.layout import now_iso, outputs_root
from evaltui.rundir.store import outputs_problem, write_run

if TYPE_CHECKING:
    from evaltui.engine.graph.specchecks import CheckedSpec


def read_request(stream: IO[bytes]) -> tuple[dict[str, Any], str | None] | None:
    """The spec and the outputs option the CLI wrote; None if it wrote nothing."""
    data = stream.read()
    if not data.strip():
        return None
    request = json.loads(data)
    return request["spec"], request.get("outputs")


def take_spec(spec_data: Any, outputs: str | None, reply_fd: int, *, stop: threading.Event
              ) -> tuple[Path, CheckedSpec] | None:
    """Check the spec and write its run dir, then answer the CLI (see the module doc).

    None if the spec was refused, or if a stop was asked for before the run dir existed.
    """

    try:
        checked = validate_spec(spec_data)
    except SpecError as exc:
        answer(reply_fd, {"refused": str(exc)})
        return None
    if stop.is_set():
        return None  # the CLI was interrupted: leave nothing behind
    root = outputs_root(outputs)
    problem = outputs_problem(root)  # a file, or a place it cannot write: one line
    if problem is not None:
        answer(reply_fd, {"refused": problem})
        return None
    now = now_iso()
    me = PidRef.of(os.getpid())
    run_dir = write_run(checked, root, state=RunState.STARTING, record_extra={
        "queued_at": now, "admitted_at": now, "pid": me.pid, "pid_create_time": me.create_time})
    settle_in(run_dir, checked)
    ev = checked.spec.eval
    answer(reply_fd, {"run_dir": str(run_dir), "graph_name": checked.graph.name,
                      "dataset": ev.dataset, "split": checked.split,
                      "episodes": min(len(checked.episode_indices),
                                      ev.max_episodes or len(checked.episode_indices)),
                      "step_budget": ev.step_budget,
                      "warnings": list(checked.warnings), "notes": list(checked.notes)})
    return run_dir, checked


def settle_in(run_dir: Path, checked: CheckedSpec) -> None:
    """Become the run dir's run process, as ``spawn_run`` starts one: run.log as stdout
    and stderr, stdin /dev/null, the run dir as cwd."""

    # As if started in the run dir (spawn_run's cwd): the CLI's dir leaves sys.path,
    # unless it is the spec's workspace.
    here, workspace = os.getcwd(), checked.spec.active_workspace_dir
    sys.path[:] = [str(run_dir) if p == here and p != workspace else p for p in sys.path]
    log = os.open(run_dir / RUN_LOG_FILENAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    null = os.open(os.devnull, os.O_RDONLY)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    for fd, target in ((log, 1), (log, 2), (null, 0)):
        os.dup2(fd, target)
    os.close(log)
    os.close(null)
    os.chdir(run_dir)


def answer(reply_fd: int, message: dict[str, Any]) -> None:
    """One JSON line on the reply pipe, which is closed then (the CLI may be gone)."""
    # An OSError: a run dir with its run process and no CLI; the run goes on, like any run.
    with suppress(OSError), os.fdopen(reply_fd, "wb") as reply:
        reply.write(json.dumps(message).encode() + b"\n")
