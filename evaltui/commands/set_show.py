"""``evaltui set show SET``: the set's table, from set.json and the run dirs alone.

A row per member (its axis values), each metric's mean [95% CI] and n, the best per
column in bold; ``--pivot AXIS`` spreads an axis over the columns; ``--baseline`` adds
each member's paired difference to the baseline and the exact McNemar p with Holm's
correction; ``--format md|latex|csv|json`` for papers and scripts. A set with a
checkpoint axis also gets a plot of each metric over the steps.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape

from evaltui.commands.console import error
from evaltui.contract.setspec import SetFileError, SetRecord
from evaltui.sets.grouprows import group_table, set_group_field
from evaltui.sets.render import TERMINAL_METRICS, render, rich_table
from evaltui.sets.setdir import SetDirError, list_sets, read_set, resolve_set
from evaltui.sets.table import build_table, table_json
from evaltui.sets.textplot import metric_plots


def show_set(args: argparse.Namespace) -> int:
    if args.digits < 0:
        return error(f"--digits must be >= 0, got {args.digits}")
    try:
        record = read_set(resolve_set(args.set, args.outputs))
        return print_table(record, args, as_json=args.format == "json")
    except (SetDirError, SetFileError, ValueError) as exc:  # GroupByError is a ValueError
        return error(str(exc))


def baseline_entry(record: SetRecord, raw: str | None) -> dict[str, Any] | None:
    """The axis values ``--baseline`` names: its own, or the set file's (None: not asked)."""
    if raw is None:
        return None
    if raw == "":
        entry = record.file.get("baseline")
        if not isinstance(entry, dict) or not entry:
            raise SetFileError("--baseline", "the set file names no baseline; give "
                               "--baseline AXIS=VALUE,...")
        return entry
    return axis_entry(raw, "--baseline")


def axis_entry(raw: str, field: str) -> dict[str, Any]:
    """``AXIS=VALUE,...`` as a member entry (values read as JSON where they parse)."""
    entry: dict[str, Any] = {}
    for part in raw.split(","):
        axis, sep, value = part.partition("=")
        if not sep or not axis.strip():
            raise SetFileError(field, f"{part!r} must look like AXIS=VALUE")
        try:
            entry[axis.strip()] = json.loads(value)
        except json.JSONDecodeError:
            entry[axis.strip()] = value
    return entry


def print_table(record: SetRecord, args: argparse.Namespace, *, as_json: bool) -> int:
    """Print the set's table as ``args`` ask (``set run`` ends with it too)."""
    outputs = getattr(args, "outputs", None)
    entry = baseline_entry(record, getattr(args, "baseline", None))
    table = build_table(record, outputs, baseline=entry)
    by = getattr(args, "by", None)
    field = set_group_field(table, by)
    if field and entry is None:  # a baseline compares whole members
        table = group_table(table, field, asked=bool(by))
    fmt = getattr(args, "format", None)
    pivot = getattr(args, "pivot", None)
    metrics = [m.strip() for m in (getattr(args, "metrics", None) or "").split(",") if m.strip()]
    digits = getattr(args, "digits", 3)
    if as_json:
        print(json.dumps(table_json(table), indent=2))
    elif fmt in ("md", "latex", "csv"):
        print(render(table, fmt, metrics=metrics or None, pivot=pivot, digits=digits), end="")
    else:
        console = Console()
        console.print(rich_table(table, metrics=metrics or None, pivot=pivot, digits=digits,
                                 width=console.width))
        for plot in metric_plots(table, metrics or list(TERMINAL_METRICS)):
            console.print(plot, highlight=False, markup=False)
    return 0


def list_sets_command(args: argparse.Namespace) -> int:
    records = list_sets(args.outputs)
    if args.json:
        print(json.dumps([{"set_id": r.set_id, "name": r.name, "members": len(r.members),
                           "states": dict(Counter(m.state.value for m in r.members))}
                          for r in records], indent=2))
        return 0
    console = Console()
    if not records:
        console.print("no sets")
        return 0
    for r in records:
        counts = Counter(m.state.value for m in r.members)
        states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        console.print(f"[bold]{escape(r.set_id)}[/]  {len(r.members)} members  {states}",
                      highlight=False)
    return 0
