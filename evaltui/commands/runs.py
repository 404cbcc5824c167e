"""``evaltui ls | show | cancel | resume | logs``: clients of a backend's HTTP API.

They talk to ``$BACKEND_URL`` (default ``http://127.0.0.1:8000``, or ``--url``) with
the state dir's token (or ``$EVALTUI_TOKEN``), print rich tables for people and, with
``--json``, plain JSON for scripts. ``show`` also takes a run dir, read locally with no
backend (a run id too, from the outputs root, when no backend answers), and
``show --format md|csv|latex`` prints only the metrics table (for a paper).
Exit codes (docs/cli.md): 0 ok, 1 the backend refused or failed (a conflict, no
backend), 2 invalid input (bad command line or spec, an unknown run id).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from evaltui.api.client import (
    ApiClient,
    ApiError,
    BackendTimeout,
    BackendUnavailable,
    InvalidRequest,
    NotFound,
)
from evaltui.api.models import EpisodeRow, Run, RunRef
from evaltui.commands.console import FAILED, USAGE, error
from evaltui.commands.runtables import (
    episodes_table,
    format_log_record,
    print_run,
    runs_table,
    state_text,
)
from evaltui.contract.states import AdmitState, RunState
from evaltui.contract.views import Admit, run_view
from evaltui.results.groups import GroupByError, group_by_field, groups_json, metric_groups
from evaltui.results.runrows import RunDirError, load_run, resolve_run_dir
from evaltui.results.tables import FORMATS, grouped_metrics_table, grouped_table, summary_table
from evaltui.rundir.status import read_run_status
from evaltui.slurm.follow import follow_status, waiting_reason

FOLLOW_POLL_SEC = 0.5
"""``logs --follow``: how often it asks for new lines."""
HEALTH_TIMEOUT_SEC = 3.0
"""How long a command waits for a backend's first answer (its health) before saying so."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ls, show, cancel, resume and logs."""
    p = sub.add_parser("ls", description="List runs, newest "
                       "first.")
    p.add_argument("--state", choices=[s.value for s in RunState], help="only runs in STATE")
    p.add_argument("--limit", type=int, default=50, help="at most N runs (0: all; default 50)")
    client_options(p, run_ls)

    p = sub.add_parser("show",
                       description="Show a run: a run id asks the backend, a run dir is "
                       "read locally.")
    p.add_argument("run_id", metavar="RUN", help="run id, or a run dir (read locally)")
    p.add_argument("--episodes", action="store_true", help="also list its episodes")
    p.add_argument("--by", metavar="FIELD", help="metrics by a row field: mean [95%% CI] and n "
                   "per group plus the overall row, e.g. task, scene_id (default: the "
                   "benchmark's, task for metaworld; none: no groups)")
    p.add_argument("--format", choices=FORMATS, help="print only the metrics table, as "
                   "Markdown, CSV or LaTeX (booktabs)")
    p.add_argument("--digits", type=int, default=None, help="decimals with --format "
                   "(default 3; CSV: every digit)")
    p.add_argument("--outputs", help="outputs root a run id is read from when no backend "
                   "answers (default $EVALTUI_OUTPUTS or ./outputs)")
    client_options(p, run_show)
    p.set_defaults(func=show)

    p = sub.add_parser("cancel")
    p.add_argument("run_ids", nargs="+", metavar="RUN", help="a run id or run dir")
    client_options(p, run_cancel)

    p = sub.add_parser("resume")
    p.add_argument("run_ids", nargs="+", metavar="RUN", help="a run id or run dir")
    p.add_argument("--more", type=int, nargs="?", const=0, default=None, metavar="N",
                   help="a run stopped by its rule (--stop-when), or cut by --max-episodes in "
                   "a seeded order: deal N more episodes of its order past the stop (no N: to "
                   "the end); its confidence sequence stays valid")
    client_options(p, run_resume)

    p = sub.add_parser("logs")
    p.add_argument("run_id", metavar="RUN", help="a run id or run dir")
    p.add_argument("episode", type=int, help="episode index")
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep printing while the run is active")
    client_options(p, run_logs)


def client_options(p: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int], *,
                   probe: bool = True) -> None:
    """``--url`` and ``--json``, and ``func`` run by :func:`with_client`."""
    p.add_argument("--url", help="backend URL (default $BACKEND_URL or http://127.0.0.1:8000)")
    p.add_argument("--json", action="store_true", help="JSON output for scripts")
    p.set_defaults(func=lambda args: with_client(args, func, probe=probe))


