"""``set show --baseline``: every member's paired difference to the baseline member.

Reads the episode rows of the baseline's and each member's run dir
(:func:`evaltui.results.runrows.load_run`) and compares them
(:func:`evaltui.sets.stats.baseline_diffs`). A member without a run dir, or with no
episode in common with the baseline (another split), gets a note instead of numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evaltui.results.runrows import RunDirError, load_run
from evaltui.sets.expansion import one_member
from evaltui.sets.stats import baseline_diffs

if TYPE_CHECKING:
    from evaltui.sets.table import SetTable


def attach_baseline(table: SetTable, entry: dict[str, Any]) -> None:
    """Set ``table.baseline`` and each other row's ``vs_baseline`` (or its note)."""
    base = one_member(table.rows, entry, "baseline")
    table.baseline = base
    if base.run_dir is None:
        for r in table.rows:
            if r is not base:
                r.vs_baseline_note = "the baseline has no run yet"
        return
    try:
        base_rows = load_run(base.run_dir).rows
    except RunDirError as exc:
        for r in table.rows:
            r.vs_baseline_note = f"baseline: {exc}"
        return
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in table.rows:
        if r is base:
            continue
        if r.run_dir is None:
            r.vs_baseline_note = "no run yet"
            continue
        try:
            rows[r.key] = load_run(r.run_dir).rows
        except RunDirError as exc:
            r.vs_baseline_note = str(exc)
    diffs, why = baseline_diffs(base_rows, rows)
    for r in table.rows:
        if r.key in diffs:
            r.vs_baseline = diffs[r.key]
        elif r.key in why:
            r.vs_baseline_note = why[r.key]
