"""Which columns of the runs table fit a width, how wide each is, and how runs sort.

Pure functions over plain data (no widgets), so the layout rules are tested directly:
columns are dropped from the highest ``rank`` down until the rest fit (state, name,
progress, SR and the waiting reason stay longest), and spare width goes first to the
columns that can show more (names, data/split), up to their longest value, then to the
reason column, so a wide terminal shows whole names instead of empty space.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaltui.contract.states import RunState
from evaltui.tui.backend import RunInfo

CELL_PADDING = 1
"""The DataTable's padding on each side of a cell."""


@dataclass(frozen=True)
class RunColumn:
    """One column of the runs table."""

    key: str
    label: str
    width: int
    """The narrowest it is shown at."""
    rank: int
    """0 is shown at any width; higher ranks are dropped first when width runs out."""
    grows: bool = False
    """Takes spare width, up to its longest value (the last such one: all that is left)."""


COLUMNS: tuple[RunColumn, ...] = (
    RunColumn("mark", "", 1, 0),
    # 15: YYYYMMDD_HHMMSS, longer with _2. Before the reason at 80 columns: 19 rows of one
    # graph could not be told apart, and the selected run's reason is in the pane below.
    RunColumn("run_id", "run", 15, 3, grows=True),
    RunColumn("graph", "name", 12, 0, grows=True),
    RunColumn("data", "data/split", 12, 9, grows=True),
    RunColumn("state", "state", 11, 0),
    RunColumn("node", "node", 6, 3, grows=True),
    RunColumn("progress", "progress", 11, 1, grows=True),
    RunColumn("sr", "SR", 5, 2),
    RunColumn("spl", "SPL", 5, 6),
    RunColumn("ndtw", "nDTW", 5, 7),
    RunColumn("workers", "wkr", 3, 11),
    RunColumn("vram", "VRAM est/ask", 12, 8),
    RunColumn("priority", "pri", 3, 10),
    RunColumn("age", "age", 3, 12),
    RunColumn("why", "reason", 14, 4, grows=True),
)
"""In display order."""

REASON = "why"
REASON_ROOM = 60
"""How wide the reason column is let to grow by dropping the columns ranked below
REASON_OVER: a waiting reason ("needs 30.0 GiB on GPU0, 14.0 GiB free after
reservations") is why a run does not start, worth more than SPL, nDTW or the VRAM
estimate (the run id stays: it is what tells runs of one graph apart)."""
REASON_OVER = 4
BAR_ROOM = 24
"""The most cells a progress bar takes (then the count beside it)."""
BAR_FROM = 120
"""Past this width a bar gets a cell per BAR_SHARE columns before the reason grows (up
to that the reason comes first: it is why a run waits)."""
BAR_SHARE = 8

GROW_ORDER = ("run_id", "graph", "node", "data", REASON, "progress")
"""Who gets spare width first: whole names, then the reason, then a longer bar."""

NODE_COLUMNS = frozenset({"node"})
"""Shown only when some run has a Ray node (``--ray``): one machine looks as before."""


def fit_columns(width: int, wanted: Mapping[str, int], *,
                nodes: bool = False) -> list[tuple[RunColumn, int]]:
    """The columns shown in ``width`` cells, each with its width, in display order.

    ``wanted``: the longest value of a growing column (it is not widened past that,
    except the reason column, which takes whatever is left). ``nodes``: some run has a
    node, so the node column is a candidate too.
    """
    def cost(column: RunColumn, w: int | None = None) -> int:
        return (column.width if w is None else w) + 2 * CELL_PADDING

    shown = [c for c in COLUMNS if nodes or c.key not in NODE_COLUMNS]
    for rank in sorted({c.rank for c in shown}, reverse=True):
        if sum(cost(c) for c in shown) <= width or rank == 0:
            break
        shown = [c for c in shown if c.rank < rank]
    reason = next((c for c in shown if c.key == REASON), None)
    if reason is not None:  # room for the reason before the columns ranked below it
        target = min(REASON_ROOM, wanted.get(REASON, reason.width))
        for rank in sorted({c.rank for c in shown if c.rank > REASON_OVER}, reverse=True):
            if width - sum(cost(c) for c in shown) + reason.width >= target:
                break
            shown = [c for c in shown if c.rank < rank]
    widths = {c.key: c.width for c in shown}
    spare = width - sum(cost(c) for c in shown)
    targets = {c.key: wanted.get(c.key, c.width) for c in shown if c.grows}
    if REASON in targets:
        targets[REASON] = min(targets[REASON], REASON_ROOM)
    steps = [(key, targets[key]) for key in GROW_ORDER if key in targets]
    if "progress" in targets:  # a bar that grows with the width comes before the reason
        first = targets["progress"] - BAR_ROOM + max(0, (width - BAR_FROM) // BAR_SHARE)
        before = REASON if REASON in targets else "progress"
        steps.insert([k for k, _ in steps].index(before), ("progress", first))
    for key, target in steps:  # up to the longest value, most important first
        extra = min(spare, max(0, target - widths[key]))
        widths[key] += extra
        spare -= extra
    last = next((c for c in reversed(shown) if c.grows), None)
    if last is not None and spare > 0:  # the rest: the rightmost growing column
        widths[last.key] += spare
    return [(c, widths[c.key]) for c in shown]


SortKey = Callable[[RunInfo], Any]
STATE_ORDER = {state: i for i, state in enumerate(
    (RunState.RUNNING, RunState.STARTING, RunState.QUEUED, RunState.FAILED, RunState.ABORTED,
     RunState.CANCELLED, RunState.DONE))}

SORTS: tuple[tuple[str | None, str, SortKey | None, bool], ...] = (
    # column, words for the caption, key, descending
    (None, "queue order", None, False),
    ("graph", "name", lambda r: r.graph.lower(), False),
    ("state", "state", lambda r: STATE_ORDER.get(r.state, 99), False),
    ("progress", "progress", lambda r: r.episodes_finished / max(r.episodes_total, 1), True),
    ("sr", "SR", lambda r: r.metrics.get("success"), True),
    ("priority", "priority", lambda r: r.priority, True),
    ("age", "age", lambda r: r.queued_at or "", False),
    ("run_id", "run id", lambda r: r.run_id, True),
)
"""What ``o`` cycles through on the queue screen (queue order = admission order)."""


def sort_runs(runs: Sequence[RunInfo], sort: int) -> list[RunInfo]:
    """``runs`` in the order of ``SORTS[sort]``; runs without the value last, ties stable."""
    _, _, key, descending = SORTS[sort % len(SORTS)]
    if key is None:
        return list(runs)
    known = [r for r in runs if key(r) is not None]
    unknown = [r for r in runs if key(r) is None]
    return sorted(known, key=key, reverse=descending) + unknown
