"""``evaltui eval`` once its run process is starting: the spec built and handed over (or
submitted to Slurm), and, after the run is followed, its end recorded and said.

:mod:`evaltui.commands.eval` imports this module right after it started the run process,
so that these imports (pydantic, Rich, the spec builder) overlap with that start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from evaltui.commands.console import FAILED, INTERRUPTED, error, note, warning
from evaltui.commands.eval import slurm_from_args
from evaltui.commands.evalstart import DeferredInterrupt, RunProcess, discard, hand_over
from evaltui.commands.runend import exit_code, print_results, summary_header
from evaltui.commands.runfollow import read_summary
from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunExit, RunState
from evaltui.contract.views import data_label
from evaltui.engine.executor.kinds import executor_of
from evaltui.engine.graph.specbuild import build_spec
from evaltui.procs.groups import terminate_group
from evaltui.procs.spawn import spawned_ref
from evaltui.rundir.status import DISK_FULL_NOTE, read_run_status
from evaltui.rundir.store import request_cancel, update_scheduler_record
from evaltui.scheduler import procs
from evaltui.scheduler.admission.cores import auto_workers as from_cores
from evaltui.scheduler.admission.ledger import Ledger


@dataclass
class Started:
    """A run that took its spec: its process and run dir, to follow."""

    proc: subprocess.Popen[bytes]
    run_dir: Path
    total: int
    console: Console


def auto_workers() -> int:
    """``--workers auto``: K from the cores the machine-wide ledger leaves free."""
    held = sum(r.cpus for r in Ledger().entries()
               if procs.alive(r.holder_pid, r.holder_create_time))
    return from_cores(held)


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The JobSpec dict that ``eval``/``submit`` options describe."""
    spec = build_spec(args.target, demo=args.demo, dataset=args.dataset, split=args.split,
                      episodes=args.episodes, start=args.start, indices=args.indices,
                      workers=auto_workers() if args.workers == "auto" else args.workers,
                      step_budget=args.step_budget,
                      step_timeout=args.step_timeout, max_error_rate=args.max_error_rate,
                      executor=args.executor, ray_address=args.ray_address,
                      slurm=slurm_from_args(args), sets=args.set, workspace=args.workspace,
                      replicas=args.replicas, stop_when=args.stop_when,
                      order_seed=args.order_seed, max_episodes=args.max_episodes)
    frames = args.frames
    graph = spec.get("graph")
    if frames and isinstance(graph, dict) and isinstance(graph.get("loop"), dict):
        # The loop env's ``frames`` param (Meta-World's); spec check refuses an env
        # without one, and a bad value, in one line.
        selectors = spec.setdefault("eval", {}).setdefault("selectors", {})
        selectors[f"{graph['loop'].get('env')}.frames"] = frames
    return spec


def wants_submission(spec: dict[str, Any]) -> bool:
    """A Slurm run asked for outside an allocation: it must be submitted. (Inside one --
    an salloc shell, a batch script -- the run process runs here and its workers are steps
    of that allocation.)"""
    return executor_of(spec).batch and not os.environ.get("SLURM_JOB_ID")


def start(args: argparse.Namespace, early: RunProcess, interrupt: DeferredInterrupt
          ) -> Started | int:
    """Build the spec and hand it over, then say what runs; or the exit code (2: the spec
    was refused, here or by the run process; 130: Ctrl-C before the run existed; a Slurm
    run's, followed to its end)."""
    try:
        spec = spec_from_args(args)
    except BaseException as exc:
        discard(early)
        if not isinstance(exc, SpecError):
            raise
        return error(str(exc))
    if interrupt.seen:
        discard(early)
        return _cancelled_before_start()
    if wants_submission(spec):  # the run process runs as the batch step of a Slurm job
        discard(early)
        # start-up: Slurm's side, and the spec check it does here, for a Slurm run only:
        # a local run's spec is checked by the run process (this one never imports it)
        from evaltui.commands.slurmeval import submit_and_follow

        return submit_and_follow(args, spec, interrupt)
    answer = hand_over(early, spec, args.outputs)
    if answer is None:
        code = early.proc.wait()
        if interrupt.seen:
            return _cancelled_before_start()
        return error(f"the run process ended (exit code {code}) before it took the spec; "
                     "its output is above", FAILED)
    if "refused" in answer:
        early.proc.wait()  # it wrote nothing and exits at once
        return error(answer["refused"])
    started = Started(early.proc, Path(answer["run_dir"]), int(answer["episodes"]),
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


def _cancelled_before_start() -> int:
    Console(stderr=True).print("[yellow]cancelled[/] before the run started (no run dir)")
    return INTERRUPTED
