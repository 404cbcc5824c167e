"""A followed run's end, said (``evaltui eval``, a Slurm job's ``eval``): its results
table on stdout and its exit code, with the reason on stderr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from evaltui.commands.console import FAILED, OK, error
from evaltui.contract.records import SummaryHeader
from evaltui.contract.states import RunState
from evaltui.results.groups import GroupByError, group_by_field, metric_groups
from evaltui.results.tables import grouped_metrics_table, metrics_table
from evaltui.results.tablewriter import one_line


def exit_code(state: RunState, summary: SummaryHeader | None, run_dir: Path | None = None
              ) -> int:
    """0 for a done run within its error allowance; else 1, with the reason on stderr."""
    if state is not RunState.DONE:
        if summary is not None and summary.error:
            # One line (a traceback: what it says); `evaltui show RUN_DIR` has it all.
            more = f" (evaltui show {run_dir or 'RUN_DIR'} for all of it)" \
                if "\n" in summary.error.strip() else ""
            error(f"{one_line(summary.error)}{more}")
        return FAILED
    if summary is not None and summary.error_rate_exceeded:
        first = summary.first_error
        return error(
            f"{summary.error_count} of {summary.episodes_finished} episodes errored "
            f"(allowed: {summary.max_error_rate or 0:.0%}, --max-error-rate); first: episode "
            f"{first.episode_index if first else None}: {first.message if first else None}",
            FAILED)
    return OK


def print_results(console: Console, run_dir: Path, state: RunState,
                  summary: dict[str, Any] | None, by: str | None = None) -> None:
    colour = {"done": "green", "cancelled": "yellow"}.get(state.value, "red")
    console.print(f"run {run_dir.name}: [bold {colour}]{state.value}[/]")
    if not summary:
        console.print(f"no summary.json; see {run_dir / 'run.log'}")
        return
    # A failed run's error is said once, on stderr (exit_code); no empty metrics table.
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
