"""``evaltui ls | show | cancel | resume | logs``: clients of a backend's HTTP API.

They talk to ``$BACKEND_URL`` (default ``http://127.0.0.1:8000``, or ``--url``) with
the state dir's token (or ``$EVALTUI_TOKEN``), print rich tables for people and, with
``--json``, plain JSON for scripts. ``show`` also takes a run dir, read locally with no
backend, and ``show --format md|csv|latex`` prints only the metrics table (for a paper).
Exit codes: 0 ok, 1 the backend refused or failed (no such run, a conflict, no backend),
2 invalid input (bad command line or spec).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from evaltui.api.client import ApiClient, ApiError, InvalidRequest
from evaltui.api.models import EpisodeRow, QueueEntry, Run
from evaltui.results.richtables import metrics_table
from evaltui.results.runrows import RunDirError, load_run
from evaltui.results.tables import FORMATS, summary_table
from evaltui.rundir import read_run_status
from evaltui.states import RunState
from evaltui.views import run_view

STATE_STYLE = {"queued": "cyan", "starting": "blue", "running": "bold blue", "done": "green",
               "failed": "red", "cancelled": "yellow", "aborted": "magenta"}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register ls, show, cancel, resume and logs."""
    p = sub.add_parser("ls", help="list runs of a backend", description="List runs, newest "
                       "first.")
    p.add_argument("--state", choices=[s.value for s in RunState], help="only runs in STATE")
    p.add_argument("--limit", type=int, default=50, help="at most N runs (0: all; default 50)")
    _common(p, run_ls)

    p = sub.add_parser("show", help="one run: state, record, metrics",
                       description="Show a run: a run id asks the backend, a run dir is "
                       "read locally.")
    p.add_argument("run_id", metavar="RUN", help="run id, or a run dir (read locally)")
    p.add_argument("--episodes", action="store_true", help="also list its episodes")
    p.add_argument("--format", choices=FORMATS, help="print only the metrics table, as "
                   "Markdown, CSV or LaTeX (booktabs)")
    p.add_argument("--digits", type=int, default=3, help="decimals with --format (default 3)")
    _common(p, run_show)
    p.set_defaults(func=show)

    p = sub.add_parser("cancel", help="cancel queued or running runs")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    _common(p, run_cancel)

    p = sub.add_parser("resume", help="re-run what is not ok of finished runs")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    _common(p, run_resume)

    p = sub.add_parser("logs", help="an episode's log (log.jsonl)")
    p.add_argument("run_id")
    p.add_argument("episode", type=int, help="episode index")
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep printing while the run is active")
    _common(p, run_logs)


def _common(p: argparse.ArgumentParser, func: Callable[[argparse.Namespace], int]) -> None:
    p.add_argument("--url", help="backend URL (default $BACKEND_URL or http://127.0.0.1:8000)")
    p.add_argument("--json", action="store_true", help="JSON output for scripts")
    p.set_defaults(func=lambda args: with_client(args, func))


def with_client(args: argparse.Namespace, func: Callable[[argparse.Namespace], int]) -> int:
    """Run ``func`` with ``args.client`` set; API errors become a message and an exit code."""
    try:
        with ApiClient(args.url) as client:
            args.client = client
            return func(args)
    except ApiError as exc:
        Console(stderr=True).print(f"[bold red]error[/]: {exc}", highlight=False)
        return 2 if isinstance(exc, InvalidRequest) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `evaltui logs ... | head`: the reader left; quietly, and without a second error
        # when Python flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _error(message: str, code: int) -> int:
    print(f"evaltui: error: {message}", file=sys.stderr)
    return code


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# ---- commands -------------------------------------------------------------------------------


def run_ls(args: argparse.Namespace) -> int:
    client: ApiClient = args.client
    runs = client.list_runs(args.state, limit=args.limit or None)
    if args.json:  # runs only: a script reads admit entries from GET /queue
        emit_json([r.model_dump(mode="json") for r in runs])
        return 0
    # Commands `evaltui run` wraps wait in the same queue as runs: show them too.
    admits = [q for q in client.queue() if q.kind == "admit"] \
        if args.state in (None, RunState.QUEUED.value) else []
    console = Console()
    if not runs and not admits:
        console.print("no runs" + (f" in state {args.state}" if args.state else ""))
        return 0
    console.print(runs_table(runs, admits))
    if args.limit and len(runs) == args.limit:
        console.print(f"[dim]first {args.limit} runs; --limit 0 lists all[/]")
    return 0


