"""``evaltui eval``: run one eval in the foreground with a live progress bar.

The run itself is a detached subprocess writing its run dir (the same one the scheduler
spawns); this command only prepares the run dir, follows summary.json, prints the
results and turns Ctrl-C into a clean cancel (SIGTERM to the run's process group).

Before the spawn it imports only what validating the spec needs; the progress bar, the
result tables and the record models are imported after it, while the run starts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.graphs import builtin_graph_names
from evaltui.spec import DEFAULT_STEP_BUDGET, SpecError
from evaltui.states import RunState

if TYPE_CHECKING:
    from rich.console import Console

    from evaltui.records import SummaryHeader

POLL_SEC = 0.25


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="run one eval in the foreground (progress bar, results)",
                       description="Score a graph on episodes of a dataset split. TARGET is a "
                       "graph JSON file, a JobSpec JSON file (a dict with a 'graph' key), or "
                       f"a built-in graph name ({', '.join(builtin_graph_names())}).")
    add_spec_arguments(p)
    p.add_argument("--outputs", help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--json", action="store_true", help="print the final summary as JSON")
    p.set_defaults(func=run)


def add_spec_arguments(p: argparse.ArgumentParser) -> None:
    """The options that build a JobSpec (shared by ``eval`` and ``submit``)."""
    p.add_argument("target", nargs="?", help="graph file, JobSpec file or built-in graph name")
    p.add_argument("--demo", action="store_true",
                   help="the built-in bot on 50 BabyAI GoToLocal episodes")
    p.add_argument("--dataset", help="'babyai', a .jsonl file or a dir of {split}.jsonl")
    p.add_argument("--split", help="dataset split, e.g. GoToLocal, GoToObjMaze, GoTo")
    p.add_argument("--episodes", type=int, help="number of episodes (default: all)")
    p.add_argument("--start", type=int, help="first episode index (default 0)")
    p.add_argument("--indices", help="explicit episode indices, comma separated")
    p.add_argument("--workers", type=int, help="worker count K")
    p.add_argument("--step-budget", type=int,
                   help="max steps per episode (default: the env's own limit -- BabyAI's "
                   f"max_steps, 64 on GoToLocal, 576 on GoTo/GoToObjMaze -- else "
                   f"{DEFAULT_STEP_BUDGET})")
    p.add_argument("--step-timeout", type=float, help="per_step_budget_sec")
    p.add_argument("--max-error-rate", type=float, metavar="F",
                   help="share of episodes that may end error/timeout before the command "
                   "exits 1 (default 0; they count as failures in the metrics either way)")
    p.add_argument("--executor", choices=("local", "ray"),
                   help="where the K workers run: local subprocesses (default) or actors "
                   "on a Ray cluster (needs evaltui[ray])")
    p.add_argument("--ray-address", metavar="HOST:PORT",
                   help="the Ray cluster's head for --executor ray (default: $RAY_ADDRESS, "
                   "else the cluster `ray start` runs on this machine)")
    p.add_argument("--set", action="append", default=[], metavar="NODESET.PARAM=VALUE",
                   help="override a node param (JSON value), e.g. --set policy.noise=0.1")
    p.add_argument("--workspace", help="dir prepended to sys.path for user nodesets "
                   "(default: the current dir)")


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The JobSpec dict that ``eval``/``submit`` options describe."""
    from evaltui.specbuild import build_spec

    return build_spec(args.target, demo=args.demo, dataset=args.dataset, split=args.split,
                      episodes=args.episodes, start=args.start, indices=args.indices,
                      workers=args.workers, step_budget=args.step_budget,
                      step_timeout=args.step_timeout, max_error_rate=args.max_error_rate,
                      executor=args.executor, ray_address=args.ray_address,
                      sets=args.set, workspace=args.workspace)


def run(args: argparse.Namespace) -> int:
    # The run process starts now and imports while the spec is validated here.
    early = _prestart_run()
    from evaltui.launch import prepare_run, spawned_ref, update_scheduler_record
    from evaltui.rundir import outputs_root, read_run_status

    try:
        spec = spec_from_args(args)
        workspace = spec.get("active_workspace_dir")
        if workspace and workspace not in sys.path:
            sys.path.insert(0, workspace)  # so user nodesets import during validation
        run_dir, checked = prepare_run(spec, outputs_root(args.outputs))
    except BaseException as exc:
        _discard(early)
        if not isinstance(exc, SpecError):
            raise
        from rich.markup import escape

        # "evaltui[ray]" is no tag
        _console().print(f"[bold red]error[/]: {escape(str(exc))}")
        return 2
    proc = _hand_over(early, run_dir)
    ref = spawned_ref(proc)
    # Imported and printed after the start: all of it overlaps with the run's own start.
    from evaltui.engine.summary import now_iso
    from evaltui.process import terminate_group

    console = _console()
    total = len(checked.episode_indices)
    for warning in checked.warnings:
        console.print(f"[yellow]warning[/]: {warning}", highlight=False)
    console.print(f"run [bold]{run_dir.name}[/]: {checked.graph.name} on "
                  f"{checked.spec.eval.dataset}/{checked.split}, {total} episodes, "
                  f"step budget {checked.spec.eval.step_budget} -> {run_dir}")
    cancelled = False
    try:
        follow(run_dir, proc, total, console)
    except KeyboardInterrupt:
        cancelled = True
        console.print("[yellow]cancelling[/] (SIGTERM to the run; Ctrl-C again waits anyway)")
        update_scheduler_record(run_dir, cancel_requested_at=now_iso())
        terminate_group(ref)
    proc.wait()
    update_scheduler_record(run_dir, exit_code=proc.returncode)
    status = read_run_status(run_dir)
    state = status.state
    summary = _read_summary(run_dir)
    if args.json:
        print(json.dumps({"run_id": run_dir.name, "state": state.value, "summary": summary},
                         indent=2))
    else:
        from rich.console import Console

        print_results(Console(), run_dir, state, summary)
    if cancelled or state is RunState.CANCELLED:
        return 130
    if state is RunState.ABORTED:
        console.print(f"[red]aborted[/]: {status.note}", highlight=False)
    return exit_code(state, _header(summary), console)


