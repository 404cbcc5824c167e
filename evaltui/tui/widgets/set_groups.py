"""SetGroups: the queue screen's experiment sets, one collapsible group per set.

A group's line is the set's progress (a bar, ``3/8 done · 2 running · 3 queued``); its
children are the members (state, axis values, episodes, success). Space folds a group;
enter on a set opens its set screen, on a member its run screen. The groups are read
in a thread worker after every queue poll (:mod:`evaltui.tui.setsnapshot`) and the
tree is rebuilt only when the sets or their members change, so the cursor and what is
folded stay put between polls.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.markup import escape
from textual import events, work
from textual.binding import Binding, BindingType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from evaltui.rundir.layout import outputs_root
from evaltui.tui.backend import readable_dir
from evaltui.tui.setsnapshot import SetGroup, SetMemberLine, read_set_groups

BAR_WIDTH = 10
_COLOUR = {"done": "success", "failed": "error", "aborted": "error", "cancelled": "warning",
           "running": "accent", "starting": "accent", "queued": "primary",
           "pending": "foreground-muted"}
"""A state's theme variable (Tree labels are Rich markup: the colour is looked up)."""


def progress_bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = round(width * done / total) if total else 0
    return "█" * filled + "░" * (width - filled)


def group_label(group: SetGroup) -> str:
    return (f"[b]{escape(group.set_id)}[/b]  {progress_bar(group.done, len(group.members))}"
            f"  {escape(group.progress_text())}")


def member_label(m: SetMemberLine, colours: dict[str, str]) -> str:
    colour = colours.get(_COLOUR.get(m.state, "foreground"), "")
    state = f"[{colour}]{m.state:<9}[/]" if colour else f"{m.state:<9}"
    parts = [state, escape(m.label)]
    if m.episodes_total:
        parts.append(f"{m.episodes_finished}/{m.episodes_total}")
    if m.success is not None:
        parts.append(f"SR {m.success:.3f}")
    if m.run_id:
        parts.append(f"[dim]{m.run_id}[/dim]")
    return "  ".join(parts)


def sets_outputs(backend: Any) -> Path:
    """Where the backend's sets are: its scheduler's outputs root when it is in this
    process, else this machine's outputs root (an attached backend on this machine)."""
    scheduler = getattr(backend, "scheduler", None)
    outputs = getattr(scheduler, "outputs", None)
    return Path(outputs) if outputs is not None else outputs_root(None)


class SetGroups(Tree[Any]):
    """The sets under the outputs root, as collapsible groups of members."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # Tree's own enter and space are hidden from the footer: a focused tree showed
        # the runs table's keys, and nothing said how to open or fold a set.
        Binding("enter", "select_cursor", "Open"),
        Binding("space", "toggle_node", "Fold"),
    ]

    DEFAULT_CSS: ClassVar[str] = """
    SetGroups {
        height: auto;
        max-height: 30%;
        overflow-x: hidden;
        padding: 0 1;
        background: $surface;
    }
    """

    def __init__(self, outputs: str | os.PathLike[str] | None, **kwargs: Any) -> None:
        super().__init__("sets", **kwargs)
        self.outputs = outputs
        self.show_root = False
        self.auto_expand = False
        self.groups: list[SetGroup] = []
        self._shape: tuple = ()
        # Hidden and unfocusable until there is a set: the screen's first focus (which
        # does not skip a hidden widget) stays on the runs table.
        self.display = False
        self.can_focus = False

    @work(thread=True, exclusive=True, group="set-groups", exit_on_error=False)
    def update_from(self, runs: Sequence[Any]) -> None:
        """Read the sets again (thread), members' states from the queue's ``runs``."""
        groups = read_set_groups(self.outputs, runs)
        self.app.call_from_thread(self.show_groups, groups)

    def show_groups(self, groups: list[SetGroup]) -> None:
        """Show ``groups``: labels in place when only states changed, else a rebuild
        that keeps the folded groups folded."""
        self.groups = groups
        self.display = self.can_focus = bool(groups)
        # Laid out again once its lines exist: a tree shown in the same pass as its first
        # nodes could keep the height of its empty self (0 rows) until the next rebuild.
        self.call_after_refresh(self.refresh, layout=True)
        colours = self.app.get_css_variables()
        shape = tuple((g.set_id, tuple(m.key for m in g.members)) for g in groups)
        if shape == self._shape:
            for node, group in zip(self.root.children, groups, strict=True):
                node.data = group
                node.set_label(group_label(group))
                for leaf, member in zip(node.children, group.members, strict=True):
                    leaf.data = member
                    leaf.set_label(member_label(member, colours))
            return
        expanded = {n.data.set_id for n in self.root.children if n.is_expanded}
        at = self.selected()
        first = not self._shape
        self._shape = shape
        self.clear()
        for group in groups:
            # At first sight a set still running shows its members; a finished one folds.
            node = self.root.add(group_label(group), data=group,
                                 expand=group.set_id in expanded
                                 or (first and not group.finished))
            for member in group.members:
                node.add_leaf(member_label(member, colours), data=member)
        self._restore_cursor(at)

    def _restore_cursor(self, at: SetGroup | SetMemberLine | None) -> None:
        """The cursor back on the set or member it was on (a rebuild clears it), else on
        the first line when the tree has the focus."""
        def same(data: Any) -> bool:
            if isinstance(at, SetGroup) and isinstance(data, SetGroup):
                return data.set_id == at.set_id
            return (isinstance(at, SetMemberLine) and isinstance(data, SetMemberLine)
                    and data.key == at.key and data.run_id == at.run_id)

        nodes = [n for g in self.root.children for n in (g, *g.children)]
        hit = next((n for n in nodes if at is not None and same(n.data)), None)
        if hit is not None:
            self.call_after_refresh(self.move_cursor, hit)
        elif self.has_focus:
            self.call_after_refresh(self._cursor_on_first)

    def _cursor_on_first(self) -> None:
        if self.cursor_line < 0 and self.root.children:
            self.cursor_line = 0

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        # Tree starts with no cursor line: the first enter after tabbing here did nothing.
        self._cursor_on_first()

    def on_tree_node_selected(self, event: Tree.NodeSelected[Any]) -> None:
        """Enter: a set opens its set screen, a member its run screen."""
        event.stop()
        data = event.node.data
        if isinstance(data, SetGroup):
            self.app.open_set(data.path)  # type: ignore[attr-defined]
        elif isinstance(data, SetMemberLine):
            if data.run_dir is None or not readable_dir(data.run_dir):
                self.notify(f"{data.label}: no readable run dir yet ({data.state})",
                            severity="warning", timeout=4)
                return
            self.app.open_run(data.run_dir, data.episodes_total or None)  # type: ignore[attr-defined]

    def selected(self) -> SetGroup | SetMemberLine | None:
        node: TreeNode[Any] | None = self.cursor_node
        return node.data if node is not None else None
