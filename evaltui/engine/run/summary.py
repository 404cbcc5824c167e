"""SummaryWriter: the run's summary.json, rewritten at most about once a second.

Episode rows arrive as episodes finish. Each is appended once to rows.jsonl beside
summary.json (:class:`~evaltui.engine.run.rowspool.RowSpool`) and counted into running
totals (:class:`~evaltui.engine.run.runtotals.RunTotals`); a background thread rewrites
summary.json when something changed and a second has passed, with those aggregates only
(``rows_file`` names where the rows are). So an episode costs the same at 50,000 as at
1: no rewrite of every row each second, no aggregate over every row, and no row held in
memory. The final write streams every row, in episode order, into summary.json
(:class:`evaltui.contract.records.Summary`, computed from the rows as ever) and removes rows.jsonl.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from evaltui.contract.records import ROWS_FILENAME, SUMMARY_FILENAME, EpisodeRow, SummaryHeader
from evaltui.contract.states import EpisodeStatus, SummaryStatus
from evaltui.contract.summarynotes import DiskWaitNote, FirstError, StoppedNote
from evaltui.engine.episode.metrics import Aggregate, aggregate
from evaltui.engine.run.rowspool import RowSpool, summary_chunks
from evaltui.engine.run.runtotals import FAILED, RunTotals
from evaltui.rundir.diskfull import DISK
from evaltui.rundir.jsonfiles import sync_files, write_bytes_atomic, write_json_atomic
from evaltui.rundir.layout import now_iso

SYNC_EVERY_SEC = 0.2
"""How often the flusher fsyncs the episode files that came since (between summary
writes), so that a short run's final write does not fsync every file of its last
second."""


def one_line(error: str | None, limit: int = 300) -> str:
    """The line of an error text a person reads first: a traceback's last line."""
    lines = [ln.strip() for ln in (error or "").strip().splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def first_error(rows: Sequence[Mapping[str, Any]]) -> FirstError | None:
    """The lowest-index failed row (of rows in their JSON form), or None."""
    failed = [r for r in rows if r["status"] in FAILED]
    if not failed:
        return None
    row = min(failed, key=lambda r: int(r["episode_index"]))
    return FirstError(episode_index=row["episode_index"], episode_id=row.get("episode_id"),
                      status=row["status"], message=one_line(row.get("error")))


def row_json(row: EpisodeRow | Mapping[str, Any]) -> dict[str, Any]:
    """An episode row in the JSON form summary.json holds (a mapping is validated first)."""
    if not isinstance(row, EpisodeRow):
        row = EpisodeRow.model_validate(row)
    return row.model_dump(mode="json")


def _pairs(cis: Mapping[str, list[float] | None]) -> dict[str, tuple[float, float] | None]:
    """Confidence intervals as (lo, hi) pairs, the record's type."""
    return {name: (ci[0], ci[1]) if ci is not None else None for name, ci in cis.items()}


def disk_wait_note() -> DiskWaitNote | None:
    """What this process's writes waited for room so far (None if they never did)."""
    if DISK.last_path is None:
        return None
    waiting = DISK.waiting()
    since = None if waiting is None else \
        datetime.fromtimestamp(waiting.since).astimezone().isoformat(timespec="milliseconds")
    return DiskWaitNote(path=waiting.path if waiting else DISK.last_path, waiting_since=since,
                        waited_sec=round(DISK.waited_sec, 3))


class SummaryWriter:
    """Owns summary.json of one run; ``start``/``close`` bound its flusher thread.

    A write that finds the disk full waits for room (:mod:`evaltui.rundir.diskfull`). If the
    flusher's write fails for good (past that wait, or any other error), the writer never
    dies silently: ``failure`` keeps the error and ``on_failure`` is called with it (the
    runner then ends the run ``failed``).
    """

    def __init__(self, run_dir: Path, header: Mapping[str, Any], episodes_total: int,
                 interval_sec: float = 1.0, *, max_error_rate: float = 0.0,
                 on_failure: Callable[[BaseException], None] | None = None) -> None:
        self.path = run_dir / SUMMARY_FILENAME
        self.header = dict(header)
        self.episodes_total = episodes_total
        self.interval_sec = interval_sec
        self.max_error_rate = max_error_rate
        self.status = SummaryStatus.RUNNING
        self.error: str | None = None
        self.started_at = now_iso()
        self.finished_at: str | None = None
        self.check_notes: list[str] | None = None
        """The spec check's notes (CheckedSpec.notes), kept in summary.json."""
        self._t0 = time.monotonic()
        self._spool = RowSpool(run_dir)
        self._spool.open()
        self._totals = RunTotals()
        self.bytes_written = 0
        """summary.json and rows.jsonl bytes this writer has written (the rows once each)."""
        self._unsynced: list[Path] = []
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._flush_loop, name="summary-writer",
                                        daemon=True)
        self.on_failure = on_failure
        self.failure: BaseException | None = None
        self.replicas: Callable[[], dict[str, Any] | None] | None = None
        """What the run's replicated nodesets' replicas are doing (``replicas``), if any."""
        self.stopped: StoppedNote | None = None
        """The stop rule's note once it was met (``stopped``)."""

    def start(self) -> SummaryWriter:
        self.write()
        self._thread.start()
        return self

    def add(self, row: EpisodeRow | Mapping[str, Any], unsynced: Iterable[Path] = ()) -> None:
        """A finished episode's row; ``unsynced``: its files, written without fsync.

        Such files are fsynced in batches by the flusher, every :data:`SYNC_EVERY_SEC`
        while rows come, and in any case before the next write puts their row in
        rows.jsonl: a power cut never loses an episode.json that the run's rows list, and
        the final write (on a run's critical path) has only the last batch left to sync.
        """
        self._keep(row_json(row))
        with self._lock:
            self._unsynced.extend(unsynced)
        self._dirty.set()

    def preload(self, rows: Iterable[EpisodeRow | Mapping[str, Any]]) -> None:
        """Rows kept from an earlier attempt at this run (resume)."""
        for row in rows:
            self._keep(row_json(row))

    def _keep(self, data: dict[str, Any]) -> None:
        line = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
        with self._lock:
            replaced = self._spool.add(int(data["episode_index"]), line)
            if replaced is not None:
                self._totals.remove(orjson.loads(replaced))
            self._totals.add(data)

    def finish(self, status: SummaryStatus, error: str | None = None, *,
               wait_for_room: bool = True) -> None:
        """Stop the flusher and write the final summary (before ``_DONE`` is touched);
        without ``wait_for_room`` a full disk fails the write at once (OSError)."""
        self._closed.set()
        self._dirty.set()  # wakes the flusher now, not at the end of its 0.2 s wait
        if self._thread.is_alive():
            self._thread.join()
        self.status, self.error = status, error
        self.finished_at = now_iso()
        self.write(wait_for_room=wait_for_room)
        self._spool.unlink()  # every row is in summary.json now

    def snapshot(self) -> dict[str, Any]:
        """The running summary.json: the header, from the running totals, and no rows."""
        with self._lock:
            overall = self._totals.aggregate()
            ok_only = self._totals.aggregate(ok_only=True)
            first = self._totals.first_failed(self._spool.rows)
            data = self._header(overall, ok_only, first)
        data["rows_file"] = ROWS_FILENAME
        return data

    def final_snapshot(self) -> dict[str, Any]:
        """The final summary.json's header: the metrics computed from every row (in
        episode order, read back from rows.jsonl), as :func:`metrics.aggregate` does."""
        overall = aggregate(self._spool.rows())
        ok_only = aggregate(self._spool.rows(), ok_only=True)
        with self._lock:
            first = self._totals.first_failed(self._spool.rows)
            return self._header(overall, ok_only, first)

    def _header(self, overall: Aggregate, ok_only: Aggregate,
                first: Mapping[str, Any] | None) -> dict[str, Any]:
        totals = self._totals
        errors, scored = totals.errors, totals.scored
        header = SummaryHeader(
            **self.header, status=self.status, error=self.error,
            episodes_total=self.episodes_total, episodes_finished=totals.finished,
            counts_by_status=dict(totals.counts),
            metrics=overall.means, metrics_ci95=_pairs(overall.ci95), metrics_n=overall.n,
            metrics_ok_only=ok_only.means, metrics_ok_only_ci95=_pairs(ok_only.ci95),
            metrics_ok_only_n=ok_only.n, error_count=errors,
            first_error=first_error([first] if first is not None else []),
            max_error_rate=self.max_error_rate,
            error_rate_exceeded=bool(scored) and errors / scored > self.max_error_rate,
            started_at=self.started_at, updated_at=now_iso(), finished_at=self.finished_at,
            elapsed_sec=round(time.monotonic() - self._t0, 3), disk_wait=disk_wait_note(),
            replicas=self.replicas() if self.replicas is not None else None,
            stopped=self.stopped, check_notes=self.check_notes)
        # summary_unreadable is a reader's note, never written here.
        return header.model_dump(mode="json", exclude={"summary_unreadable"})

    def every_episode_errored(self) -> str | None:
        """The run's error message when every episode it ran ended error/timeout, else None."""
        with self._lock:
            scored = self._totals.scored
            if not scored or self._totals.counts[EpisodeStatus.OK]:
                return None
            failed = self._totals.first_failed(self._spool.rows)
        assert failed is not None  # rows were scored and none was ok
        first = first_error([failed])
        assert first is not None
        return (f"all {scored} episodes failed; first error (episode "
                f"{first.episode_index}, {first.episode_id}): {first.message}")

    def write(self, *, wait_for_room: bool = True) -> None:
        self._dirty.clear()
        with self._lock:
            unsynced, self._unsynced = self._unsynced, []
        final = self.status is not SummaryStatus.RUNNING

        def store() -> None:
            sync_files(unsynced)  # every row listed below is durable before the summary is
            before = self._spool.bytes_written
            self._spool.append()
            self.bytes_written += self._spool.bytes_written - before
            if final:
                chunks = summary_chunks(self.final_snapshot(), self._spool.lines())
                write_bytes_atomic(self.path, self._counted(chunks))
            else:
                write_json_atomic(self.path, self.snapshot())
                self.bytes_written += self.path.stat().st_size

        if wait_for_room:
            DISK.retry(self.path, store)
        else:
            store()

    def _counted(self, chunks: Iterable[bytes]) -> Iterable[bytes]:
        for chunk in chunks:
            self.bytes_written += len(chunk)
            yield chunk

    @property
    def unsynced_count(self) -> int:
        """Episode files added but not fsynced yet."""
        with self._lock:
            return len(self._unsynced)

    def _sync_pending(self) -> None:
        """fsync the episode files added so far (their rows are listed at the next write)."""
        with self._lock:
            unsynced, self._unsynced = self._unsynced, []
        try:
            sync_files(unsynced)
        except OSError:
            with self._lock:  # the summary write tries them again, and fails as before
                self._unsynced[:0] = unsynced

    def _flush_loop(self) -> None:
        try:
            self._flush_until_closed()
        except BaseException as exc:  # never silently: the run ends failed (see the class)
            self.failure = exc
            if self.on_failure is not None:
                self.on_failure(exc)

    def _flush_until_closed(self) -> None:
        last = time.monotonic()
        while not self._closed.is_set():
            if not self._dirty.wait(timeout=0.2):
                continue
            while (wait := self.interval_sec - (time.monotonic() - last)) > 0:
                if self._closed.wait(min(wait, SYNC_EVERY_SEC)):
                    return
                self._sync_pending()
            self.write()
            last = time.monotonic()
