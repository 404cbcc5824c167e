"""The one writer of tables: rows of cell texts under headers as Markdown, LaTeX (booktabs),
CSV, HTML or a Rich table, and a table fitted to a terminal's width.

A run's metrics, a comparison and a ``--by`` table (:mod:`evaltui.results.tables`) and a
set's table (:mod:`evaltui.sets.render`) each build a :class:`Grid` of what the cells say;
how a grid is written is here alone. Markdown escapes ``|`` and marks bold cells ``**``;
LaTeX escapes its specials (unless the caller wrote TeX already) and marks bold cells
``\\textbf``; notes go under the table in each format's way.

Fitting a width (:func:`fit_grid`, :func:`fit_table`): Rich shrinks every column of a
table that is too wide, ids and states included: at 80 columns ``evaltui ls`` printed
"20261201_08590" for two runs ``..._2`` and ``..._3``, "runnin", "cancelle", and a
multi-line error stretched one run over several rows. Here a column is either *whole* (ids,
states, counts, numbers: never cut, what users copy and scan) or *free text* (names, notes:
cut with an ellipsis down to ``min_width``); when even that is too wide, the columns of
lowest ``priority`` are left out, and every cell is one line. The full text is one
``evaltui show`` away.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Group
from rich.table import Table
from rich.text import Text

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                   "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                   "^": r"\textasciicircum{}", "Δ": r"$\Delta$"}
_MD_RULE = {"l": ":---|", "r": "---:|"}


@dataclass
class Grid:
    """Headers, rows of cell texts, the cells to mark bold, notes under the table."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    bold: set[tuple[int, int]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    align: str = ""
    """A letter per column, ``l`` or ``r``: Markdown's alignment row, LaTeX's column spec
    and Rich's justification; empty: Markdown's plain ``---``, every column left."""


def latex_escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped for text mode."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


def markdown(grid: Grid, *, italic_notes: bool = False) -> str:
    """A Markdown (GFM) table; each note a paragraph of its own under it, or with
    ``italic_notes`` the notes in italics, one a line after one blank line."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    out = [line(grid.headers),
           "|" + "".join(_MD_RULE.get(a, "---|") for a in grid.align or "-" * len(grid.headers))]
    for i, row in enumerate(grid.rows):
        out.append(line([f"**{c}**" if (i, j) in grid.bold else c for j, c in enumerate(row)]))
    if italic_notes:
        out += [""] + [f"_{n}_" for n in grid.notes]
    else:
        for note in grid.notes:  # one paragraph each: consecutive lines would merge into one
            out.extend(["", note])
    return "\n".join(out) + "\n"


def latex(grid: Grid, *, escape: bool = True, notes_in_table: bool = False) -> str:
    """A booktabs ``tabular``; cells escaped unless ``escape`` is False (the caller wrote
    TeX). Notes are ``%`` comments after it, or with ``notes_in_table`` footnote-size rows
    spanning the table under its bottom rule."""
    tex = latex_escape if escape else str
    out = [f"\\begin{{tabular}}{{{grid.align or 'l' * len(grid.headers)}}}", "\\toprule",
           " & ".join(tex(h) for h in grid.headers) + " \\\\", "\\midrule"]
    for i, row in enumerate(grid.rows):
        cells = [f"\\textbf{{{tex(c)}}}" if (i, j) in grid.bold else tex(c)
                 for j, c in enumerate(row)]
        out.append(" & ".join(cells) + " \\\\")
    out.append("\\bottomrule")
    if notes_in_table:
        out += [f"\\multicolumn{{{len(grid.headers)}}}{{l}}{{\\footnotesize "
                f"{latex_escape(n)}}} \\\\" for n in grid.notes]
    out.append("\\end{tabular}")
    if not notes_in_table:
        out += [f"% {n}" for n in grid.notes]
    return "\n".join(out) + "\n"


def html_table(grid: Grid, table_id: str, *, bold_mark: str = "") -> str:
    """An HTML ``<table class="metrics">`` (the static report's); bold cells in ``<strong>``
    with ``bold_mark`` after them."""
    head = "".join(f"<th>{escape(h)}</th>" for h in grid.headers)
    rows = []
    for i, cells in enumerate(grid.rows):
        rows.append("<tr>" + "".join(
            f"<td><strong>{escape(c)} {bold_mark}</strong></td>" if (i, j) in grid.bold
            else f"<td>{escape(c)}</td>" for j, c in enumerate(cells)) + "</tr>")
    return (f'<table id="{table_id}" class="metrics"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """One header row and the rows, as any CSV reader takes them."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def rich_grid(grid: Grid, *, columns: Sequence[Mapping[str, Any]] = (),
               section_before_last: bool = False, **table: Any) -> Table:
    """``grid`` as a :class:`rich.table.Table` (``table``: its title, caption, box...);
    bold cells in bold, ``columns`` more options per column (no_wrap, overflow)."""
    out = Table(**table)
    for j, header in enumerate(grid.headers):
        justify = "right" if grid.align[j:j + 1] == "r" else "left"
        out.add_column(header, justify=justify, **(columns[j] if j < len(columns) else {}))
    for i, row in enumerate(grid.rows):
        out.add_row(*[f"[bold]{c}[/]" if (i, j) in grid.bold else c for j, c in enumerate(row)],
                    end_section=section_before_last and i == len(grid.rows) - 2)
    return out


def rich_width(grid: Grid) -> int:
    """Rich's width of ``grid`` with the default box: a cell, its padding and a rule each."""
    return sum(w + 3 for w in column_widths(grid)) + 1


def column_widths(grid: Grid, bold_mark: str = "") -> list[int]:
    """Each column's widest cell (a bold one with ``bold_mark`` after it)."""
    return [max([len(h), *(len(r[j]) + len(bold_mark) * ((i, j) in grid.bold)
                           for i, r in enumerate(grid.rows))])
            for j, h in enumerate(grid.headers)]


def fit_grid(build: Callable[[list[str]], Grid], names: Sequence[str], width: int | None,
             measure: Callable[[Grid], int] = rich_width) -> tuple[Grid, list[str]]:
    """The grid of as many of ``names`` (metrics) as fit in ``width``, the first always
    kept, the last left out first; and the names left out."""
    shown = list(names)
    grid = build(shown)
    left_out: list[str] = []
    while width is not None and len(shown) > 1 and measure(grid) > width:
        left_out.insert(0, shown.pop())
        grid = build(shown)
    return grid, left_out

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
