"""``evaltui eval``: run one eval in the foreground with a live progress bar.

The run itself is a detached subprocess writing its run dir (the same one the scheduler
spawns). This command starts it first, builds the spec and hands it over; the run process
checks the spec (this process never imports a nodeset module), writes the run dir and
answers with it or with the one-line refusal (:mod:`evaltui.commands.evalstart`). Then
this command follows summary.json, prints the results and turns Ctrl-C into a clean
cancel (SIGTERM to the run's process group).

Parsing ``eval`` imports this module, console and runfollow only; the rest is imported in
stages that overlap with the run process's start (docs/performance.md): the spec builder
(:mod:`evaltui.commands.evalspec`) once it is started, Rich and the run dir's records
(:mod:`evaltui.commands.evalrun`) once it has the spec, the result tables at the end.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from evaltui.commands.console import FAILED, error
from evaltui.commands.runfollow import follow
from evaltui.engine.executor.kinds import EXECUTORS
from evaltui.graphs import builtin_graph_names


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval",
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
        # start-up: pydantic only for --help (see the docstring)
        from evaltui.contract.spec import DEFAULT_STEP_BUDGET

        return str(DEFAULT_STEP_BUDGET)


def _workers(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {value!r}") from None


def run(args: argparse.Namespace) -> int:
    if getattr(args, "verbose", False):
        os.environ["EVALTUI_VERBOSE"] = "1"  # engine.usererrors.VERBOSE_ENV, for the run
    # start-up: stdlib only, but not loaded by parsing `eval` (tests/test_cli.py pins it)
    from evaltui.commands.evalstart import DeferredInterrupt, start_run_process

    with DeferredInterrupt() as interrupt:
        try:
            early = start_run_process()  # first: its imports overlap with the rest of ours
        except OSError as exc:
            return error(f"cannot start the run process: {exc}", FAILED)
        interrupt.watch(early.proc)
        # start-up: the spec builder (pydantic) while the run process starts
        from evaltui.commands import evalspec

        answer = evalspec.hand_over_spec(args, early, interrupt)
        if isinstance(answer, int):
            return answer
        # start-up: Rich and the run dir's records after the hand-over, while the run
        # starts (and before Ctrl-C raises again)
        from evaltui.commands import evalrun

        started = evalrun.begin(early.proc, answer)
    cancelled = interrupt.seen
    if not cancelled:
        try:
            follow(started.run_dir, started.proc, started.total, started.console)
        except KeyboardInterrupt:
            cancelled = True
    return evalrun.finish(args, started, cancelled)
