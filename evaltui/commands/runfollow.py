"""Following a run in the foreground (``evaltui eval``, a Slurm job's ``eval``): its
progress bar over summary.json (:mod:`evaltui.commands.runend` says how it ended).

Parsing ``eval`` imports this module, so Rich and the record models are imported on
first use: ``eval`` starts its run process before anything heavy loads
(docs/performance.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

POLL_SEC = 0.25
"""How often the progress bar reads summary.json (it returns at once when the run exits)."""


def follow(run_dir: Path, proc: Any, total: int, console: Console) -> None:
    """A progress bar over the run's summary.json until the subprocess exits."""
    # start-up: (see the module's docstring)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from evaltui.rundir.summaryfile import read_summary

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
