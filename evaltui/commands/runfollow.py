"""Following a run in the foreground (``evaltui eval``, a Slurm job's ``eval``): its
progress bar over summary.json, its results table, its exit code and its one-line
refusal. Rich and the record models are imported on first use: ``eval`` hands its spec
to the run process before anything heavy loads."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltui.commands.console import error
from evaltui.contract.states import RunState

if TYPE_CHECKING:
    from rich.console import Console

    from evaltui.contract.records import SummaryHeader

POLL_SEC = 0.25
"""How often the progress bar reads summary.json (it returns at once when the run exits)."""


def refused(message: str) -> int:
    """A spec the run process (or Slurm) refused: one line, exit 2."""
    return error(message)


def exit_code(state: RunState, summary: SummaryHeader | None, console: Console,
              run_dir: Path | None = None) -> int:
    """0 for a done run within its error allowance; else 1, with the reason on stderr."""
    from rich.markup import escape

    if state is not RunState.DONE:
        if summary is not None and summary.error:
            from evaltui.results.tablewriter import one_line

            # One line (a traceback: what it says); `evaltui show RUN_DIR` has it all.
            more = f" (evaltui show {run_dir or 'RUN_DIR'} for all of it)" \
                if "\n" in summary.error.strip() else ""
            console.print(f"[red]error[/]: {escape(one_line(summary.error))}{more}",
                          highlight=False, soft_wrap=True)
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


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def summary_header(summary: dict[str, Any] | None) -> SummaryHeader | None:
    """summary.json's header as its record (None if absent or not fitting the schema)."""
    from evaltui.contract.recordparse import parse
    from evaltui.contract.records import SUMMARY_FILENAME, SummaryHeader

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
            summary = read_summary(run_dir)
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


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    from evaltui.contract.records import SUMMARY_FILENAME
    from evaltui.rundir.jsonfiles import read_json

    try:
        data = read_json(run_dir / SUMMARY_FILENAME)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def print_results(console: Console, run_dir: Path, state: RunState,
                  summary: dict[str, Any] | None, by: str | None = None) -> None:
    colour = {"done": "green", "cancelled": "yellow"}.get(state.value, "red")
    console.print(f"run {run_dir.name}: [bold {colour}]{state.value}[/]")
    if not summary:
        console.print(f"no summary.json; see {run_dir / 'run.log'}")
        return
    # A failed run's error is said once, on stderr (exit_code); no empty metrics table.
    from evaltui.results.groups import GroupByError, group_by_field, metric_groups
    from evaltui.results.tables import grouped_metrics_table, metrics_table

    if summary.get("metrics"):
        console.print(metrics_table(summary))
        field = group_by_field(by, summary.get("dataset"))
        if field:
            try:
                console.print(grouped_metrics_table(
                    field, metric_groups(summary.get("episodes") or [], field)))
            except GroupByError as exc:
                if by:
                    console.print(f"[yellow]{exc}[/]", highlight=False)
    counts = ", ".join(f"{k} {v}" for k, v in summary.get("counts_by_status", {}).items())
    console.print(f"episodes {summary.get('episodes_finished')}/{summary.get('episodes_total')}"
                  f"{f' ({counts})' if counts else ''} in {summary.get('elapsed_sec', 0):.1f} s"
                  f" -> {run_dir}", soft_wrap=True)
