"""RunProgress: a run's progress bar, counts by status, throughput and ETA."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive

from evaltui.tui.display import STATE_COLOUR, duration, seconds_between
from evaltui.tui.widgets.bars import ThemedWidget, stacked_bar, theme_style

STATUS_ORDER = ("ok", "error", "timeout", "cancelled")


def _order(status: str) -> tuple[int, str]:
    return (STATUS_ORDER.index(status) if status in STATUS_ORDER else len(STATUS_ORDER),
            status)


@dataclass(frozen=True)
class Progress:
    """What the widget shows; built by the run screen from the summary and live rows."""

    total: int
    counts: Counter[str] = field(default_factory=Counter)
    elapsed_sec: float | None = None
    running: bool = False
    disk_note: str | None = None
    """The run's writes wait (or waited) for room on a full disk (summary ``disk_wait``)."""
    replica_note: str | None = None
    """``degraded: replica GPU1 lost`` (summary ``replicas``)."""
    server_note: str | None = None
    """``policy server p50 3.1 ms p99 9.8 ms``: a policy asked over the network
    (evaltui.nodesets; the run dir's ``policy_server/``)."""

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    @property
    def rate(self) -> float | None:
        """Episodes a second so far."""
        if not self.elapsed_sec or self.elapsed_sec <= 0 or not self.finished:
            return None
        return self.finished / self.elapsed_sec

    @property
    def eta_sec(self) -> float | None:
        rate = self.rate
        if not self.running or rate is None:
            return None
        return max(0, self.total - self.finished) / rate

    @classmethod
    def of(cls, summary: Mapping[str, Any] | None, counts: Counter[str], running: bool,
           now: datetime, server: Mapping[str, Any] | None = None) -> Progress:
        """Live counts plus the summary's total and clock (``now`` for a running run);
        ``server``: the round trips of a remote policy (``serverrecord.read_latency``)."""
        summary = summary or {}
        total = summary.get("episodes_total")
        elapsed = summary.get("elapsed_sec")
        if running:
            elapsed = seconds_between(summary.get("started_at"), now) or elapsed
        return cls(total=total if isinstance(total, int) else sum(counts.values()),
                   counts=counts, elapsed_sec=elapsed if isinstance(elapsed, int | float)
                   else None, running=running, disk_note=disk_note(summary.get("disk_wait")),
                   replica_note=replica_note(summary.get("replicas")),
                   server_note=f"policy server p50 {server['p50_ms']:g} ms p99 "
                   f"{server['p99_ms']:g} ms" if server else None)


def replica_note(replicas: object) -> str | None:
    """``degraded: replica GPU1 lost`` (``replicas GPU1, GPU2 of policy lost``), or None."""
    if not isinstance(replicas, Mapping):
        return None
    lost = [(name, r.get("gpu") or "host") for name, rs in replicas.items()
            if isinstance(rs, list) for r in rs if isinstance(r, Mapping)
            and r.get("state") == "lost"]
    if not lost:
        return None
    gpus = ", ".join(str(gpu) for _, gpu in lost)
    names = sorted({name for name, _ in lost})
    where = f" of {', '.join(names)}" if len(replicas) > 1 else ""
    return f"degraded: replica{'s' if len(lost) > 1 else ''} {gpus}{where} lost"


def disk_note(wait: object) -> str | None:
    """``⚠ disk full: waiting for room for PATH since …`` or ``waited 2.1 s for disk space``."""
    if not isinstance(wait, Mapping) or not wait.get("path"):
        return None
    since = wait.get("waiting_since")
    if isinstance(since, str):
        return f"⚠ disk full: waiting for room for {wait['path']} since {since[11:19]}"
    waited = wait.get("waited_sec")
    return f"waited {waited:.1f} s for room on a full disk" \
        if isinstance(waited, int | float) else None


