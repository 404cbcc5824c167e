"""MetricsPanel: a run's metric means with their 95% confidence intervals and n."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from evaltui.tui.display import interval, metric
from evaltui.tui.widgets.bars import theme_style

HEADLINE = ("success", "spl", "ndtw", "sdtw")
"""Shown first, in this order; other metrics follow as the run reports them."""


class MetricsPanel(Widget):
    """Mean, 95% CI and n per metric, from the run's summary.

    The means are over every scored episode, errors and timeouts counting as failures;
    when there are any, a caption says so (the ok-only numbers are in summary.json).
    """

    DEFAULT_CSS = """
    MetricsPanel {
        height: auto;
    }
    """

    summary: reactive[Mapping[str, Any] | None] = reactive(None, layout=True)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _: self.refresh())

    def render(self) -> Table | Text:
        summary = self.summary or {}
        means = summary.get("metrics") or {}
        if not means:
            return Text("no metrics yet: they appear with the first finished episodes",
                        style=theme_style(self.app, "foreground-muted"))
        ci = summary.get("metrics_ci95") or {}
        ns = summary.get("metrics_n") or {}
        errors = int(summary.get("error_count") or 0)
        caption = (f"errors count as failures: {errors} episode(s) ended error/timeout"
                   if errors else None)
        table = Table(box=None, padding=(0, 1), expand=True, show_edge=False, caption=caption,
                      caption_style=theme_style(self.app, "error"), caption_justify="left")
        muted = theme_style(self.app, "foreground-muted")
        table.add_column("metric", style=theme_style(self.app, "primary"), header_style=muted)
        table.add_column("mean", justify="right", header_style=muted)
        table.add_column("95% CI", justify="right", header_style=muted, style=muted)
        table.add_column("n", justify="right", header_style=muted, style=muted)
        names = [n for n in HEADLINE if n in means] + [n for n in means if n not in HEADLINE]
        for name in names:
            value = means[name]
            table.add_row(name, Text(metric(value if isinstance(value, int | float) else None),
                                     style=theme_style(self.app, "foreground", bold=True)),
                          interval(ci.get(name)), str(ns.get(name, "")))
        return table
