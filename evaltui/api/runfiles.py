"""Reading a run dir for the API: episode rows, one episode, pages of its log, the spec.

Paths are built only from a validated run id (``rundir.is_run_id``: digits and
underscores) and an integer episode index, and every file is opened through
:mod:`evaltui.rundir.safeopen` under the runs root: a symlink that leads out of it (the run dir
itself, a file at its top level, an ep dir, episode.json, log.jsonl) is never followed.
A run with such a symlink at its top level is refused as a whole (the scheduler's own
status read follows scheduler.json and summary.json), an episode with one is refused
alone; either is a 404 for the client and a warning in the log (DESIGN §11).

Episode rows come from summary.json (rewritten about once a second while the run runs)
plus the episode.json of episodes finished since: listing ``episodes/`` is one
``scandir``, and only the newer episodes' files are read. An episode.json that exists
but cannot be parsed is an ``unreadable`` row, never a missing one.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from evaltui.contract.records import (
    EPISODE_FILENAME,
    EPISODES_DIRNAME,
    LOG_FILENAME,
    SPEC_FILENAME,
    SUMMARY_FILENAME,
)
from evaltui.results.runrows import UNREADABLE, unreadable_row
from evaltui.rundir.layout import episode_index_from_dirname, is_run_id
from evaltui.rundir.logread import iter_log
from evaltui.rundir.logtail import torn_tail
from evaltui.rundir.runguard import leaving
from evaltui.rundir.safeopen import (
    LeavesRoot,
    Root,
    kind_inside,
    list_dir_inside,
    object_inside_or_none,
    open_file_fd,
    read_json_inside,
)

log = logging.getLogger(__name__)



class NotFoundError(LookupError):
    """No such run, episode or file (the message says which)."""


class BadOffset(ValueError):
    """A log offset that is not at the start of a line."""


def run_refusal(root: str | os.PathLike[str], run_id: str) -> str | None:
    """Why run ``run_id`` under ``root`` may not be served (a symlink out of the root at
    the run dir or its top level: :mod:`evaltui.rundir.runguard`), or None. Logs a warning when
    it refuses."""
    exc = leaving(root, run_id)
    if exc is None:
        return None
    log.warning("not serving run %s: %s", run_id, exc)
    return f"{exc.rel} is a symlink out of the outputs root"


class RunFiles:
    """File reads under one runs root (``outputs/eval_runs``)."""

    def __init__(self, runs_root: Path) -> None:
        self.runs_root = Path(runs_root)
        self.root = Root.of(self.runs_root)
        self._specs: dict[str, dict[str, Any]] = {}
        self._specs_lock = threading.Lock()

    def run_dir(self, run_id: str) -> Path:
        """The run's directory; NotFoundError for anything that is not one (or is not
        served: a symlink out of the root)."""
        if not is_run_id(run_id):
            raise NotFoundError(f"no run {run_id!r}")
        if run_refusal(self.root, run_id) is not None:
            raise NotFoundError(f"run {run_id} is not served: a symlink out of the outputs "
                                "root")
        try:
            kind = kind_inside(self.root, run_id)
        except OSError:
            kind = None
        if kind != "dir":
            raise NotFoundError(f"no run {run_id!r}")
        return self.runs_root / run_id

    def spec(self, run_id: str) -> dict[str, Any] | None:
        """The run's spec.json (its eval fields never change, so it is read once)."""
        with self._specs_lock:
            cached = self._specs.get(run_id)
        if cached is not None:
            return cached
        try:
            self.run_dir(run_id)
            data = read_json_inside(self.root, f"{run_id}/{SPEC_FILENAME}")
        except (OSError, ValueError, NotFoundError):
            return None
        if not isinstance(data, dict):
            return None
        with self._specs_lock:
            self._specs[run_id] = data
        return data

    def episodes(self, run_id: str) -> list[dict[str, Any]]:
        """Every finished episode's row, in episode order (``unreadable`` rows included).

        A summary row is served only while its episode.json (the episode's own record)
        can be used: a damaged one makes the row ``unreadable``, as the single-episode
        route says."""
        self.run_dir(run_id)
        rows: dict[int, dict[str, Any]] = {}
        summary = object_inside_or_none(self.root, f"{run_id}/{SUMMARY_FILENAME}")
        if summary is not None:
            for row in summary.get("episodes") or ():
                if isinstance(row, dict) and _index(row) is not None:
                    rows[_index(row)] = row  # type: ignore[index]
        try:
            names = list_dir_inside(self.root, f"{run_id}/{EPISODES_DIRNAME}")
        except OSError:
            names = []
        for name in names:
            index = episode_index_from_dirname(name)
            if index is None:
                continue
            row = self._row(run_id, index)
            if row is not None and (index not in rows or row.get("status") == UNREADABLE):
                rows[index] = row
        return [rows[i] for i in sorted(rows)]

    def episode(self, run_id: str, index: int) -> dict[str, Any]:
        """One episode's episode.json (an ``unreadable`` row if it cannot be parsed)."""
        self.run_dir(run_id)
        self._ep_dir(run_id, index)
        row = self._row(run_id, index, refuse=True)
        if row is None:
            raise NotFoundError(f"episode {index} of run {run_id} has not finished "
                                "(no episode.json yet)")
        return row

    def log_page(self, run_id: str, index: int, offset: int, limit: int
                 ) -> tuple[list[tuple[int, dict[str, Any]]], int, bool]:
        """Up to ``limit`` complete records from byte ``offset``: (records, next offset,
        whether the page reaches the end of what is written). Once the episode has ended
        (episode.json exists), a last line without its newline ends the page as one
        ``torn`` record at ``next_offset``."""
        self.run_dir(run_id)
        ep = self._ep_dir(run_id, index)
        try:
            fd = open_file_fd(self.root, f"{ep}/{LOG_FILENAME}")
        except LeavesRoot as exc:
            log.warning("not serving the log of episode %d of run %s: %s", index, run_id, exc)
            raise NotFoundError(f"episode {index} of run {run_id}: log.jsonl is a symlink out "
                                "of the outputs root") from None
        except OSError:
            raise NotFoundError(f"episode {index} of run {run_id} has no log") from None
        with os.fdopen(fd, "rb") as f:
            if offset > 0 and not _at_line_start(f.fileno(), offset):
                raise BadOffset(f"offset {offset} is not at the start of a line (use 0 or a "
                                "next_offset)")
            records: list[tuple[int, dict[str, Any]]] = []
            gen = iter_log(f, offset)
            while True:
                try:
                    item = next(gen)
                except StopIteration as stop:
                    end = int(stop.value)
                    break
                if len(records) == limit:
                    gen.close()
                    return records, item[0], False
                records.append(item)
            if self._finished(ep):
                torn = torn_tail(f.fileno(), end)
                if torn is not None:
                    records.append((end, torn))
        return records, end, True

    # --- helpers -------------------------------------------------------------------------

    def _ep_dir(self, run_id: str, index: int) -> str:
        """``{run_id}/episodes/epNNNN`` if it is a dir inside the root; NotFoundError if not."""
        if index < 0:
            raise NotFoundError(f"run {run_id} has no episode {index}")
        rel = f"{run_id}/{EPISODES_DIRNAME}/ep{index:04d}"
        try:
            kind = kind_inside(self.root, rel)
        except LeavesRoot as exc:
            log.warning("not serving episode %d of run %s: %s", index, run_id, exc)
            raise NotFoundError(f"episode {index} of run {run_id} is a symlink out of the "
                                "outputs root") from None
        except OSError:
            kind = None
        if kind != "dir":
            raise NotFoundError(f"run {run_id} has no episode {index}")
        return rel

    def _finished(self, ep: str) -> bool:
        try:
            return kind_inside(self.root, f"{ep}/{EPISODE_FILENAME}") is not None
        except OSError:
            return True  # there, though unusable: the episode is over all the same

    def _row(self, run_id: str, index: int, *, refuse: bool = False) -> dict[str, Any] | None:
        """episode.json of an episode; None if it is not written yet; an ``unreadable`` row
        if it cannot be used (with ``refuse``, NotFoundError if it leaves the root)."""
        rel = f"{run_id}/{EPISODES_DIRNAME}/ep{index:04d}/{EPISODE_FILENAME}"
        try:
            row = read_json_inside(self.root, rel)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except LeavesRoot as exc:
            log.warning("not serving episode %d of run %s: %s", index, run_id, exc)
            if refuse:
                raise NotFoundError(f"episode {index} of run {run_id}: episode.json is a "
                                    "symlink out of the outputs root") from None
            return unreadable_row(index, "episode.json is a symlink out of the outputs root; "
                                  "not read")
        except (OSError, ValueError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return unreadable_row(index, f"episode.json is unreadable: {first}")
        if not isinstance(row, dict) or _index(row) != index:
            return unreadable_row(index, "episode.json is not this episode's row")
        return row


def _index(row: dict[str, Any]) -> int | None:
    value = row.get("episode_index")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _at_line_start(fd: int, offset: int) -> bool:
    """True if ``offset`` is at or past the end, or right after a newline."""
    size = os.fstat(fd).st_size
    if offset >= size:
        return offset == size
    return os.pread(fd, 1, offset - 1) == b"\n"
