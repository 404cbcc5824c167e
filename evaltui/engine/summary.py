"""SummaryWriter: the run's summary.json, rewritten at most about once a second.

Episode rows arrive as episodes finish; the writer keeps them in memory and rewrites
summary.json from a background thread when something changed and a second has passed,
so 5,000 episodes cost at most one rewrite a second, not one per episode.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from evaltui.engine.metrics import aggregate
from evaltui.rundir import sync_files, write_json_atomic
from evaltui.states import SummaryStatus


def now_iso() -> str:
    return datetime.now().astimezone().isoformat(timespec="milliseconds")


class SummaryWriter:
    """Owns summary.json of one run; ``start``/``close`` bound its flusher thread."""

    def __init__(self, run_dir: Path, header: Mapping[str, Any], episodes_total: int,
                 interval_sec: float = 1.0) -> None:
        self.path = run_dir / "summary.json"
        self.header = dict(header)
        self.episodes_total = episodes_total
        self.interval_sec = interval_sec
        self.status = SummaryStatus.RUNNING
        self.error: str | None = None
        self.started_at = now_iso()
        self.finished_at: str | None = None
        self._t0 = time.monotonic()
        self._rows: dict[int, dict[str, Any]] = {}
        self._unsynced: list[Path] = []
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._flush_loop, name="summary-writer",
                                        daemon=True)

    def start(self) -> SummaryWriter:
        self.write()
        self._thread.start()
        return self

    def add(self, row: Mapping[str, Any], unsynced: Path | None = None) -> None:
        """A finished episode's row; ``unsynced``: its episode.json, written without fsync.

        Such files are fsynced together just before the next summary.json write, so a run
        pays about one journal commit a second instead of one per episode, and
        summary.json never lists a row whose episode.json a power cut could still lose.
        """
        with self._lock:
            self._rows[int(row["episode_index"])] = dict(row)
            if unsynced is not None:
                self._unsynced.append(unsynced)
        self._dirty.set()

    def preload(self, rows: list[Mapping[str, Any]]) -> None:
        """Rows kept from an earlier attempt at this run (resume)."""
        with self._lock:
            for row in rows:
                self._rows[int(row["episode_index"])] = dict(row)

    def finish(self, status: SummaryStatus, error: str | None = None) -> None:
        """Stop the flusher and write the final summary (before ``_DONE`` is touched)."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join()
        self.status, self.error = status, error
        self.finished_at = now_iso()
        self.write()

    def snapshot(self, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        if rows is None:
            with self._lock:
                rows = [self._rows[i] for i in sorted(self._rows)]
        means, ci95 = aggregate(rows)
        return {
            **self.header,
            "status": self.status.value,
            "error": self.error,
            "episodes_total": self.episodes_total,
            "episodes_finished": len(rows),
            "counts_by_status": dict(Counter(r["status"] for r in rows)),
            "metrics": means,
            "metrics_ci95": ci95,
            "started_at": self.started_at,
            "updated_at": now_iso(),
            "finished_at": self.finished_at,
            "elapsed_sec": round(time.monotonic() - self._t0, 3),
            "episodes": rows,
        }

    def write(self) -> None:
        self._dirty.clear()
        with self._lock:
            unsynced, self._unsynced = self._unsynced, []
            rows = [self._rows[i] for i in sorted(self._rows)]
        sync_files(unsynced)  # every row listed below is durable before the summary is
        write_json_atomic(self.path, self.snapshot(rows))

    def _flush_loop(self) -> None:
        last = time.monotonic()
        while not self._closed.is_set():
            if not self._dirty.wait(timeout=0.2):
                continue
            wait = self.interval_sec - (time.monotonic() - last)
            if wait > 0 and self._closed.wait(wait):
                return
            self.write()
            last = time.monotonic()
