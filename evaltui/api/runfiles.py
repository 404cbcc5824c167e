"""Reading a run dir for the API: episode rows, one episode, pages of its log, the spec.

Paths are built only from a validated run id (``rundir.is_run_id``: digits and
underscores) and an integer episode index, so no request can name a path outside the
outputs root. Symlinks the owner placed under the root (a run dir moved to another
disk and linked back) are followed, as every other reader of run dirs does.

Episode rows come from summary.json (rewritten about once a second while the run runs)
plus the episode.json of episodes finished since: listing ``episodes/`` is one
``scandir``, and only the newer episodes' files are read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from evaltui.rundir import (
    EPISODES_DIRNAME,
    SUMMARY_FILENAME,
    episode_dir,
    episode_index_from_dirname,
    is_run_id,
    iter_log,
    read_json,
)

SPEC_FILENAME = "spec.json"


class NotFoundError(LookupError):
    """No such run, episode or file (the message says which)."""


class BadOffset(ValueError):
    """A log offset that is not at the start of a line."""


class RunFiles:
    """File reads under one runs root (``outputs/eval_runs``)."""

    def __init__(self, runs_root: Path) -> None:
        self.runs_root = Path(runs_root)
        self._specs: dict[str, dict[str, Any]] = {}
        self._specs_lock = threading.Lock()

    def run_dir(self, run_id: str) -> Path:
        """The run's directory; NotFoundError for anything that is not one."""
        if not is_run_id(run_id):
            raise NotFoundError(f"no run {run_id!r}")
        path = self.runs_root / run_id
        if not _exists(path, dir=True):
            raise NotFoundError(f"no run {run_id!r}")
        return path

    def _file(self, path: Path, what: str) -> Path:
        if not _exists(path, dir=False):
            raise NotFoundError(what)
        return path

    def spec(self, run_id: str) -> dict[str, Any] | None:
        """The run's spec.json (its eval fields never change, so it is read once)."""
        with self._specs_lock:
            cached = self._specs.get(run_id)
        if cached is not None:
            return cached
        try:
            data = read_json(self._file(self.run_dir(run_id) / SPEC_FILENAME, "no spec"))
        except (OSError, ValueError, NotFoundError):
            return None
        if not isinstance(data, dict):
            return None
        with self._specs_lock:
            self._specs[run_id] = data
        return data

    def episodes(self, run_id: str) -> list[dict[str, Any]]:
        """Every finished episode's row, in episode order."""
        run_dir = self.run_dir(run_id)
        rows: dict[int, dict[str, Any]] = {}
        try:
            summary = read_json(self._file(run_dir / SUMMARY_FILENAME, "no summary"))
        except (OSError, ValueError, NotFoundError):
            summary = None
        if isinstance(summary, dict):
            for row in summary.get("episodes") or ():
                if isinstance(row, dict) and _index(row) is not None:
                    rows[_index(row)] = row  # type: ignore[index]
        try:
            entries = list(os.scandir(run_dir / EPISODES_DIRNAME))
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        for entry in entries:
            index = episode_index_from_dirname(entry.name)
            if index is None or index in rows:
                continue
            row = self._row(run_dir, index)
            if row is not None:
                rows[index] = row
        return [rows[i] for i in sorted(rows)]

    def episode(self, run_id: str, index: int) -> dict[str, Any]:
        """One episode's episode.json."""
        run_dir = self.run_dir(run_id)
        if not _exists(episode_dir(run_dir, index), dir=True):
            raise NotFoundError(f"run {run_id} has no episode {index}")
        row = self._row(run_dir, index)
        if row is None:
            raise NotFoundError(f"episode {index} of run {run_id} has not finished "
                                "(no episode.json yet)")
        return row

    def log_page(self, run_id: str, index: int, offset: int, limit: int
                 ) -> tuple[list[tuple[int, dict[str, Any]]], int, bool]:
        """Up to ``limit`` complete records from byte ``offset``: (records, next offset,
        whether the page reaches the end of what is written)."""
        run_dir = self.run_dir(run_id)
        path = episode_dir(run_dir, index) / "log.jsonl"
        self._file(path, f"episode {index} of run {run_id} has no log")
        if offset > 0 and not _at_line_start(path, offset):
            raise BadOffset(f"offset {offset} is not at the start of a line (use 0 or a "
                            "next_offset)")
        records: list[tuple[int, dict[str, Any]]] = []
        gen = iter_log(path, offset)
        while True:
            try:
                item = next(gen)
            except StopIteration as stop:
                return records, int(stop.value), True
            if len(records) == limit:
                gen.close()
                return records, item[0], False
            records.append(item)

    def _row(self, run_dir: Path, index: int) -> dict[str, Any] | None:
        path = episode_dir(run_dir, index) / "episode.json"
        try:
            row = read_json(self._file(path, "no episode.json"))
        except (OSError, ValueError, NotFoundError):
            return None
        return row if isinstance(row, dict) else None


def _exists(path: Path, *, dir: bool) -> bool:
    """is_dir / is_file that say False for any error (a name too long, no permission)."""
    try:
        return path.is_dir() if dir else path.is_file()
    except (OSError, ValueError):
        return False


def _index(row: dict[str, Any]) -> int | None:
    value = row.get("episode_index")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _at_line_start(path: Path, offset: int) -> bool:
    """True if ``offset`` is at or past the end, or right after a newline."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if offset >= size:
            return offset == size
        return os.pread(f.fileno(), 1, offset - 1) == b"\n"
