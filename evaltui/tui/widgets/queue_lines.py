"""The queue screen's one-line widgets: scheduler header, runs caption, selected run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from evaltui.states import RunState
from evaltui.tui.backend import RunInfo, SchedulerInfo
from evaltui.tui.display import STATE_COLOUR, duration, first_line
from evaltui.tui.widgets.bars import theme_style

MODE_TEXT = {"running": ("● admitting", "success"), "paused": ("‖ paused", "warning"),
             "locked": ("🔒 locked", "error")}
"""How each scheduler mode reads, and its theme colour."""


class SchedulerHeader(Static):
    """Which scheduler, whether it admits (or why not), where its API is, and failures."""

    def show(self, info: SchedulerInfo | None, label: str, poll_error: str | None) -> None:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        header = Text()
        header.append("evaltui", style=theme_style(app, "primary", bold=True))
        header.append(f"  {info.label if info else label} scheduler", style=muted)
        if info is not None and not poll_error:  # a failed poll leaves it out of date
            text, colour = MODE_TEXT[info.mode]
            header.append(f"  {text}", style=theme_style(app, colour, bold=True))
            if info.mode == "locked":
                header.append(f" by {info.lock_owner}, {duration(info.lock_expires_in_sec)}"
                              " left", style=theme_style(app, colour))
            elif info.mode == "paused":
                header.append(" (not ticking: nothing is admitted)", style=muted)
            if info.api_note:
                header.append(f"   {info.api_note}", style=muted)
        if poll_error:
            header.append(f"\n⚠ backend unreachable: {poll_error}",
                          style=theme_style(app, "error", bold=True))
        self.update(header)


class RunsCaption(Static):
    """How many runs are shown, by state, and the filter in force."""

    def show(self, runs: Sequence[RunInfo], shown: int, text_filter: str) -> None:
        app = self.app
        counts = Counter(r.state for r in runs)
        caption = Text(f"runs {shown}/{len(runs)}", style=theme_style(app, "foreground",
                                                                       bold=True))
        for state in RunState:
            if counts.get(state):
                caption.append(f"   {state.value} {counts[state]}",
                               style=theme_style(app, STATE_COLOUR[state]))
        if text_filter:
            caption.append(f"   filter: “{text_filter}”", style=theme_style(app, "accent"))
        self.update(caption, layout=False)


class RunDetail(Static):
    """The selected run in full: why it failed, why it waits, or what it is."""

    def show(self, run: RunInfo | None) -> None:
        detail = Text()
        if run is not None:
            app = self.app
            detail.append(f"▸ {run.run_id}", style=theme_style(app, "primary", bold=True))
            if run.kind == "admit":
                detail.append(f"  evaltui run {run.graph}: {run.command or ''}  ",
                              style=theme_style(app, "foreground-muted"))
                detail.append(f"waiting: {run.waiting_reason or 'next tick'}",
                              style=theme_style(app, "warning"))
            elif run.error:
                detail.append(f"  {first_line(run.error, 400)}", style=theme_style(app, "error"))
            elif run.state is RunState.QUEUED and run.waiting_reason:
                detail.append(f"  waiting: {run.waiting_reason}",
                              style=theme_style(app, "warning"))
            else:
                workers = f"{run.worker_count} worker{'s' if run.worker_count != 1 else ''}"
                detail.append(f"  {run.graph} on {run.dataset}/{run.split} · "
                              f"{run.episodes_finished}/{run.episodes_total} episodes · "
                              f"{workers} · enter: episodes",
                              style=theme_style(app, "foreground-muted"))
        self.update(detail, layout=False)
