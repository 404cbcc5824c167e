"""``evaltui eval``: run one eval in the foreground with a live progress bar.

The run itself is a detached subprocess writing its run dir (the same one the scheduler
spawns). This command starts it first, builds the spec and hands it over; the run process
checks the spec (this process never imports a nodeset module), writes the run dir and
answers with it or with the one-line refusal (:mod:`evaltui.commands.evalstart`). Then
this command follows summary.json, prints the results and turns Ctrl-C into a clean
cancel (SIGTERM to the run's process group).

The progress bar, the result tables and the record models are imported after the
hand-over, while the run starts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.commands.console import FAILED, error, note, warning
from evaltui.commands.runfollow import (
    exit_code,
    follow,
    print_results,
    read_summary,
    refused,
    stderr_console,
    summary_header,
)
from evaltui.contract.states import RunState
from evaltui.engine.executor.kinds import EXECUTORS
from evaltui.graphs import builtin_graph_names

if TYPE_CHECKING:
    from rich.console import Console

    from evaltui.commands.evalstart import DeferredInterrupt, RunProcess


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="run one eval in the foreground (progress bar, results)",
                       description="Score a graph on episodes of a dataset split. TARGET is a "
                       "graph JSON file, a JobSpec JSON file (a dict with a 'graph' key), or "
                       f"a built-in graph name ({', '.join(builtin_graph_names())}).")
    add_spec_arguments(p)
    p.add_argument("--outputs", help="outputs root (default $EVALTUI_OUTPUTS or ./outputs)")
    p.add_argument("--json", action="store_true", help="print the final summary as JSON")
    p.add_argument("--by", metavar="FIELD", help="also the metrics by a row field (default: "
                   "the benchmark's, task for metaworld; none: no groups)")
    p.add_argument("--verbose", action="store_true",
                   help="also print the traceback when a nodeset fails to import or build")
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
    p.add_argument("--workers", type=_workers, help="worker count K, or 'auto': as many as "
                   "the CPU cores free of other runs' reservations (at least 1)")
    budget = p.add_argument(
        "--step-budget", type=int,
        help="max steps per episode (default: the env's own limit -- BabyAI's max_steps, 64 "
        "on GoToLocal, 576 on GoTo/GoToObjMaze -- else %(spec_default)s)")
    budget.spec_default = _SpecDefaultBudget()  # type: ignore[attr-defined]
    p.add_argument("--step-timeout", type=float, help="per_step_budget_sec")
    p.add_argument("--frames", metavar="off|every:N|end",
                   help="pixel frames of the loop env (Meta-World): none, a frame at reset "
                   "and every N steps, or the last step's only (default: the graph's, off)")
    p.add_argument("--max-error-rate", type=float, metavar="F",
                   help="share of episodes that may end error/timeout before the command "
                   "exits 1 (default 0; they count as failures in the metrics either way)")
    p.add_argument("--executor", choices=tuple(EXECUTORS),
                   help="where the K workers run: local subprocesses (default), actors "
                   "on a Ray cluster (needs evaltui[ray]) or job steps of a Slurm job")
    p.add_argument("--ray-address", metavar="HOST:PORT",
                   help="the Ray cluster's head for --executor ray (default: $RAY_ADDRESS, "
                   "else the cluster `ray start` runs on this machine)")
    add_slurm_arguments(p)
    p.add_argument("--set", action="append", default=[], metavar="NODESET.PARAM=VALUE",
                   help="override a node param (JSON value), e.g. --set policy.noise=0.1")
    p.add_argument("--workspace", help="dir prepended to sys.path for user nodesets "
                   "(default: the current dir)")
    p.add_argument("--stop-when", metavar="RULE",
                   help="stop once the metric's 95%% confidence sequence meets RULE: "
                   "'success:width<=0.1', 'success>=0.8', 'success<0.5', joined by 'or'/'and' "
                   "(episodes dealt in a seeded random order; docs/statistics.md)")
    p.add_argument("--order-seed", type=int, metavar="SEED",
                   help="deal the episodes in the random order SEED draws (stratified by "
                   "task); default with --stop-when: drawn and recorded in spec.json")
    p.add_argument("--max-episodes", type=int, metavar="N",
                   help="deal at most N episodes (of the ordered selection)")
    p.add_argument("--replicas", metavar="N|per_gpu",
                   help="host each shared nodeset once per GPU: N replicas, or per_gpu "
                   "(every GPU the run gets); sets replicas on every shared nodeset")


# ---- the --slurm-* options: eval.slurm (DESIGN §12), one field each; a given one
# overrides the spec file's. Here, not in a module of their own: parsing `eval` imports
# evaltui.commands.eval alone.
_OPTIONS = (
    ("--slurm-partition", "partition", str, "P", "partition to submit to (default: the "
     "cluster's default)"),
    ("--slurm-account", "account", str, "A", "account charged for the job"),
    ("--slurm-qos", "qos", str, "Q", "quality of service"),
    ("--slurm-time", "time", str, "T", "the job's time limit in Slurm's formats (90, "
     "1:30:00, 2-00:00:00)"),
    ("--slurm-cpus-per-worker", "cpus_per_worker", int, "N", "CPUs of each worker step "
     "(default 1)"),
    ("--slurm-mem-per-worker", "mem_per_worker_mb", int, "MB", "memory of each worker "
     "step in MB"),
    ("--slurm-gres", "gres", str, "GRES", "gres of the job for shared nodesets (gpu:1)"),
)


def add_slurm_arguments(p: argparse.ArgumentParser) -> None:
    for flag, field, kind, metavar, help_text in _OPTIONS:
        p.add_argument(flag, dest=f"slurm_{field}", type=kind, metavar=metavar,
                       help=f"--executor slurm: {help_text}")
    p.add_argument("--slurm-arg", dest="slurm_extra_args", action="append", default=[],
                   metavar="--OPTION=VALUE",
                   help="--executor slurm: one more sbatch option (repeatable)")


def slurm_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The ``eval.slurm`` fields the options give (the ones left out are absent)."""
    fields = [field for _, field, *_ in _OPTIONS] + ["extra_args"]
    given = {f: getattr(args, f"slurm_{f}", None) for f in fields}
    return {k: v for k, v in given.items() if v not in (None, [])}


