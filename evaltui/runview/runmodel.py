"""RunModel: what is known of one run dir, filled by a watcher thread, drained by a UI.

The watcher thread writes (``upsert_rows``, ``set_status``, ``note_error``); the UI
takes what changed since its last look with ``take_changes``. Bursts of episode files
thus cost the UI one update, however many files arrived in between.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from evaltui.results.runrows import UNREADABLE
from evaltui.rundir.status import RunStatus


@dataclass
class RunChanges:
    """What changed in a run since the last :meth:`RunModel.take_changes`."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    """Episode rows added or rewritten, in episode order."""
    status: RunStatus | None = None
    """The run's new status read, if summary.json, scheduler.json or _DONE changed."""
    errors: dict[str, str] = field(default_factory=dict)
    """Every file of the run that could not be read, by name (the whole current set)."""

    def __bool__(self) -> bool:
        return bool(self.rows) or self.status is not None


class RunModel:
    """Thread-safe store of one run's episode rows, status and unreadable files."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[int, dict[str, Any]] = {}
        self._pending: set[int] = set()
        self._status: RunStatus | None = None
        self._status_pending = False
        self._errors: dict[str, str] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)

    def known(self, index: int, *, usable: bool = False) -> bool:
        """True if episode ``index`` has a row (with ``usable``: one that is not a stand-in
        for an unreadable episode.json)."""
        with self._lock:
            row = self._rows.get(index)
        return row is not None and not (usable and row.get("status") == UNREADABLE)

    @property
    def status(self) -> RunStatus | None:
        with self._lock:
            return self._status

    def rows(self) -> list[dict[str, Any]]:
        """All rows, in episode order."""
        with self._lock:
            return [self._rows[i] for i in sorted(self._rows)]

    def upsert_rows(self, rows: list[dict[str, Any]], *, only_new: bool = False) -> int:
        """Add or replace rows by ``episode_index``; with ``only_new`` keep known ones
        (but replace a stand-in for an unreadable episode.json).

        Returns how many rows changed.
        """
        changed = 0
        with self._lock:
            for row in rows:
                index = row.get("episode_index")
                if not isinstance(index, int) or isinstance(index, bool):
                    continue
                if only_new and index in self._rows and \
                        self._rows[index].get("status") != UNREADABLE:
                    continue
                if self._rows.get(index) == row:
                    continue
                self._rows[index] = row
                self._pending.add(index)
                changed += 1
        return changed

    def set_status(self, status: RunStatus) -> None:
        with self._lock:
            self._status = status
            self._status_pending = True
            self._set_error("status", status.error)  # names the file at fault

    def note_error(self, name: str, message: str | None) -> bool:
        """Record (or with None clear) why file ``name`` could not be used; True if new."""
        with self._lock:
            if not self._set_error(name, message):
                return False
            self._status_pending = True  # the badge is part of the status display
            return True

    def _set_error(self, name: str, message: str | None) -> bool:
        if self._errors.get(name) == message:
            return False
        if message:
            self._errors[name] = message
        else:
            self._errors.pop(name, None)
        return True

    def take_changes(self) -> RunChanges:
        """What changed since the last call (and forget it)."""
        with self._lock:
            rows = [self._rows[i] for i in sorted(self._pending)]
            status = self._status if self._status_pending else None
            self._pending.clear()
            self._status_pending = False
            return RunChanges(rows=rows, status=status, errors=dict(self._errors))
