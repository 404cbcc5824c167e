"""The run ``evaltui eval`` follows, once the run process took its spec: said when it
starts, and when it ends (cancelled on Ctrl-C), its exit code recorded and its results
printed. :mod:`evaltui.commands.eval` imports this module after the hand-over, while the
run starts."""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from evaltui.commands.console import INTERRUPTED, note, warning
from evaltui.contract.states import RunExit, RunState
from evaltui.contract.views import data_label
from evaltui.procs.groups import terminate_group
from evaltui.procs.spawn import spawned_ref
from evaltui.rundir.status import DISK_FULL_NOTE, read_run_status
from evaltui.rundir.store import request_cancel, update_scheduler_record
from evaltui.rundir.summaryfile import read_summary, summary_header


@dataclass
class Started:
    """A run that took its spec: its process and run dir, to follow."""

    proc: subprocess.Popen[bytes]
    run_dir: Path
    total: int
    console: Console


def begin(proc: subprocess.Popen[bytes], answer: dict[str, Any]) -> Started:
    """The run that took its spec, said (its warnings, then what runs where)."""
    started = Started(proc, Path(answer["run_dir"]), int(answer["episodes"]),
                      Console(stderr=True))
    for line in answer["warnings"]:
        warning(line)
    for line in answer.get("notes", ()):
        note(line)
    started.console.print(
        f"run [bold]{started.run_dir.name}[/]: {answer['graph_name']} on "
        f"{data_label(answer['dataset'], answer['split'])}, {started.total} episodes, "
        f"step budget {answer['step_budget']} -> {started.run_dir}")
    return started


def finish(args: argparse.Namespace, started: Started, cancelled: bool) -> int:
    """The followed run's end (cancelled on Ctrl-C): recorded, its results printed; the
    exit code."""
    # start-up: the result tables (numpy) once the run has ended, not while it starts
    from evaltui.commands.runend import exit_code, print_results

    proc, run_dir, console = started.proc, started.run_dir, started.console
    if cancelled:
        console.print("[yellow]cancelling[/] (SIGTERM to the run; Ctrl-C again waits anyway)")
        request_cancel(run_dir)
        terminate_group(spawned_ref(proc))
    proc.wait()
    try:
        update_scheduler_record(run_dir, exit_code=proc.returncode)
    except OSError as exc:  # a full (or read-only) disk: one line, not a traceback
        if proc.returncode != RunExit.DISK_FULL:  # that one's line is below
            console.print(f"[yellow]warning[/]: cannot record the exit code in "
                          f"{run_dir / 'scheduler.json'}: {exc.strerror or exc}",
                          highlight=False)
    status = read_run_status(run_dir)
    state = status.state
    summary = read_summary(run_dir)
    if proc.returncode == RunExit.DISK_FULL and state is not RunState.FAILED:
        state = RunState.FAILED  # the run process said "disk full" the only way it could
        console.print(f"[red]error[/]: {DISK_FULL_NOTE.format(run_dir=run_dir)}",
                      highlight=False, soft_wrap=True)
    if args.json:
        print(json.dumps({"run_id": run_dir.name, "state": state.value, "summary": summary},
                         indent=2))
    else:
        print_results(Console(), run_dir, state, summary, by=args.by)
    if cancelled or state is RunState.CANCELLED:
        return INTERRUPTED
    if state is RunState.ABORTED:
        console.print(f"[red]aborted[/]: {status.note}", highlight=False)
    return exit_code(state, summary_header(summary), run_dir)