def show(args: argparse.Namespace) -> int:
    """``show``: an existing dir is read locally; anything else is a run id for the backend."""
    if args.json and args.format:
        return _error("give --json or --format, not both", 2)
    if args.digits < 0:
        return _error(f"--digits must be >= 0, got {args.digits}", 2)
    if Path(args.run_id).is_dir():
        return run_show_local(args)
    return with_client(args, run_show)


def run_show(args: argparse.Namespace) -> int:
    client: ApiClient = args.client
    run = client.get_run(args.run_id)
    rows = client.episodes(args.run_id) if args.episodes and not args.format else None
    return _show_run(args, run, rows)


def run_show_local(args: argparse.Namespace) -> int:
    try:
        local = load_run(Path(args.run_id).resolve())
    except RunDirError as exc:
        return _error(str(exc), 2)
    status = read_run_status(local.run_dir)
    run = run_view(local.run_id, local.run_dir, status.state, status.scheduler, local.summary,
                   error=status.error)
    rows = [EpisodeRow.model_validate(r) for r in local.rows] if args.episodes else None
    return _show_run(args, run, rows)


def _show_run(args: argparse.Namespace, run: Run, rows: list[Any] | None) -> int:
    if args.format:
        if run.summary is None or not run.summary.metrics:
            return _error(f"run {run.run_id} has no metrics yet", 1)
        sys.stdout.write(summary_table(run.summary.model_dump(mode="json"), fmt=args.format,
                                       digits=args.digits))
        return 0
    if args.json:
        body = run.model_dump(mode="json")
        if rows is not None:
            body["episodes"] = [r.model_dump(mode="json") for r in rows]
        emit_json(body)
        return 0
    console = Console()
    print_run(console, run)
    if rows is not None:
        console.print(episodes_table(rows))
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    return _each(args, args.client.cancel, "cancel")


def run_resume(args: argparse.Namespace) -> int:
    return _each(args, args.client.resume, "resume")


def _each(args: argparse.Namespace, call: Callable[[str], Any], verb: str) -> int:
    """Apply ``call`` to every run id; one failing does not stop the others."""
    console, err = Console(), Console(stderr=True)
    results, code = [], 0
    for run_id in args.run_ids:
        try:
            ref = call(run_id)
        except ApiError as exc:
            err.print(f"[red]{verb} {run_id}[/]: {exc}", highlight=False)
            results.append({"run_id": run_id, "error": str(exc)})
            code = 1
            continue
        results.append(ref.model_dump(mode="json"))
        if not args.json:
            console.print(f"run {ref.run_id}: {state_text(ref.state.value)}")
    if args.json:
        emit_json(results)
    return code


def run_logs(args: argparse.Namespace) -> int:
    client: ApiClient = args.client
    offset = 0
    while True:
        page = client.log(args.run_id, args.episode, offset=offset, limit=1000)
        for item in page.records:
            if args.json:
                print(json.dumps(item.record, default=str))
            else:
                print(format_log_record(item.record))
        sys.stdout.flush()
        offset = page.next_offset
        if page.complete:
            if not args.follow or client.get_run(args.run_id).state.terminal:
                return 0
            time.sleep(0.5)


# ---- rendering --------------------------------------------------------------------------------


def state_text(state: str) -> str:
    return f"[{STATE_STYLE.get(state, 'white')}]{state}[/]"


