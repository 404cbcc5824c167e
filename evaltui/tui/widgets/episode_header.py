"""EpisodeHeader: what an episode was and how it ended, from its episode.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.widgets import Static

from evaltui.tui.display import STATE_COLOUR, duration, first_line, metric
from evaltui.tui.widgets.bars import theme_style


class EpisodeHeader(Static):
    """Two lines (three with an error): id, status, metrics, instruction; then provenance.

    Lines are cut with an ellipsis rather than wrapped, so the header's height does not
    depend on the terminal's width."""

    DEFAULT_CSS = """
    EpisodeHeader {
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def show(self, ep: dict[str, Any], error: str | None, ep_dir: Path) -> None:
        app = self.app
        muted = theme_style(app, "foreground-muted")
        line1 = Text()
        line1.append(ep_dir.name, style=theme_style(app, "primary", bold=True))
        if not ep:  # no usable episode.json: still running, or damaged
            line1.append(f"  {error}", style=theme_style(app, "warning"))
            self.update(Text("\n").join([line1, Text(str(ep_dir), style=muted)]))
            return
        status = str(ep.get("status") or "?")
        line1.append(f"  {ep.get('episode_id', '')}", style=theme_style(app, "foreground",
                                                                          bold=True))
        line1.append(f"  {status}", style=theme_style(app, STATE_COLOUR.get(status,
                                                                             "foreground"),
                                                      bold=True))
        m = ep.get("metrics") or {}
        line1.append(f"  SR {metric(m.get('success'), 0)}  SPL {metric(m.get('spl'), 2)}"
                     f"  nDTW {metric(m.get('ndtw'), 2)}  {ep.get('step_count', '?')} steps"
                     f"  {duration(ep.get('elapsed_sec'))}")
        line1.append(f"  “{ep.get('instruction', '')}”", style=theme_style(app, "accent"))
        lines = [line1, Text(
            f"run {ep.get('run_id', '?')} · {ep.get('graph_name', '?')} · "
            f"{ep.get('dataset', '?')}/{ep.get('split', '?')} · worker "
            f"{ep.get('worker_id', '?')} · attempt {ep.get('attempts', '?')} · "
            f"{ep.get('scene_id', '')}", style=muted)]
        if ep.get("error"):
            lines.append(Text(first_line(ep.get("error"), 200), style=theme_style(app, "error")))
        self.update(Text("\n").join(lines))