def _prestart_run() -> subprocess.Popen[bytes] | None:
    """The run process, started before there is a run dir (``--run-dir-from-stdin``)."""
    env = dict(os.environ)
    env["EVALTUI_PARENT_PID"] = str(os.getpid())  # as spawn_run sets them
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "evaltui.engine.main", "--run-dir-from-stdin"],
            # stderr ours until it has its run.log: an import error shows here.
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
            env=env)
    except OSError:
        return None  # _hand_over spawns the run the usual way


def _hand_over(early: subprocess.Popen[bytes] | None, run_dir: Path
               ) -> subprocess.Popen[bytes]:
    """Give the early process its run dir and record it as the run's (as spawn_run does);
    if it is gone, spawn the run the usual way."""
    from evaltui.engine.summary import now_iso
    from evaltui.launch import spawn_run, spawned_ref, update_scheduler_record

    if early is not None and early.poll() is None and early.stdin is not None:
        try:
            early.stdin.write(f"{run_dir}\n".encode())
            early.stdin.close()
        except OSError:
            pass  # it died just now: poll() below says so
        else:
            ref = spawned_ref(early)
            update_scheduler_record(run_dir, state=RunState.STARTING.value,
                                    admitted_at=now_iso(), pid=early.pid,
                                    pid_create_time=ref.create_time)
            return early
    _discard(early)
    return spawn_run(run_dir)


def _discard(early: subprocess.Popen[bytes] | None) -> None:
    """Stop an early run process that will get no run dir (it has done nothing yet)."""
    if early is None:
        return
    if early.stdin is not None:
        try:
            early.stdin.close()  # on its own it exits at this end of input
        except OSError:  # a broken pipe: it is gone already, or the kill below ends it
            pass
    if early.poll() is None:
        os.killpg(early.pid, signal.SIGKILL)  # rather than wait for its imports
    early.wait()


def exit_code(state: RunState, summary: SummaryHeader | None, console: Console) -> int:
    """0 for a done run within its error allowance; else 1, with the reason on stderr."""
    if state is not RunState.DONE:
        if summary is not None and summary.error:
            console.print(f"[red]error[/]: {summary.error}", highlight=False)
        return 1
    if summary is not None and summary.error_rate_exceeded:
        first = summary.first_error
        console.print(
            f"[red]error[/]: {summary.error_count} of {summary.episodes_finished} "
            f"episodes errored (allowed: {summary.max_error_rate or 0:.0%}, "
            "--max-error-rate); first: episode "
            f"{first.episode_index if first else None}: {first.message if first else None}",
            highlight=False)
        return 1
    return 0


def _console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _header(summary: dict[str, Any] | None) -> SummaryHeader | None:
    """summary.json's header as its record (None if absent or not fitting the schema)."""
    from evaltui.records import SUMMARY_FILENAME, SummaryHeader, parse

    rows_left_out = {k: v for k, v in (summary or {}).items() if k != "episodes"}
    return parse(SummaryHeader, rows_left_out or None, SUMMARY_FILENAME)[0]


def follow(run_dir: Path, proc: Any, total: int, console: Console) -> None:
    """A progress bar over the run's summary.json until the subprocess exits."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TextColumn("{task.fields[live]}"),
                  TimeRemainingColumn(), console=console, transient=False) as progress:
        task = progress.add_task("episodes", total=total, live="")
        while True:
            exited = proc.poll() is not None
            summary = _read_summary(run_dir)
            if summary:
                sr = summary.get("metrics", {}).get("success")
                counts = summary.get("counts_by_status", {})
                bad = sum(v for k, v in counts.items() if k != "ok")
                live = f"SR {sr:.3f}" if sr is not None else ""
                live += f"  [red]{bad} not ok[/]" if bad else ""
                progress.update(task, completed=summary.get("episodes_finished", 0), live=live)
            if exited:
                return
            try:
                proc.wait(POLL_SEC)  # returns as soon as the run exits, not up to 0.25 s later
            except subprocess.TimeoutExpired:
                pass


def _read_summary(run_dir: Path) -> dict[str, Any] | None:
    from evaltui.records import SUMMARY_FILENAME
    from evaltui.rundir import read_json

    try:
        data = read_json(run_dir / SUMMARY_FILENAME)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def print_results(console: Console, run_dir: Path, state: RunState,
                  summary: dict[str, Any] | None) -> None:
    colour = {"done": "green", "cancelled": "yellow"}.get(state.value, "red")
    console.print(f"run {run_dir.name}: [bold {colour}]{state.value}[/]")
    if not summary:
        console.print(f"no summary.json; see {run_dir / 'run.log'}")
        return
    if summary.get("error"):
        console.print(f"[red]{summary['error']}[/]")
    from evaltui.results.richtables import metrics_table

    console.print(metrics_table(summary))
    counts = ", ".join(f"{k} {v}" for k, v in summary.get("counts_by_status", {}).items())
    console.print(f"episodes {summary.get('episodes_finished')}/{summary.get('episodes_total')}"
                  f" ({counts}) in {summary.get('elapsed_sec', 0):.1f} s -> {run_dir}")
