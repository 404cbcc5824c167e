"""The sets the queue screen groups: set.json files, their members' states live from the
queue's runs (no Textual here; the widget reads this in a thread worker).

A member's state is its run's as the last queue poll saw it (the scheduler's word),
else set.json's (a member without a run is ``pending``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltui.contract.setspec import is_set_name, member_label
from evaltui.sets.setdir import SetDirError, read_set, sets_root

ORDER = ("done", "running", "starting", "queued", "pending", "failed", "aborted",
         "cancelled")


@dataclass(frozen=True)
class SetMemberLine:
    """One member as the queue screen's set group lists it."""

    key: str
    axes: dict[str, Any]
    state: str
    run_id: str | None = None
    run_dir: Path | None = None
    episodes_finished: int = 0
    episodes_total: int = 0
    success: float | None = None

    @property
    def label(self) -> str:
        """Its axis values; a checkpoint named by its step alone (the file is long)."""
        return member_label(self.axes, step_names_checkpoint="step" in self.axes)


@dataclass(frozen=True)
class SetGroup:
    """One set: its members and how far it got."""

    set_id: str
    path: Path
    members: tuple[SetMemberLine, ...] = field(default_factory=tuple)

    @property
    def counts(self) -> Counter[str]:
        return Counter(m.state for m in self.members)

    @property
    def done(self) -> int:
        return self.counts["done"]

    @property
    def finished(self) -> bool:
        return all(m.state in ("done", "failed", "aborted", "cancelled") for m in self.members)

    def progress_text(self) -> str:
        counts = self.counts
        shown = ", ".join(f"{counts[s]} {s}" for s in ORDER if counts[s] and s != "done")
        return f"{self.done}/{len(self.members)} done" + (f" · {shown}" if shown else "")


def read_set_groups(outputs: str | os.PathLike[str] | None, runs: Iterable[Any]
                    ) -> list[SetGroup]:
    """Every readable set under ``outputs``, its members' states from ``runs`` (the queue
    screen's RunInfo rows) where they have one."""
    by_id = {r.run_id: r for r in runs}
    root = sets_root(outputs)
    groups = []
    for child in sorted(root.iterdir()) if root.is_dir() else ():
        if not is_set_name(child.name):
            continue
        try:
            record = read_set(child)
        except SetDirError:
            continue
        members = []
        for m in record.members:
            run = by_id.get(m.run_id) if m.run_id else None
            if run is None:
                members.append(SetMemberLine(m.key, m.axes, m.state.value, m.run_id,
                                             Path(m.run_dir) if m.run_dir else None))
                continue
            members.append(SetMemberLine(
                m.key, m.axes, run.state.value, m.run_id, run.run_dir,
                run.episodes_finished, run.episodes_total, run.metrics.get("success")))
        groups.append(SetGroup(child.name, child, tuple(members)))
    return groups