def runs_table(runs: Sequence[Run], admits: Sequence[QueueEntry] = ()) -> Table:
    """Runs (and the admit entries waiting for admission, first) as a table."""
    table = Table(box=None, header_style="bold")
    # A node column only when a run was placed on a Ray node (--ray): one machine's
    # listing stays as it was.
    nodes = [run.node for run in runs]
    columns = [("run", "left", False), ("state", "left", False)]
    if any(nodes):
        columns.append(("node", "left", False))
    columns += [("graph", "left", True), ("data", "left", True),
                ("episodes", "right", False), ("SR", "right", False), ("note", "left", True)]
    # Ids, states and counts are what a user copies and scans: never wrap them; the free
    # text columns give way (ellipsis, one line a run: `show RUN` has the whole reason)
    # in a narrow terminal.
    for name, justify, flexible in columns:
        table.add_column(name, justify=justify,  # type: ignore[arg-type]
                         no_wrap=True, overflow="ellipsis" if flexible else "fold",
                         min_width=None if flexible else len(name))
    node_cell = ["-"] if any(nodes) else []
    for entry in admits:  # `evaltui run PROFILE CMD`: the profile, and the command it runs
        table.add_row(entry.run_id, state_text(RunState.QUEUED.value), *node_cell,
                      entry.label or "?", entry.command or "", "-", "-",
                      entry.waiting_reason)
    for run, node in zip(runs, nodes, strict=True):
        summary, spec = run.summary, run.spec
        graph = (summary and summary.graph_name) or (spec and spec.graph_name) or "?"
        dataset = (summary and summary.dataset) or (spec and spec.dataset) or "?"
        split = (summary and summary.split) or (spec and spec.split)
        total = (summary and summary.episodes_total) or (spec and spec.episodes_total)
        done = summary.episodes_finished if summary else 0
        sr = summary.metrics.get("success") if summary else None
        note = run.waiting_reason if run.state is RunState.QUEUED else \
            (summary and summary.error) or run.error or ""
        table.add_row(run.run_id, state_text(run.state.value),
                      *([node or "-"] if node_cell else []), str(graph),
                      f"{dataset}/{split}" if split else str(dataset),
                      f"{done}/{total if total is not None else '?'}",
                      f"{sr:.3f}" if sr is not None else "-", str(note or ""))
    return table


def print_run(console: Console, run: Run) -> None:
    record, summary, spec = run.scheduler, run.summary, run.spec
    console.print(f"run [bold]{run.run_id}[/]: {state_text(run.state.value)}  "
                  f"[dim]{run.run_dir}[/]", highlight=False)
    facts: list[tuple[str, object]] = [("graph", (summary.graph_name if summary else None)
                                        or (spec.graph_name if spec else None))]
    if summary is not None:
        total = summary.episodes_total if summary.episodes_total is not None else "?"
        facts += [("data", "/".join(x for x in (summary.dataset, summary.split) if x)),
                  ("episodes", f"{summary.episodes_finished}/{total}")]
    if record is not None:
        # Held only while its process lives: an ended run's record still names it.
        reserved = record.reservation.mb if record.reservation and run.state in (
            RunState.STARTING, RunState.RUNNING) else None
        facts += [("priority", record.priority), ("queued", _when(record.queued_at)),
                  ("admitted", _when(record.admitted_at)),
                  ("finished", _when(record.finished_at)), ("node", run.node),
                  ("gpu", record.gpu),
                  ("reserved", _mb(reserved)), ("measured peak", _mb(record.measured_peak_mb)),
                  ("pid", record.pid)]
    facts += [("waiting", run.waiting_reason),
              ("error", (summary.error if summary else None) or run.error
               or (record.error if record else None))]
    for name, value in facts:
        if value not in (None, ""):
            console.print(f"  {name:>13}: {value}", highlight=False)
    if summary is not None and summary.metrics:
        console.print(metrics_table(summary.model_dump(mode="json")))


def episodes_table(rows: list[Any]) -> Table:
    table = Table(box=None, header_style="bold")
    for name in ("ep", "status", "success", "spl", "steps", "sec", "scene", "error"):
        table.add_column(name, overflow="fold")
    for row in rows:
        m = row.metrics
        table.add_row(str(row.episode_index), str(row.status), _num(m.get("success")),
                      _num(m.get("spl")), str(row.step_count or ""),
                      f"{row.elapsed_sec:.1f}" if row.elapsed_sec is not None else "",
                      str(row.scene_id or ""), (row.error or "").splitlines()[-1:][0]
                      if row.error else "")
    return table


def format_log_record(rec: dict[str, Any]) -> str:
    """One log.jsonl record as a line: step, node, event, duration, outputs or error."""
    event = rec.get("event", "?")
    if event == "corrupt":
        return f"corrupt line: {rec.get('error')}"
    head = f"{rec.get('step', ''):>5} {event:<13} {rec.get('node') or '':<16}"
    dur = rec.get("dur_ms")
    tail = f"{dur:8.2f} ms " if isinstance(dur, int | float) else ""
    if rec.get("error"):
        tail += f"error: {str(rec['error']).splitlines()[-1]}"
    elif rec.get("outputs") is not None:
        tail += json.dumps(rec["outputs"], default=str)[:160]
    return f"{head} {tail}".rstrip()


def _when(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value


def _mb(value: Any) -> str | None:
    return f"{value / 1024:.1f} GiB" if isinstance(value, int | float) else None


def _num(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else ""
