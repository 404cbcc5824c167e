"""``evaltui submit``: queue an eval on a backend; ``--wait`` follows it with a progress bar.

The spec is built exactly as ``evaltui eval`` builds it (same target and options), plus
the scheduling fields. Ctrl-C while waiting stops waiting only: the run goes on (cancel
it with ``evaltui cancel RUN_ID``). Exit codes with ``--wait``: 0 done, 1 failed or
aborted, 3 cancelled, 130 interrupted.

``--executor slurm``: the backend submits the run's job to Slurm from its machine (sbatch
there, the run dir under its outputs) and follows it; a backend whose machine has no Slurm
refuses it, one line (exit 2). Nothing here needs Slurm.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evaltui.api.client import ApiClient
from evaltui.api.models import Run
from evaltui.commands.console import error, note, warning
from evaltui.commands.eval import add_spec_arguments
from evaltui.commands.evalspec import spec_from_args
from evaltui.commands.runs import client_options, emit_json, reachable
from evaltui.commands.runtables import print_run, state_text
from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunExit, RunState
from evaltui.engine.executor.kinds import executor_of
from evaltui.graphs import builtin_graph_names

# --wait exits as the run process would have (evaltui eval does the same).
EXIT_BY_STATE = {RunState.DONE: RunExit.OK, RunState.CANCELLED: RunExit.CANCELLED}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit",
                       description="Queue an eval on the backend at $BACKEND_URL. TARGET is a "
                       "graph JSON file, a JobSpec JSON file or a built-in graph name "
                       f"({', '.join(builtin_graph_names())}).")
    add_spec_arguments(p)
    p.add_argument("--priority", type=int, help="-100..100; higher is admitted first")
    p.add_argument("--vram-mb", type=int, help="declared VRAM need (marginal_vram_mb)")
    p.add_argument("--exclusive", action="store_true", help="exclusive_gpu")
    p.add_argument("--tie-to-backend", action="store_true",
                   help="kill the run if the backend dies")
    p.add_argument("--wait", action="store_true", help="follow the run until it ends")
    client_options(p, run, probe=False)


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    try:
        spec = spec_from_args(args)
    except SpecError as exc:
        return error(str(exc))
    kind = executor_of(spec)  # said before the backend is asked; a Slurm run is the backend
    if not kind.batch and (missing := kind.missing()):  # host's to submit, with its commands
        return error(f"eval.executor: {missing}")
    scheduling = dict(spec.get("scheduling") or {})
    for key, value in (("priority", args.priority), ("marginal_vram_mb", args.vram_mb),
                       ("exclusive_gpu", args.exclusive or None),
                       ("tie_to_backend", args.tie_to_backend or None)):
        if value is not None:
            scheduling[key] = value
    spec["scheduling"] = scheduling
    client: ApiClient = args.client
    reachable(client)
    ref = client.submit(spec)
    for line in ref.warnings:
        warning(line)
    for line in ref.notes:
        note(line)
    if not args.wait:
        if args.json:
            emit_json(ref.model_dump(mode="json"))
        else:
            Console().print(f"run [bold]{ref.run_id}[/]: {state_text(ref.state.value)} "
                            f"on {client.base_url}", highlight=False)
        return 0
    console.print(f"run [bold]{ref.run_id}[/] queued on {client.base_url}", highlight=False)
    try:
        final = follow(client, ref.run_id, console)
    except KeyboardInterrupt:
        console.print(f"stopped waiting; run {ref.run_id} goes on "
                      f"(evaltui cancel {ref.run_id} to stop it)", highlight=False)
        return 130
    if args.json:
        emit_json(final.model_dump(mode="json"))
    else:
        print_run(Console(), final)
    return int(EXIT_BY_STATE.get(final.state, RunExit.FAILED))


def follow(client: ApiClient, run_id: str, console: Console, poll_sec: float = 0.5) -> Run:
    """A progress bar over the run until it is in a terminal state; returns it then."""
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                  transient=False) as progress:
        task = progress.add_task("queued", total=None, note="")
        while True:
            run = client.get_run(run_id)
            summary, spec = run.summary, run.spec
            total = summary.episodes_total if summary else None
            if total is None and spec is not None:
                total = spec.episodes_total
            sr = summary.metrics.get("success") if summary else None
            if run.state is RunState.QUEUED:
                note = run.waiting_reason or ""
            else:
                note = f"SR {sr:.3f}" if sr is not None else ""
            progress.update(task, description=run.state.value, total=total, note=note,
                            completed=summary.episodes_finished if summary else 0)
            if run.state.terminal:
                return run
            time.sleep(poll_sec)

