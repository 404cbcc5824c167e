"""The queue screen's one-line widgets: scheduler header, runs caption, selected run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from evaltui.contract.states import RunState
from evaltui.contract.views import data_label
from evaltui.tui.backend import RunInfo, SchedulerInfo
from evaltui.tui.display import STATE_COLOUR, duration, first_line
from evaltui.tui.widgets.bars import theme_style

MODE_TEXT = {"running": ("● admitting", "success"), "paused": ("‖ paused", "warning"),
             "locked": ("🔒 locked", "error")}
"""How each scheduler mode reads, and its theme colour."""


class SchedulerHeader(Static):
    """Which scheduler, whether it admits (or why not), where its API is, and failures.

    Always one line: what matters most comes first and the rest is cut with an ellipsis,
    so a long lock owner or API note never pushes the screen down a row. Where the whole
    line does not fit, the words that explain rather than inform go first ("scheduler",
    the paused mode's gloss), so the API address and the demo's note stay in view.
    """

    DEFAULT_CSS = """
    SchedulerHeader {
        height: 1;
    }
    """

    _shown: tuple = ()

    def show(self, info: SchedulerInfo | None, label: str, poll_error: str | None,
             stale_for: float | None = None) -> None:
        self._shown = (info, label, poll_error, stale_for)
        header = self._line(info, label, poll_error, stale_for, brief=False)
        width = self.content_region.width or self.app.size.width
        if header.cell_len > width:
            header = self._line(info, label, poll_error, stale_for, brief=True)
        self.update(header)

    def on_resize(self) -> None:
        if self._shown:
            self.show(*self._shown)

    def _line(self, info: SchedulerInfo | None, label: str, poll_error: str | None,
              stale_for: float | None, *, brief: bool) -> Text:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        header = Text(no_wrap=True, overflow="ellipsis", end="")
        header.append("evaltui", style=theme_style(app, "primary", bold=True))
        if poll_error:  # a failed poll leaves the mode out of date: say that instead
            header.append(f"  ⚠ backend unreachable: {poll_error}",
                          style=theme_style(app, "error", bold=True))
            if stale_for is not None:
                header.append(f"  · shown as of {duration(stale_for)} ago", style=muted)
            return header
        name = info.label if info else label
        header.append(f"  {name}" if brief else f"  {name} scheduler", style=muted)
        if info is not None:
            text, colour = MODE_TEXT[info.mode]
            header.append(f"  {text}", style=theme_style(app, colour, bold=True))
            if info.mode == "locked":
                header.append(f" by {info.lock_owner}, {duration(info.lock_expires_in_sec)}"
                              " left", style=theme_style(app, colour))
            elif info.mode == "paused" and not brief:
                header.append(" (not ticking: nothing is admitted)", style=muted)
            if info.ledger_error:  # before the API note: it is why the queue does not move
                header.append(f"  ⚠ {info.ledger_error}",
                              style=theme_style(app, "error", bold=True))
            if info.api_note:
                header.append(f"   {info.api_note}", style=muted)
            if info.ledger_note and not info.ledger_error:  # the full reason: `ledger where`
                header.append("  ⚠ per-user ledger: other users cannot see these "
                              "reservations", style=theme_style(app, "warning"))
        return header


class RunsCaption(Static):
    """How many runs are shown, by state, the sort, the filter in force, and staleness."""

    def show(self, runs: Sequence[RunInfo], shown: int, text_filter: str,
             sorted_by: str = "queue order", stale_for: float | None = None) -> None:
        app = self.app
        counts = Counter(r.state for r in runs)
        caption = Text(f"runs {shown}/{len(runs)}", style=theme_style(app, "foreground",
                                                                       bold=True),
                       no_wrap=True, overflow="ellipsis", end="")
        if stale_for is not None:
            caption.append(f"  stale {int(stale_for)}s", style=theme_style(app, "error",
                                                                          bold=True))
        for state in RunState:
            if counts.get(state):
                caption.append(f"  {state.value} {counts[state]}",
                               style=theme_style(app, STATE_COLOUR[state]))
        if text_filter:
            caption.append(f"  filter “{text_filter}”", style=theme_style(app, "accent"))
        if sorted_by != "queue order":
            caption.append(f"  by {sorted_by} (o)", style=theme_style(app, "foreground-muted"))
        self.update(caption, layout=False)


def empty_message(total: int, text_filter: str) -> str | None:
    """What an empty table says, with the next step; None when it is not empty."""
    if total == 0:
        return ("no runs yet — press s to submit one, or run `evaltui eval --demo` "
                "in a shell")
    if text_filter:
        return f"no run matches “{text_filter}” — press / and edit it, or esc to clear it"
    return None


def vram_decision(run: RunInfo) -> str | None:
    """What admission counts a run as, beside what it asked: ``calibrated 0 MiB, asked
    20,000 MiB`` (None when nothing is known)."""
    if run.vram_estimate_mb is None and run.vram_asked_mb is None:
        return None
    parts = []
    if run.vram_estimate_mb is not None:
        source = run.estimate_source or "estimated"
        parts.append(f"{source} {_mib(run.vram_estimate_mb)}")
    if run.vram_asked_mb is not None:
        asked = "asked nothing" if run.vram_asked_mb == 0 else \
            f"asked {_mib(run.vram_asked_mb)}"
        parts.append(asked)
    if run.vram_measured_mb is not None:
        parts.append(f"peak measured {_mib(run.vram_measured_mb)}")
    return "VRAM " + ", ".join(parts)


def _mib(mb: float) -> str:
    return f"{int(round(mb)):,} MiB"


class RunDetail(Static):
    """The selected run in full, wrapped over a few lines: what it is, what admission
    counts it as against what it asked, and the whole reason it waits or failed."""

    DEFAULT_CSS = """
    RunDetail {
        height: auto;
        max-height: 6;
    }
    """

    def show(self, run: RunInfo | None, mark: str | None = None) -> None:
        detail = Text()
        if run is not None:
            app = self.app
            muted = theme_style(app, "foreground-muted")
            detail.append(f"▸ {run.run_id}", style=theme_style(app, "primary", bold=True))
            if mark:
                detail.append(f" [{mark}]", style=theme_style(app, "accent", bold=True))
            if run.kind in ("admit", "serve"):
                what = f"serve {run.graph}" if run.kind == "serve" else f"evaltui run {run.graph}"
                detail.append(f"  {what}: {run.command or ''}", style=muted)
                if run.state is RunState.QUEUED:
                    detail.append(f"\nwaiting: {run.waiting_reason or 'next tick'}",
                                  style=theme_style(app, "warning"))
                else:
                    at = f" at {run.url}" if run.url else ""
                    served = f" · {run.requests_served} requests served" \
                        if run.requests_served is not None else ""
                    held = f" · holds {run.vram_estimate_mb:.0f} MiB" \
                        if run.vram_estimate_mb else ""
                    detail.append(f"\n{'serving' if run.kind == 'serve' else 'running'}{at}"
                                  f"{served}{held} · evaltui cancel {run.run_id} stops it",
                                  style=muted)
                self.update(detail)
                return
            workers = f"{run.worker_count} worker{'s' if run.worker_count != 1 else ''}"
            detail.append(f"  {run.graph} on {data_label(run.dataset, run.split)} · "
                          f"{run.state.value} · "
                          f"{run.episodes_finished}/{run.episodes_total} episodes · "
                          f"{workers} · priority {run.priority}", style=muted)
            if run.node:
                detail.append(f" · on {run.node}", style=muted)
            vram = vram_decision(run)
            if vram:
                detail.append(f"\n{vram}", style=muted)
            if run.error:
                detail.append(f"\n{first_line(run.error, 400)}", style=theme_style(app, "error"))
            elif run.state is RunState.QUEUED and run.waiting_reason:
                detail.append(f"\nwaiting: {run.waiting_reason}",
                              style=theme_style(app, "warning"))
        self.update(detail)
