"""The set's table, read from set.json and the members' run dirs alone (no backend).

A row per member: its axis values, state, and per metric the mean, 95% CI and n exactly
as the member's own summary.json has them; the best member per metric is marked
(highest, or lowest for :data:`LOWER_IS_BETTER`: ``steps``, ``path_length``,
``nav_error``), only among the members whose mean covers the most episodes (a mean over
11 of 20 episodes is not comparable with one over 20). With a
baseline, each member also gets its paired difference to it (:mod:`evaltui.sets.stats`).
:func:`table_json` is the shape of ``set show --format json`` (DESIGN §12).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.setspec import RaceStanding, SetMemberRecord, SetRecord
from evaltui.results.compare import ordered_metrics  # numpy: after the command starts
from evaltui.rundir.layout import outputs_root, runs_root
from evaltui.rundir.status import read_run_status
from evaltui.rundir.summaryfile import read_summary_header
from evaltui.sets.baseline import attach_baseline
from evaltui.sets.stats import BaselineDiff

LOWER_IS_BETTER = frozenset({"steps", "path_length", "nav_error"})


@dataclass
class MemberRow:
    """One member as the table shows it."""

    key: str
    axes: dict[str, Any]
    run_id: str | None
    state: str
    attempts: int = 0
    error: str | None = None
    run_dir: Path | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    metrics_ci95: dict[str, list[float] | None] = field(default_factory=dict)
    metrics_n: dict[str, int] = field(default_factory=dict)
    vs_baseline: BaselineDiff | None = None
    vs_baseline_note: str | None = None
    """Why the member could not be compared with the baseline."""
    eliminated_at: int | None = None
    """In a racing set: the n at which the race eliminated it."""


@dataclass
class SetTable:
    """The whole table: rows in set order, the axes and metrics it has, the best per metric."""

    set_id: str
    name: str
    axes: list[str]
    metrics: list[str]
    rows: list[MemberRow]
    baseline: MemberRow | None = None
    best: dict[str, list[str]] = field(default_factory=dict)
    """Metric -> the keys of the members with the best mean (ties: all of them)."""
    race: RaceStanding | None = None
    """A racing set's standing after its last round."""


def member_run_dir(member: SetMemberRecord, outputs: str | os.PathLike[str] | None) -> Path | None:
    """Where a member's run dir is: as recorded, else under the outputs root."""
    if member.run_dir is not None and Path(member.run_dir).is_dir():
        return Path(member.run_dir)
    if member.run_id is None:
        return None
    path = runs_root(outputs_root(outputs)) / member.run_id
    return path if path.is_dir() else None


def build_table(record: SetRecord, outputs: str | os.PathLike[str] | None = None, *,
                baseline: dict[str, Any] | None = None) -> SetTable:
    """The table of a set; ``baseline`` (axis values) names the member to compare with."""

    rows = [_row(m, outputs) for m in record.members]
    axes = list(dict.fromkeys(a for m in record.members for a in m.axes))  # in first-seen order
    present = set().union(*(r.metrics for r in rows)) if rows else set()
    metrics = ordered_metrics(present)
    table = SetTable(record.set_id, record.name, axes, metrics, rows, race=record.race)
    table.best = _best(rows, metrics)
    if baseline is not None:
        attach_baseline(table, baseline)
    return table


def _row(member: SetMemberRecord, outputs: str | os.PathLike[str] | None) -> MemberRow:
    row = MemberRow(member.key, dict(member.axes), member.run_id, member.state.value,
                    member.attempts, member.error, eliminated_at=member.eliminated_at)
    run_dir = member_run_dir(member, outputs)
    row.run_dir = run_dir
    if run_dir is None:
        return row
    row.state = read_run_status(run_dir).state.value  # the run dir's word, not set.json's
    summary = read_summary_header(run_dir)
    if summary is not None:
        row.metrics = dict(summary.metrics)
        row.metrics_ci95 = {k: None if ci is None else list(ci)  # as JSON has it
                            for k, ci in summary.metrics_ci95.items()}
        row.metrics_n = dict(summary.metrics_n or {})
    return row


def _best(rows: list[MemberRow], metrics: list[str]) -> dict[str, list[str]]:
    best: dict[str, list[str]] = {}
    for name in metrics:
        covered = [r for r in rows if name in r.metrics]
        most = max((r.metrics_n.get(name, 0) for r in covered), default=0)
        # A mean over fewer episodes than another member's is not a fair winner.
        scored = [(r.metrics[name], r.key) for r in covered
                  if name not in r.metrics_n or r.metrics_n[name] == most]
        if len(scored) < 2:
            continue
        pick = min if name in LOWER_IS_BETTER else max
        top = pick(v for v, _ in scored)
        best[name] = [k for v, k in scored if v == top]
    return best


def table_json(table: SetTable) -> dict[str, Any]:
    """``set show --format json``: ``{set_id, name, members: [...], baseline}``."""
    def member(r: MemberRow) -> dict[str, Any]:
        out: dict[str, Any] = {"key": r.key, "axes": r.axes, "run_id": r.run_id,
                               "state": r.state, "metrics": r.metrics,
                               "metrics_ci95": r.metrics_ci95, "metrics_n": r.metrics_n}
        if r.eliminated_at is not None:
            out["eliminated_at"] = r.eliminated_at
        if r.vs_baseline is not None:
            out["vs_baseline"] = r.vs_baseline.to_json()
        elif r.vs_baseline_note is not None:
            out["vs_baseline"] = {"note": r.vs_baseline_note}
        return out

    base = table.baseline
    return {"set_id": table.set_id, "name": table.name,
            "members": [member(r) for r in table.rows],
            "best": table.best,
            "baseline": {"key": base.key, "axes": base.axes, "run_id": base.run_id}
            if base is not None else None}
