"""MetricsPanel: a run's metric means with their 95% confidence intervals and n.

Two forms: a table with one line per metric, or (collapsed) the headline metrics on a
line, for small terminals (two lines where one is too narrow: at 80 columns one line
stopped at ``SDT…``). A CI is always written compactly
(``[.48,.68]``) and never wraps: a wrapped interval doubled the panel's height.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.reactive import reactive

from evaltui.results.groups import OVERALL, MetricGroup, metric_names
from evaltui.results.stopnote import CS_TITLE, T_TITLE, stopped_of
from evaltui.tui.display import NONE, metric
from evaltui.tui.widgets.bars import ThemedWidget, theme_style

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


class MetricsPanel(ThemedWidget):
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
    groups: reactive[tuple[str, Sequence[MetricGroup]] | None] = reactive(None, layout=True)
    """``(field, groups)``: the run by a row field (Meta-World's task), under the table."""
    collapsed: reactive[bool] = reactive(False, layout=True)
    """One line with the headline metrics instead of the table."""

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
        if self.groups:
            return Group(self._table(summary), self._group_table(*self.groups))
        return self._table(summary)

    def _group_table(self, field: str, groups: Sequence[MetricGroup]) -> Table:
        """The headline metric (SR where there is one) by group: mean, 95% CI and n."""
        app = self.app
        muted = theme_style(app, "foreground-muted")
        names = metric_names(groups)
        name = next((n for n in HEADLINE if n in names), names[0] if names else "")
        table = Table(box=None, padding=(0, 1), show_edge=False)
        table.add_column(field, style=theme_style(app, "primary"), header_style=muted,
                         no_wrap=True, overflow="ellipsis")
        table.add_column(SHORT_NAMES.get(name, name), justify="right", header_style=muted,
                         no_wrap=True)
        table.add_column("95% CI", justify="right", header_style=muted, style=muted,
                         no_wrap=True)
        table.add_column("n", justify="right", header_style=muted, style=muted, no_wrap=True)
        for g in groups:
            table.add_row(g.key, Text(_mean(g.stats.means.get(name)), style=theme_style(
                app, "foreground", bold=g.key == OVERALL)),
                compact_interval(g.stats.ci95.get(name)), str(g.stats.n.get(name, "")))
        return table

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
        stopped = stopped_of(summary)
        for name in (n for n in HEADLINE if n in means):
            part = Text()
            part.append(f"{SHORT_NAMES[name]} ", style=theme_style(app, "primary"))
            part.append(_mean(means[name]), style=theme_style(app, "foreground", bold=True))
            part.append(f" {compact_interval(ci.get(name))}", style=muted)
            if not parts and name in ns:  # one n is enough: the others rarely differ
                part.append(f" n={ns[name]}", style=muted)
            if stopped is not None and stopped.get("metric") == name:
                part.append(f" · stopped, CS {compact_interval(stopped.get('interval'))}",
                            style=theme_style(app, "warning"))
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
        stopped = stopped_of(summary)
        table.add_column(T_TITLE if stopped else "95% CI", justify="right", header_style=muted,
                         style=muted, no_wrap=True)
        if stopped:  # the confidence sequence beside the t interval, each named
            table.add_column(CS_TITLE, justify="right", header_style=muted, no_wrap=True)
        table.add_column("n", justify="right", header_style=muted, style=muted, no_wrap=True)
        names = [n for n in HEADLINE if n in means] + [n for n in means if n not in HEADLINE]
        for name in names:
            cells = [SHORT_NAMES.get(name, name),
                     Text(_mean(means[name]), style=theme_style(app, "foreground", bold=True)),
                     compact_interval(ci.get(name))]
            if stopped:
                cells.append(compact_interval(stopped.get("interval"))
                             if stopped.get("metric") == name else "")
            table.add_row(*cells, str(ns.get(name, "")))
        notes = []
        if stopped:
            notes.append(Text(f"stopped at n={stopped.get('n')} of {stopped.get('full_n')} "
                              f"by {stopped.get('rule')}: CS = confidence sequence (valid at "
                              "the stop), CI (t) = Student-t (fixed n)",
                              style=theme_style(app, "warning"), no_wrap=True,
                              overflow="ellipsis"))
        if errors:
            notes.append(Text(f"{errors} error/timeout episode(s) count as failures",
                              style=theme_style(app, "error"), no_wrap=True,
                              overflow="ellipsis"))
        return Group(table, *notes) if notes else table
