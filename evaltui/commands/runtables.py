"""How ``ls``, ``show`` and ``logs`` print runs for people: tables that fit the terminal
(:mod:`evaltui.results.tablewriter`), a run's facts, one log record a line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.text import Text

from evaltui.api.models import Admit, QueueEntry, Run
from evaltui.contract.states import RunState
from evaltui.report.html import when
from evaltui.results.tables import metrics_table
from evaltui.results.tablewriter import FitColumn, fit_table, one_line

STATE_STYLE = {"queued": "cyan", "starting": "blue", "running": "bold blue", "done": "green",
               "failed": "red", "cancelled": "yellow", "aborted": "magenta"}


def state_text(state: str) -> str:
    return f"[{STATE_STYLE.get(state, 'white')}]{state}[/]"


def runs_table(runs: Sequence[Run], admits: Sequence[QueueEntry] = (),
               holding: Sequence[Admit] = (), *, width: int = 80) -> Group:
    """Runs (and the admit entries waiting for admission, then those admitted and running
    their command, first) as a table ``width`` wide."""
    # A node column only when a run was placed on a Ray node (--ray): one machine's
    # listing stays as it was.
    nodes = [run.node for run in runs]
    # Ids, states and counts are what a user copies and scans: never cut; the free-text
    # columns give way, then the least needed columns are left out (`show RUN` has all).
    # A gpus column only when a run holds several GPUs (replicas), likewise.
    gpus = [run_gpus(run) for run in runs]
    spread = any(len(g) > 1 for g in gpus)
    columns = [FitColumn("run", 100), FitColumn("state", 90)]
    if any(nodes):
        columns.append(FitColumn("node", 20))
    if spread:
        columns.append(FitColumn("gpus", 60))
    columns += [FitColumn("graph", 50, whole=False), FitColumn("data", 40, whole=False),
                FitColumn("episodes", 70, justify="right"),
                FitColumn("SR", 80, justify="right"),
                FitColumn("note", 30, whole=False, min_width=12)]
    node_cell = ["-"] if any(nodes) else []
    node_cell += ["-"] if spread else []
    rows: list[list[str | Text]] = []
    for entry in admits:  # `evaltui run PROFILE CMD`: the profile, and the command it runs
        kind = "serve " if entry.admit_kind == "serve" else ""  # `evaltui serve-policy`
        rows.append([entry.run_id, state_cell(RunState.QUEUED.value), *node_cell,
                     f"{kind}{entry.label or '?'}", entry.command or "", "-", "-",
                     entry.waiting_reason])
    for held in holding:
        where = f"GPU{held.gpu}" if held.gpu is not None else "host"
        mib = f", {held.reserved_mb} MiB" if held.reserved_mb else ""
        serve = held.kind == "serve"  # `evaltui serve-policy`: where it listens, what it served
        served = f"; {held.requests_served} requests served" \
            if serve and held.requests_served is not None else ""
        rows.append([f"admit:{held.admit_id}", state_cell(RunState.RUNNING.value), *node_cell,
                     f"serve {held.label}" if serve else held.label,
                     (held.url or held.command) if serve else held.command, "-", "-",
                     f"holds {where}{mib}{served}"])
    for run, node, held in zip(runs, nodes, gpus, strict=True):
        summary, spec = run.summary, run.spec
        graph = (summary and summary.graph_name) or (spec and spec.graph_name) or "?"
        dataset = (summary and summary.dataset) or (spec and spec.dataset) or "?"
        dataset = dataset.rstrip("/").rsplit("/", 1)[-1]  # a file's name, not its dirs
        split = (summary and summary.split) or (spec and spec.split)
        total = (summary and summary.episodes_total) or (spec and spec.episodes_total)
        done = summary.episodes_finished if summary else 0
        sr = summary.metrics.get("success") if summary else None
        note = run.waiting_reason if run.state is RunState.QUEUED else \
            (summary and summary.error) or run.error or ""
        rows.append([run.run_id, state_cell(run.state.value),
                     *([node or "-"] if any(nodes) else []),
                     *([",".join(held) or "-"] if spread else []), str(graph),
                     f"{dataset}/{split}" if split else str(dataset),
                     f"{done}/{total if total is not None else '?'}",
                     f"{sr:.3f}" if sr is not None else "-", str(note or "")])
    return fit_table(columns, rows, width)


def run_gpus(run: Run) -> list[str]:
    """The GPUs a run was started on, by index (``["0", "2"]``); empty before."""
    record = run.scheduler
    if record is None:
        return []
    if record.gpus:
        return [label.removeprefix("GPU") for label in record.gpus]
    return [str(record.gpu)] if record.gpu is not None else []


def state_cell(state: str) -> Text:
    return Text(state, style=STATE_STYLE.get(state, "white"))


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
        res = record.reservation
        reserved = res.mb + res.each_mb * max(0, len(res.gpus) - 1) if res and run.state in (
            RunState.STARTING, RunState.RUNNING) else None
        facts += [("priority", record.priority), ("queued", when(record.queued_at)),
                  ("admitted", when(record.admitted_at)),
                  ("finished", when(record.finished_at)), ("node", run.node),
                  ("gpu", record.gpu if not record.gpus else None),
                  ("gpus", ", ".join(record.gpus) or None),
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


def episodes_table(rows: list[Any], *, width: int = 80) -> Group:
    """A run's episodes, one line each; the scene and the error give way at ``width``."""
    columns = [FitColumn("ep", 100, justify="right"), FitColumn("status", 90),
               FitColumn("success", 80, justify="right"), FitColumn("spl", 60, justify="right"),
               FitColumn("steps", 70, justify="right"), FitColumn("sec", 50, justify="right"),
               FitColumn("scene", 30, whole=False), FitColumn("error", 40, whole=False)]
    cells: list[list[str | Text]] = []
    for row in rows:
        m = row.metrics
        cells.append([str(row.episode_index), str(row.status), _num(m.get("success")),
                      _num(m.get("spl")), str(row.step_count or ""),
                      f"{row.elapsed_sec:.1f}" if row.elapsed_sec is not None else "",
                      str(row.scene_id or ""), one_line(row.error)])
    return fit_table(columns, cells, width)


def format_log_record(rec: dict[str, Any], width: int | None = None) -> str:
    """One log.jsonl record as a line: step, node, event, duration, outputs or error; cut
    to ``width`` (the terminal's) with an ellipsis, whole when None (piped: for grep)."""
    line = _log_line(rec)
    return line if width is None or len(line) <= width else line[:max(width - 1, 1)] + "…"


def _log_line(rec: dict[str, Any]) -> str:
    event = rec.get("event", "?")
    if event == "corrupt":
        return f"corrupt line: {rec.get('error')}"
    head = f"{rec.get('step', ''):>5} {event:<13} {rec.get('node') or '':<16}"
    dur = rec.get("dur_ms")
    tail = f"{dur:8.2f} ms " if isinstance(dur, int | float) else ""
    if rec.get("error"):
        tail += f"error: {str(rec['error']).splitlines()[-1]}"
    elif rec.get("outputs") is not None:
        tail += json.dumps(rec["outputs"], default=str)
    return f"{head} {tail}".rstrip()


def _mb(value: Any) -> str | None:
    return f"{value / 1024:.1f} GiB" if isinstance(value, int | float) else None


def _num(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else ""
