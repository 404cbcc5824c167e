"""A command's table that fits the terminal: ids whole, columns dropped by priority.

Rich shrinks every column of a table that is too wide, ids and states included: at 80
columns ``evaltui ls`` printed "20261201_08590" for two runs ``..._2`` and ``..._3``,
"runnin", "cancelle", and a multi-line error stretched one run over several rows. Here a
column is either *whole* (ids, states, counts, numbers: never cut, what users copy and
scan) or *free text* (names, notes: cut with an ellipsis down to ``min_width``); when
even that is too wide, the columns of lowest ``priority`` are left out, and every cell
is one line. The full text is one ``evaltui show`` away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Group
from rich.text import Text

GAP = 2
"""Cells between two columns (the tables have no box and no edge padding)."""


@dataclass(frozen=True)
class FitColumn:
    name: str
    priority: int
    """Higher stays longer; the lowest is the first left out when the table is too wide."""
    whole: bool = True
    """Never cut (ids, states, counts); False: free text, cut with an ellipsis."""
    min_width: int = 8
    """A free-text column is left out rather than cut below this."""
    justify: Literal["left", "right"] = "left"


def one_line(text: object) -> str:
    """``text`` on one line: its first non-empty line; a traceback gives its last line (the
    exception) after what preceded it ("workers cannot start: ValueError: ...")."""
    lines = [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]
    if not lines:
        return ""
    head = lines[0]
    marker = "Traceback (most recent call last):"
    if marker in head or (len(lines) > 1 and lines[1].startswith(marker)):
        before = head.split(marker, 1)[0].rstrip()
        return f"{before} {lines[-1]}".strip() if before else lines[-1]
    return head


def fit_table(columns: Sequence[FitColumn], rows: Sequence[Sequence[str | Text]],
              width: int) -> Group:
    """The table of ``rows`` (one cell per column; Text keeps its style) in ``width``."""
    cells = [[c if isinstance(c, Text) else Text(one_line(c)) for c in row] for row in rows]
    natural = [max([cell_len(col.name), *(cell_len(row[i].plain) for row in cells)])
               for i, col in enumerate(columns)]
    kept = list(range(len(columns)))

    def needed(indices: list[int]) -> int:
        return sum(natural[i] if columns[i].whole else min(natural[i], columns[i].min_width)
                   for i in indices) + GAP * (len(indices) - 1)

    while len(kept) > 1 and needed(kept) > width:
        kept.remove(min(kept, key=lambda i: (columns[i].priority, -i)))
    widths = {i: natural[i] for i in kept}
    over = sum(widths.values()) + GAP * (len(kept) - 1) - width
    # Cut the free-text columns towards their minimum, the least needed first.
    for i in sorted((i for i in kept if not columns[i].whole),
                    key=lambda i: columns[i].priority):
        cut = min(max(over, 0), widths[i] - min(widths[i], columns[i].min_width))
        widths[i] -= cut
        over -= cut
    header = [Text(columns[i].name, style="bold") for i in kept]
    lines = [_line(header, kept, widths, columns)]
    lines += [_line([row[i] for i in kept], kept, widths, columns) for row in cells]
    return Group(*lines)


def _line(cells: Sequence[Text], kept: list[int], widths: dict[int, int],
          columns: Sequence[FitColumn]) -> Text:
    """One row: each cell cut to its width (an ellipsis marks the cut) and aligned."""
    out = Text(no_wrap=True, overflow="ellipsis", end="\n")
    for n, (cell, i) in enumerate(zip(cells, kept, strict=True)):
        text = cell.copy()
        if cell_len(text.plain) > widths[i]:
            text.truncate(widths[i], overflow="ellipsis")
        pad = widths[i] - cell_len(text.plain)
        if columns[i].justify == "right":
            out.append(" " * pad)
            out.append_text(text)
        else:
            out.append_text(text)
            if n < len(kept) - 1:
                out.append(" " * pad)
        if n < len(kept) - 1:
            out.append(" " * GAP)
    out.rstrip()
    return out
