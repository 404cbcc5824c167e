"""The follow lines of ``evaltui set run``: one line per member plus one for the whole set.

On a terminal the lines are redrawn in place (Rich ``Live``); otherwise (a pipe, a log
file, a test) a member's line is printed each time its state or note changes, and the
set's line each time the counts change, so the output is a readable log.
"""

from __future__ import annotations

from collections import Counter

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from evaltui.contract.setspec import member_label
from evaltui.sets.runner import MemberLive

_COLOUR = {"done": "green", "failed": "red", "aborted": "red", "cancelled": "yellow",
           "running": "cyan", "starting": "cyan", "queued": "blue", "pending": "dim"}


def member_line(live: MemberLive) -> str:
    rec, run = live.record, live.run
    state = rec.state.value
    parts = [f"[{_COLOUR.get(state, 'white')}]{state:<9}[/]", escape(member_label(rec.axes))]
    summary = run.summary if run is not None else None
    if summary is not None and summary.episodes_total:
        parts.append(f"{summary.episodes_finished}/{summary.episodes_total}")
        sr = summary.metrics.get("success")
        if sr is not None:
            parts.append(f"SR {sr:.3f}")
    if rec.run_id:
        parts.append(f"[dim]{rec.run_id}[/]")
    if rec.attempts > 1:
        parts.append(f"attempt {rec.attempts}")
    note = live.note or (rec.error if rec.state.value in ("failed", "aborted") else None)
    if note:
        parts.append(f"[dim]{escape(note)}[/]")
    return "  ".join(parts)


def set_line(set_id: str, lives: list[MemberLive]) -> str:
    counts = Counter(live.record.state.value for live in lives)
    order = ("done", "running", "starting", "queued", "pending", "failed", "aborted",
             "cancelled")
    shown = ", ".join(f"{counts[s]} {s}" for s in order if counts[s])
    return f"[bold]set {escape(set_id)}[/]: {shown or 'no members'} ({len(lives)} members)"


class FollowPrinter:
    """``on_change`` of a SetRunner; ``close`` ends the live display."""

    def __init__(self, console: Console, set_id: str) -> None:
        self.console = console
        self.set_id = set_id
        self._live: Live | None = None
        self._last: dict[str, str] = {}
        self._last_set = ""
        if console.is_terminal:
            self._live = Live(console=console, auto_refresh=False, transient=False)
            self._live.start()

    def __call__(self, lives: list[MemberLive]) -> None:
        if self._live is not None:
            lines = [Text.from_markup(member_line(x)) for x in lives]
            self._live.update(Group(*lines, Text.from_markup(set_line(self.set_id, lives))),
                              refresh=True)
            return
        for live in lives:
            key = live.record.key
            line = member_line(live)
            # Episode counts change every poll: a log line per state or note change only.
            brief = f"{live.record.state.value}|{live.note}|{live.record.run_id}"
            if self._last.get(key) != brief:
                self._last[key] = brief
                self.console.print(line, highlight=False)
        summary = set_line(self.set_id, lives)
        if summary != self._last_set:
            self._last_set = summary
            self.console.print(summary, highlight=False)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