class RunProgress(ThemedWidget):
    """Progress bar by status colour, counts, episodes per second and time left."""

    DEFAULT_CSS = """
    RunProgress {
        height: auto;
    }
    RunProgress.-compact {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    progress: reactive[Progress | None] = reactive(None)
    """Always four lines (one while reading), so a change never needs a new layout."""
    compact: reactive[bool] = reactive(False, layout=True)
    """One line (counts, bar, pace) for small terminals, instead of four."""

    def watch_compact(self, compact: bool) -> None:
        self.set_class(compact, "-compact")

    def render(self) -> Group | Text:
        p = self.progress
        app = self.app
        if p is None:
            return Text("reading the run…" + ("" if self.compact else "\n\n\n"),
                        style=theme_style(app, "foreground-muted"))
        parts = [(p.counts.get(s, 0), theme_style(app, STATE_COLOUR[s])) for s in STATUS_ORDER]
        pct = 100 * p.finished / p.total if p.total else 0.0
        head = Text(f"{p.finished}/{p.total} episodes", style=theme_style(app, "foreground",
                                                                          bold=True))
        head.append(f"  {pct:.0f}%", style=theme_style(app, "foreground-muted"))
        counts = Text()
        for status in STATUS_ORDER + tuple(sorted(set(p.counts) - set(STATUS_ORDER))):
            if counts:
                counts.append("  ")
            counts.append(f"{status} ", style=theme_style(app, "foreground-muted"))
            counts.append(str(p.counts.get(status, 0)),
                          style=theme_style(app, STATE_COLOUR.get(status, "foreground")))
        if self.compact:
            return self._line(p, parts, pct)
        pace = self._pace(p)
        width = max(10, self.content_size.width)
        bar = stacked_bar(width, parts, max(p.total, p.finished, 1), theme_style(app, "panel"))
        counts.no_wrap, counts.overflow = True, "ellipsis"
        return Group(head, bar, counts, pace)

    def _line(self, p: Progress, parts: list[tuple[int, Style]], pct: float) -> Text:
        """``12/40 30% ███▉░░░ ok 10 error 1 · 0.2 ep/s ETA 2m20s``: the bar gets the
        width the words leave (statuses with no episode are left out here)."""
        app = self.app
        muted = theme_style(app, "foreground-muted")
        head = Text(f"{p.finished}/{p.total}", style=theme_style(app, "foreground", bold=True))
        head.append(f" {pct:.0f}%", style=muted)
        tail = Text()
        for status, count in sorted(p.counts.items(), key=lambda sc: _order(sc[0])):
            if count:
                tail.append(f" {status} ", style=muted)
                tail.append(str(count), style=theme_style(app, STATE_COLOUR.get(status,
                                                                                 "foreground")))
        rate = p.rate
        tail.append(" · — ep/s" if rate is None else
                    f" · {rate:.1f} ep/s" if rate >= 0.1 else f" · {rate * 60:.1f} ep/min")
        if p.running:
            tail.append(f" ETA {duration(p.eta_sec)}", style=theme_style(app, "accent"))
        width = max(4, min(40, self.content_size.width - len(head) - len(tail) - 2))
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append_text(head)
        line.append(" ")
        line.append_text(stacked_bar(width, parts, max(p.total, p.finished, 1),
                                     theme_style(app, "panel")))
        line.append_text(tail)
        return line

    def _pace(self, p: Progress) -> Text:
        """``12.5 ep/s  elapsed 1m00s  ETA 2m20s``."""
        app = self.app
        rate = p.rate
        if rate is None:
            pace = Text("— ep/s")
        else:  # slow runs (big episodes) read better per minute
            pace = Text(f"{rate:.1f} ep/s" if rate >= 0.1 else f"{rate * 60:.1f} ep/min")
        pace.append(f"  elapsed {duration(p.elapsed_sec)}",
                    style=theme_style(app, "foreground-muted"))
        if p.running:
            pace.append(f"  ETA {duration(p.eta_sec)}", style=theme_style(app, "accent"))
        if p.disk_note:  # on the same line: the widget stays four lines high
            pace.append(f"  {p.disk_note}", style=theme_style(app, "error" if p.running
                                                             else "foreground-muted"))
            pace.no_wrap, pace.overflow = True, "ellipsis"
        if p.replica_note:  # the same line again: the run goes on with fewer replicas
            pace.append(f"  {p.replica_note}", style=theme_style(app, "warning"))
            pace.no_wrap, pace.overflow = True, "ellipsis"
        if p.server_note:
            pace.append(f"  {p.server_note}", style=theme_style(app, "foreground-muted"))
            pace.no_wrap, pace.overflow = True, "ellipsis"
        return pace
