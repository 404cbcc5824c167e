"""RunWatcher: a thread that keeps a RunModel in step with one run dir.

It reads the run dir once, then follows it with ``watchfiles`` (inotify on Linux): an
``episode.json`` written means one small file read, a change of summary.json,
scheduler.json or ``_DONE`` means one status read. There is never a re-scan per change.
Rows the events missed (written before a new dir was watched) are filled from
summary.json's own rows, which the run rewrites about once a second.

Like toolong's watcher it owns no UI: it reports through the ``on_change`` callback,
and ``close()`` stops and joins it. If the OS refuses a watch (inotify limits), it
falls back to polling the run dir every ``poll_interval`` seconds; it polls from the
start where inotify cannot see the writes (a network filesystem, ``EVALTUI_POLL_FILES``:
:mod:`evaltui.rundir.pollfiles`).

Files are opened without following a symlink out of the dir holding the run dir (the
outputs root's ``eval_runs``; :mod:`evaltui.rundir.safeopen`): a run dir with one at its top
level is not read at all, an episode.json with one is an ``unreadable`` row. A torn
summary.json is rebuilt from the episode files (:mod:`evaltui.results.rebuild`) and
the model says so.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
import watchfiles

from evaltui.contract.records import (
    DONE_FILENAME,
    EPISODE_FILENAME,
    EPISODES_DIRNAME,
    SCHEDULER_FILENAME,
    SUMMARY_FILENAME,
)
from evaltui.results.rebuild import rebuild_summary
from evaltui.results.runrows import unreadable_row
from evaltui.rundir.layout import episode_index_from_dirname
from evaltui.rundir.pollfiles import should_poll
from evaltui.rundir.runguard import leaving
from evaltui.rundir.safeopen import LeavesRoot, Root, kind_inside, list_dir_inside, read_json_inside
from evaltui.rundir.status import read_run_status
from evaltui.runview.runmodel import RunModel
from evaltui.slurm.follow import follow_status

log = logging.getLogger(__name__)

_STATUS_FILES = frozenset({SUMMARY_FILENAME, SCHEDULER_FILENAME, DONE_FILENAME})
LEAVES = "unreadable (symlink leaves the run dir)"


def read_episode_file(path: Path, root: str | os.PathLike[str] | None = None
                      ) -> tuple[dict[str, Any] | None, str | None]:
    """An episode.json as ``(row, None)``, or ``(None, why)`` if it cannot be used; opened
    without following a symlink out of ``root`` (default: its ep dir's run dir)."""
    name = f"{path.parent.name}/{path.name}"
    try:
        # Absolute: a relative ``path`` would be read as relative to the root.
        row = read_json_inside(root if root is not None else path.parents[2], path.absolute())
    except (FileNotFoundError, NotADirectoryError):
        return None, None  # replaced or removed in between: a later event says more
    except LeavesRoot:
        return None, f"{name}: {LEAVES}"
    except (OSError, orjson.JSONDecodeError) as exc:
        return None, f"{name} is unreadable: {exc}"
    if not isinstance(row, dict) or not isinstance(row.get("episode_index"), int):
        return None, f"{name} is not an episode row"
    return row, None


class RunWatcher(threading.Thread):
    """Follows one run dir into a :class:`RunModel`; ``on_change`` runs in this thread."""

    def __init__(self, run_dir: Path, model: RunModel, on_change: Callable[[], None], *,
                 debounce_ms: int = 200, poll_interval: float = 0.5,
                 force_polling: bool | None = None) -> None:
        super().__init__(name=f"run-watcher-{Path(run_dir).name}", daemon=True)
        self.run_dir = Path(run_dir).resolve()  # events carry absolute paths
        # The trusted root is the dir holding the run dir (as given, before resolving): a
        # run dir that is a symlink out of it is refused like any file in it.
        self.root = Root.of(Path(run_dir).absolute().parent)
        self.name = Path(run_dir).name
        self.model = model
        self.on_change = on_change
        self.debounce_ms = debounce_ms
        self.poll_interval = poll_interval
        # None: poll where inotify cannot see other nodes' writes (EVALTUI_POLL_FILES)
        self.force_polling = should_poll(self.run_dir) if force_polling is None \
            else force_polling
        self._exit = threading.Event()

    def close(self) -> None:
        """Stop watching and wait for the thread to end."""
        self._exit.set()
        if self.is_alive():
            self.join(timeout=5)

    # --- thread --------------------------------------------------------------------------

    def run(self) -> None:
        self._read_status()
        self._read_missing_episodes()
        self.on_change()
        if not self.force_polling:
            try:
                self._watch()
                return
            except Exception as exc:  # e.g. "OS file watch limit reached"
                log.warning("watching %s failed (%s); polling instead", self.run_dir, exc)
        self._poll()

    def _watch(self) -> None:
        caught_up = False
        for changes in watchfiles.watch(
            self.run_dir, watch_filter=self._wanted, debounce=self.debounce_ms, step=50,
            stop_event=self._exit, rust_timeout=500, yield_on_timeout=True,
            raise_interrupt=False,
        ):
            if not caught_up:
                # The watch is in place now: pick up what was written while it was set up.
                caught_up = True
                self._read_missing_episodes()
                self.on_change()
            if changes:
                self._apply(path for _, path in changes)

    def _poll(self) -> None:
        stamps: dict[str, int] = {}
        while not self._exit.wait(self.poll_interval):
            status_changed = False
            for name in _STATUS_FILES:
                try:
                    stamp = (self.run_dir / name).stat().st_mtime_ns
                except FileNotFoundError:
                    stamp = -1
                if stamps.get(name) != stamp:
                    stamps[name], status_changed = stamp, True
            if status_changed:
                self._read_status()
            if self._read_missing_episodes() or status_changed:
                self.on_change()

    # --- reading -------------------------------------------------------------------------

    def _wanted(self, change: watchfiles.Change, path: str) -> bool:
        name = os.path.basename(path)
        parent = os.path.dirname(path)
        if name in _STATUS_FILES:
            return parent == str(self.run_dir)
        if os.path.basename(parent) == EPISODES_DIRNAME:
            return change == watchfiles.Change.added and name.startswith("ep")
        return name == EPISODE_FILENAME and change != watchfiles.Change.deleted

    def _apply(self, paths: Iterable[str]) -> None:
        episode_files: set[Path] = set()
        status_changed = False
        for raw in paths:
            path = Path(raw)
            if path.name in _STATUS_FILES and path.parent == self.run_dir:
                status_changed = True
            elif path.name == EPISODE_FILENAME:
                episode_files.add(path)
            else:  # a new ep dir: its episode.json may predate the dir's own watch
                candidate = path / EPISODE_FILENAME
                if self._present(f"{EPISODES_DIRNAME}/{path.name}/{EPISODE_FILENAME}"):
                    episode_files.add(candidate)
        changed = self._read_episodes(sorted(episode_files))
        if status_changed:
            self._read_status()
        if changed or status_changed:
            self.on_change()

    def _read_episodes(self, paths: list[Path]) -> int:
        """Read episode files into the model; returns how many rows or badges changed."""
        rows = []
        badges = 0
        for path in paths:
            index = episode_index_from_dirname(path.parent.name)
            if index is None or path.parent.parent.name != EPISODES_DIRNAME:
                continue
            rel = f"{self.name}/{EPISODES_DIRNAME}/{path.parent.name}/{EPISODE_FILENAME}"
            row, error = read_episode_file(self.root / Path(rel), self.root)
            key = f"{path.parent.name}/{EPISODE_FILENAME}"
            if row is not None:
                rows.append(row)
                badges += self.model.note_error(key, None)  # a rewrite may repair it
            elif error is not None:
                badges += self.model.note_error(key, error)
                if not self.model.known(index, usable=True):
                    # "unreadable", never "not finished"; a good row (summary's) stays
                    rows.append(unreadable_row(index, error))
        return self.model.upsert_rows(rows) + badges

    def _read_status(self) -> None:
        refused = leaving(self.root, self.name)
        if refused is not None:
            self.model.note_error("run", f"{refused.rel}: {LEAVES}; not read")
            return
        self.model.note_error("run", None)
        status = follow_status(self.run_dir, read_run_status(self.run_dir))  # Slurm's too
        if status.summary_unreadable:
            rebuilt = rebuild_summary(self.run_dir, status.state, status.error)
            status = dataclasses.replace(status, summary=rebuilt)
            self.model.note_error("summary", "summary.json is unreadable: rows and metrics "
                                  "rebuilt from the episode files")
        else:
            self.model.note_error("summary", None)
        self.model.set_status(status)
        rows = (status.summary or {}).get("episodes")
        if isinstance(rows, list):
            # Rows the events missed; an episode.json already read is as new or newer.
            self.model.upsert_rows([r for r in rows if isinstance(r, dict)], only_new=True)

    def _read_missing_episodes(self) -> int:
        """Read the episode.json of every ep dir not in the model yet (one listdir)."""
        if leaving(self.root, self.name) is not None:
            return 0  # _read_status says why
        try:
            names = list_dir_inside(self.root, f"{self.name}/{EPISODES_DIRNAME}")
        except OSError:
            return 0
        paths = []
        for name in names:
            index = episode_index_from_dirname(name)
            if index is None or self.model.known(index):
                continue
            if self._present(f"{EPISODES_DIRNAME}/{name}/{EPISODE_FILENAME}"):
                paths.append(self.run_dir / EPISODES_DIRNAME / name / EPISODE_FILENAME)
        return self._read_episodes(sorted(paths))

    def _present(self, rel: str) -> bool:
        """``rel`` (under the run dir) exists; a symlink out of the root counts (it is then
        read as unreadable rather than taken for an episode not finished)."""
        try:
            return kind_inside(self.root, f"{self.name}/{rel}") is not None
        except LeavesRoot:
            return True
        except OSError:
            return False