def with_client(args: argparse.Namespace, func: Callable[[argparse.Namespace], int],
                offline: Callable[[argparse.Namespace], int | None] | None = None,
                *, probe: bool = True) -> int:
    """Run ``func`` with ``args.client`` set; API errors become a message and an exit code.
    With no backend to ask, ``offline`` (if given) may answer instead (None: it cannot).
    ``probe=False``: ``func`` calls :func:`reachable` itself, once it has checked what it
    can without the backend (submit refuses a ray spec without ray before asking)."""
    try:
        with ApiClient(args.url) as client:
            args.client = client
            if probe:
                reachable(client)
            return func(args)
    except BackendUnavailable as exc:
        code = offline(args) if offline is not None else None
        if code is not None:
            return code
        return error(str(exc), FAILED)
    except ApiError as exc:
        # An unknown id is a mistake in the input, as everywhere (show of a dir, verify).
        return error(str(exc), USAGE if isinstance(exc, InvalidRequest | NotFound)
                     else FAILED)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `evaltui logs ... | head`: the reader left; quietly, and without a second error
        # when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def reachable(client: ApiClient) -> None:
    """Raise BackendUnavailable within seconds when nothing (or something that never
    answers) listens at the URL: every later call may wait up to the client's 30 s."""
    try:
        client.health(timeout=HEALTH_TIMEOUT_SEC)
    except BackendTimeout:
        raise BackendTimeout(
            f"{client.base_url} took the connection but did not answer within "
            f"{HEALTH_TIMEOUT_SEC:g} s: is an evaltui backend listening there "
            f"(`evaltui serve`), or is it stuck?") from None


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# ---- commands -------------------------------------------------------------------------------


def _holding_admits(client: ApiClient) -> list[Admit]:
    """Admitted entries running their command; none where the backend has no admit
    routes (a backend started without ``evaltui run`` entries, or an older one)."""
    try:
        admits = client.list_admits()
    except NotFound:
        return []
    return [a for a in admits if a.state is AdmitState.ADMITTED]


def run_ls(args: argparse.Namespace) -> int:
    client: ApiClient = args.client
    runs = client.list_runs(args.state, limit=args.limit or None)
    if args.json:  # runs only: a script reads admit entries from GET /queue
        emit_json([r.model_dump(mode="json") for r in runs])
        return 0
    # Commands `evaltui run` wraps wait in the same queue as runs: show them too.
    admits = [q for q in client.queue() if q.kind == "admit"] \
        if args.state in (None, RunState.QUEUED.value) else []
    # ... and those admitted, running their command (e.g. `evaltui serve-policy`).
    holding = _holding_admits(client) if args.state in (None, RunState.RUNNING.value) else []
    console = Console()
    if not runs and not admits and not holding:
        console.print("no runs" + (f" in state {args.state}" if args.state else ""))
        return 0
    console.print(runs_table(runs, admits, holding, width=console.width))
    if args.limit and len(runs) == args.limit:
        console.print(f"[dim]first {args.limit} runs; --limit 0 lists all[/]")
    return 0


def show(args: argparse.Namespace) -> int:
    """``show``: an existing dir is read locally; anything else is a run id for the backend."""
    if args.json and args.format:
        return error("give --json or --format, not both", 2)
    if args.digits is not None and args.digits < 0:
        return error(f"--digits must be >= 0, got {args.digits}", 2)
    if Path(args.run_id).is_dir():
        return run_show_local(args)
    return with_client(args, run_show, offline=_show_offline)


def _show_offline(args: argparse.Namespace) -> int | None:
    """No backend: a run id is read from its dir under the outputs root, if it is there."""
    try:
        args.run_id = str(resolve_run_dir(args.run_id, outputs=args.outputs))
    except RunDirError as exc:
        return error(f"{exc}, and no backend at {args.client.base_url} (start one with "
                     "`evaltui serve`, or set BACKEND_URL)")
    return run_show_local(args)


def run_show(args: argparse.Namespace) -> int:
    client: ApiClient = args.client
    run = client.get_run(args.run_id)
    rows = client.episodes(args.run_id) if args.episodes and not args.format else None
    return _show_run(args, run, rows, lambda: rows if rows is not None
                     else client.episodes(args.run_id))


def run_show_local(args: argparse.Namespace) -> int:
    try:
        local = load_run(Path(args.run_id).resolve())
    except RunDirError as exc:
        return error(str(exc), 2)
    status = follow_status(local.run_dir, read_run_status(local.run_dir))  # Slurm's word too
    sched = status.scheduler or {}
    run = run_view(local.run_id, local.run_dir, status.state, status.scheduler, local.summary,
                   waiting_reason=waiting_reason(status, sched.get("waiting_reason")),
                   error=status.error or (status.note if status.state.terminal else None))
    rows = [EpisodeRow.model_validate(r) for r in local.rows] if args.episodes else None
    return _show_run(args, run, rows, lambda: local.rows)