class _SpecDefaultBudget:
    """The spec's default step budget, read only when a help text prints it: importing
    evaltui.contract.spec (pydantic) would delay every ``evaltui eval`` before its run starts."""

    def __str__(self) -> str:
        from evaltui.contract.spec import DEFAULT_STEP_BUDGET

        return str(DEFAULT_STEP_BUDGET)


def _workers(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {value!r}") from None


def auto_workers() -> int:
    """``--workers auto``: K from the cores the machine-wide ledger leaves free."""
    from evaltui.scheduler import procs
    from evaltui.scheduler.admission.cores import auto_workers as from_cores
    from evaltui.scheduler.admission.ledger import Ledger

    held = sum(r.cpus for r in Ledger().entries()
               if procs.alive(r.holder_pid, r.holder_create_time))
    return from_cores(held)


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The JobSpec dict that ``eval``/``submit`` options describe."""
    from evaltui.engine.graph.specbuild import build_spec

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


def run(args: argparse.Namespace) -> int:
    from evaltui.commands.evalstart import DeferredInterrupt, start_run_process

    if getattr(args, "verbose", False):
        os.environ["EVALTUI_VERBOSE"] = "1"  # engine.usererrors.VERBOSE_ENV, for the run
    with DeferredInterrupt() as interrupt:
        try:
            early = start_run_process()  # first: its imports overlap with the rest of ours
        except OSError as exc:
            return error(f"cannot start the run process: {exc}", FAILED)
        interrupt.watch(early.proc)
        answer = _start(args, early, interrupt)
        if isinstance(answer, int):
            return answer
        # Imported before Ctrl-C raises again; all of it overlaps with the run's start.
        import rich.progress  # noqa: F401  (follow's)

        import evaltui.contract.records  # noqa: F401  (follow's)  # noqa: F401  (follow's)
        from evaltui.contract.states import RunExit
        from evaltui.contract.views import data_label
        from evaltui.rundir.status import DISK_FULL_NOTE, read_run_status
        from evaltui.rundir.store import update_scheduler_record

        proc, run_dir = early.proc, Path(answer["run_dir"])
        console = stderr_console()
        total = int(answer["episodes"])
        for line in answer["warnings"]:
            warning(line)
        for line in answer.get("notes", ()):
            note(line)
        console.print(f"run [bold]{run_dir.name}[/]: {answer['graph_name']} on "
                      f"{data_label(answer['dataset'], answer['split'])}, {total} episodes, "
                      f"step budget {answer['step_budget']} -> {run_dir}")
    cancelled = interrupt.seen
    if not cancelled:
        try:
            follow(run_dir, proc, total, console)
        except KeyboardInterrupt:
            cancelled = True
    if cancelled:
        _cancel(run_dir, proc, console)
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
        from rich.console import Console

        print_results(Console(), run_dir, state, summary, by=args.by)
    if cancelled or state is RunState.CANCELLED:
        return 130
    if state is RunState.ABORTED:
        console.print(f"[red]aborted[/]: {status.note}", highlight=False)
    return exit_code(state, summary_header(summary), console, run_dir)


def _start(args: argparse.Namespace, early: RunProcess, interrupt: DeferredInterrupt
           ) -> dict[str, Any] | int:
    """Build the spec and hand it over: the run process's answer, or the exit code (2: the
    spec was refused, here or by the run process; 130: Ctrl-C before the run existed)."""
    from evaltui.commands.evalstart import discard, hand_over
    from evaltui.contract.spec import SpecError

    try:
        spec = spec_from_args(args)
    except BaseException as exc:
        discard(early)
        if not isinstance(exc, SpecError):
            raise
        return refused(str(exc))
    if interrupt.seen:
        discard(early)
        return _cancelled_before_start()
    from evaltui.commands.slurmeval import submit_and_follow, wants_submission

    if wants_submission(spec):  # the run process runs as the batch step of a Slurm job
        discard(early)
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
        return refused(answer["refused"])
    return answer


def _cancel(run_dir: Path, proc: subprocess.Popen[bytes], console: Console) -> None:
    """Ctrl-C: record the cancel request, SIGTERM the run's group, SIGKILL it after a
    grace period; the run ends ``cancelled``."""
    from evaltui.procs.groups import terminate_group
    from evaltui.procs.spawn import spawned_ref
    from evaltui.rundir.store import request_cancel

    console.print("[yellow]cancelling[/] (SIGTERM to the run; Ctrl-C again waits anyway)")
    request_cancel(run_dir)
    terminate_group(spawned_ref(proc))


def _cancelled_before_start() -> int:
    stderr_console().print("[yellow]cancelled[/] before the run started (no run dir)")
    return 130
