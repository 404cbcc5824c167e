"""MetricsPanel: a run's metric means with their 95% confidence intervals and n.

Two forms: a table with one line per metric, or (collapsed) the headline metrics on a
line, for small terminals (two lines where one is too narrow: at 80 columns one line
stopped at ``SDT…``). A CI is always written compactly
(``[.48,.68]``) and never wraps: a wrapped interval doubled the panel's height.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from evaltui.tui.display import NONE, metric
from evaltui.tui.widgets.bars import theme_style

HEADLINE = ("success", "spl", "ndtw", "sdtw")
"""Shown first, in this order; other metrics follow as the run reports them."""
SHORT_NAMES = {"success": "SR", "spl": "SPL", "ndtw": "nDTW", "sdtw": "SDTW"}
"""How the one-line form and the table name the headline metrics."""


def short_number(value: float) -> str:
    """Two decimals without a leading zero (``.48``, ``1.00``, ``-.05``, ``12.30``)."""
    text = f"{value:.2f}"
    if text.startswith("0."):
        return text[1:]
    if text.startswith("-0."):
        return "-" + text[2:]
    return text


def compact_interval(ci: object) -> str:
    """A 95% CI as ``[.48,.68]``: the same numbers in about half the width."""
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(v, int | float)
                                                           for v in ci):
        return f"[{short_number(ci[0])},{short_number(ci[1])}]"
    return NONE


def _mean(value: object) -> str:
    return metric(value if isinstance(value, int | float) else None)


class MetricsPanel(Widget):
    """Mean, 95% CI and n per metric, from the run's summary.

    The means are over every scored episode, errors and timeouts counting as failures;
    when there are any, a last line says so (the ok-only numbers are in summary.json).
    """

    DEFAULT_CSS = """
    MetricsPanel {
        height: auto;
    }
    """

    summary: reactive[Mapping[str, Any] | None] = reactive(None, layout=True)
    collapsed: reactive[bool] = reactive(False, layout=True)
    """One line with the headline metrics instead of the table."""

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _: self.refresh())

    def watch_collapsed(self, collapsed: bool) -> None:
        self.set_class(collapsed, "-collapsed")

    def render(self) -> Table | Group | Text:
        summary = self.summary or {}
        means = summary.get("metrics") or {}
        if not means and summary.get("status") in ("failed", "cancelled"):
            # Not "yet": none will come. The header says why; `show` has all of it.
            run = f" {summary['run_id']}" if summary.get("run_id") else ""
            return Text(f"no metrics: the run {summary['status']} before any episode "
                        f"finished (evaltui show{run} for the whole error)",
                        style=theme_style(self.app, "error"), no_wrap=True,
                        overflow="ellipsis")
        if not means:
            return Text("no metrics yet: they appear with the first finished episodes",
                        style=theme_style(self.app, "foreground-muted"), no_wrap=True,
                        overflow="ellipsis")
        if self.collapsed:
            return self._line(summary)
        return self._table(summary)

    def _line(self, summary: Mapping[str, Any]) -> Text:
        """``SR 0.583 [.48,.68] n=12 · SPL 0.446 [.35,.55] · nDTW …``: one line, or two
        broken between metrics where the widget is narrower than one."""
        app = self.app
        means = summary.get("metrics") or {}
        ci = summary.get("metrics_ci95") or {}
        ns = summary.get("metrics_n") or {}
        muted = theme_style(app, "foreground-muted")
        parts: list[Text] = []
        errors = int(summary.get("error_count") or 0)
        for name in (n for n in HEADLINE if n in means):
            part = Text()
            part.append(f"{SHORT_NAMES[name]} ", style=theme_style(app, "primary"))
            part.append(_mean(means[name]), style=theme_style(app, "foreground", bold=True))
            part.append(f" {compact_interval(ci.get(name))}", style=muted)
            if not parts and name in ns:  # one n is enough: the others rarely differ
                part.append(f" n={ns[name]}", style=muted)
            parts.append(part)
        if errors:
            parts.append(Text(f"{errors} err/timeout = fail", style=theme_style(app, "error")))
        width = self.content_region.width or self.app.size.width
        lines = [Text(no_wrap=True, overflow="ellipsis")]
        for part in parts:
            line = lines[-1]
            if line.plain and line.cell_len + 3 + part.cell_len > width and len(lines) < 2:
                line = Text(no_wrap=True, overflow="ellipsis")
                lines.append(line)
            elif line.plain:
                line.append(" · ", style=muted)
            line.append_text(part)
        return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)

    def _table(self, summary: Mapping[str, Any]) -> Table | Group:
        app = self.app
        means = summary.get("metrics") or {}
        ci = summary.get("metrics_ci95") or {}
        ns = summary.get("metrics_n") or {}
        errors = int(summary.get("error_count") or 0)
        table = Table(box=None, padding=(0, 1), show_edge=False)
        muted = theme_style(app, "foreground-muted")
        table.add_column("metric", style=theme_style(app, "primary"), header_style=muted,
                         no_wrap=True, overflow="ellipsis")
        table.add_column("mean", justify="right", header_style=muted, no_wrap=True)
        table.add_column("95% CI", justify="right", header_style=muted, style=muted,
                         no_wrap=True)
        table.add_column("n", justify="right", header_style=muted, style=muted, no_wrap=True)
        names = [n for n in HEADLINE if n in means] + [n for n in means if n not in HEADLINE]
        for name in names:
            table.add_row(SHORT_NAMES.get(name, name),
                          Text(_mean(means[name]), style=theme_style(app, "foreground",
                                                                     bold=True)),
                          compact_interval(ci.get(name)), str(ns.get(name, "")))
        if not errors:
            return table
        return Group(table, Text(f"{errors} error/timeout episode(s) count as failures",
                                 style=theme_style(app, "error"), no_wrap=True,
                                 overflow="ellipsis"))