def _show_run(args: argparse.Namespace, run: Run, rows: list[Any] | None,
              all_rows: Callable[[], list[Any]]) -> int:
    field = group_by_field(args.by, run.summary.dataset if run.summary else None)
    groups = None
    if field and run.summary is not None and run.summary.metrics:
        try:
            groups = metric_groups(all_rows(), field)
        except GroupByError as exc:
            if args.by:  # asked for; the benchmark's default is only where rows have it
                return error(str(exc), 2)
    if args.format:
        if run.summary is None or not run.summary.metrics:
            return error(f"run {run.run_id} has no metrics yet", 1)
        sys.stdout.write(grouped_table(field, groups, fmt=args.format, digits=args.digits)
                         if field and groups else
                         summary_table(run.summary.model_dump(mode="json"), fmt=args.format,
                                       digits=args.digits))
        return 0
    if args.json:
        body = run.model_dump(mode="json")
        if rows is not None:
            body["episodes"] = [r.model_dump(mode="json") for r in rows]
        if field and groups:
            body["by"] = groups_json(field, groups)
        emit_json(body)
        return 0
    console = Console()
    print_run(console, run)
    if field and groups:
        console.print(grouped_metrics_table(field, groups))
    if rows is not None:
        console.print(episodes_table(rows, width=console.width))
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    return _each(args, lambda run_id: _cancel(args.client, run_id), "cancel")


ADMIT_PREFIX = "admit:"
"""What ``ls`` shows as the id of a command ``evaltui run`` wraps (``admit:{admit_id}``)."""


def _cancel(client: ApiClient, run_id: str) -> Any:
    """A run's cancel, or an admit entry's release (its wrapper then stops the command)."""
    if not run_id.startswith(ADMIT_PREFIX):
        return client.cancel(run_id)
    admit = client.release_admit(run_id.removeprefix(ADMIT_PREFIX))
    return RunRef(run_id=run_id, state=RunState.CANCELLED if admit.state is
                  AdmitState.RELEASED else RunState.QUEUED)


def run_resume(args: argparse.Namespace) -> int:
    if args.more is not None and args.more < 0:
        return error(f"--more must be >= 0, got {args.more}", 2)
    more = args.more
    return _each(args, lambda run_id: args.client.resume(run_id, more), "resume")


def _each(args: argparse.Namespace, call: Callable[[str], Any], verb: str) -> int:
    """Apply ``call`` to every run id; one failing does not stop the others."""
    console = Console()
    results, code = [], 0
    for ref in args.run_ids:
        run_id = as_run_id(ref)
        try:
            ref = call(run_id)
        except ApiError as exc:
            error(f"{verb} {run_id}: {exc}")
            results.append({"run_id": run_id, "error": str(exc)})
            code = max(code, USAGE if isinstance(exc, NotFound | InvalidRequest) else FAILED)
            continue
        results.append(ref.model_dump(mode="json"))
        if not args.json:
            console.print(_answer(verb, ref.run_id, ref.state), highlight=False)
    if args.json:
        emit_json(results)
    return code


def _answer(verb: str, run_id: str, state: RunState) -> str:
    """What ``cancel``/``resume`` did, in words: ``run X: running`` read as a refusal."""
    now = state_text(state.value)
    if verb == "cancel":
        if state.terminal:
            return f"run {run_id}: {now}"
        return f"run {run_id}: cancel asked; it is {now} until its process stops (SIGTERM)"
    return f"run {run_id}: resume asked; it is {now}"


def as_run_id(ref: str) -> str:
    """The backend's name for ``ref``: a run dir is named by its run id."""
    path = Path(ref).expanduser()
    return path.resolve().name if path.is_dir() else ref


def run_logs(args: argparse.Namespace) -> int:
    """Print the episode's log; ``--follow`` keeps printing until the run ends (or Ctrl-C)."""
    client: ApiClient = args.client
    args.run_id = as_run_id(args.run_id)
    width = Console().width if sys.stdout.isatty() else None  # piped: whole lines
    offset = 0
    while True:
        # The state before the page: a run that ended before it was read has no more lines.
        ended = args.follow and client.get_run(args.run_id).state.terminal
        try:
            page = client.log(args.run_id, args.episode, offset=offset, limit=1000)
        except NotFound:
            if not args.follow or ended:
                raise
            time.sleep(FOLLOW_POLL_SEC)  # following a run whose episode has not begun
            continue
        for item in page.records:
            if args.json:
                print(json.dumps(item.record, default=str))
            else:
                print(format_log_record(item.record, width))
        sys.stdout.flush()
        offset = page.next_offset
        if page.complete:
            if not args.follow or ended:
                return 0
            time.sleep(FOLLOW_POLL_SEC)
