"""LineIndex: byte offsets of the complete lines of an append-only log.jsonl.

A log can hold hundreds of thousands of lines, so it is never read whole: the index is
built by reading fixed-size chunks with ``os.pread`` (the buffer is dropped after each
chunk, so memory grows by the offsets only, 8 bytes a line) and each line is read back
with one ``pread`` when it is shown. A trailing line without its newline is a writer
mid-append, or a crash: it is left out until it is complete (:meth:`LineIndex.torn` has
it, for a reader that knows the episode is over). Given a ``root``, the file is opened
without following a symlink out of it (:mod:`evaltui.rundir.safeopen`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from evaltui.rundir.logread import parse_log_line
from evaltui.rundir.logtail import torn_tail
from evaltui.rundir.safeopen import LeavesRoot, open_file_fd

CHUNK_BYTES = 4 << 20
_ERROR_MARK = b'"event":"error"'
"""How ExecutionLogger (orjson, compact) spells an error record; inside a JSON string the
quotes would be escaped, so a value can never fake it."""


class LineIndex:
    """Start offsets of the complete lines of one file, extended by :meth:`scan`.

    ``scan`` may run in a worker thread while the UI reads lines already indexed: the
    arrays are only ever replaced, never mutated, under a lock.
    """

    def __init__(self, path: Path, chunk_bytes: int = CHUNK_BYTES,
                 root: Path | str | None = None) -> None:
        self.path = Path(path)
        self.root = root
        """Opened without following a symlink out of it, if given (LeavesRoot if it does)."""
        self.chunk_bytes = chunk_bytes
        self.refused: str | None = None
        """Why the log was not read (a symlink out of the root)."""
        self._lock = threading.Lock()
        self._scan_lock = threading.Lock()
        """One scan at a time: two threads extending the index would interleave chunks."""
        self._starts = np.zeros(0, dtype=np.int64)
        """Offset of the first byte of each complete line."""
        self._ends = np.zeros(0, dtype=np.int64)
        """Offset of each line's newline."""
        self._error_offsets: list[int] = []
        self._scanned = 0
        """Bytes indexed so far: always just past a newline."""
        self._only_partial_left = False
        self.file_size = 0

    def __len__(self) -> int:
        return len(self._starts)

    @property
    def complete(self) -> bool:
        """True when every complete line written so far is indexed."""
        return self._scanned >= self.file_size or self._only_partial_left

    def scan(self, max_bytes: int | None = None) -> int:
        """Index up to ``max_bytes`` more of the file; return how many lines were added."""
        with self._scan_lock:
            return self._scan(max_bytes)

    def _open(self) -> int:
        if self.root is None:
            return os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return open_file_fd(self.root, self.path)

    def _scan(self, max_bytes: int | None) -> int:
        try:
            fd = self._open()
        except FileNotFoundError:
            return 0
        except LeavesRoot as exc:
            self.refused = str(exc)  # nothing to index: the replay says why
            return 0
        try:
            self.file_size = os.fstat(fd).st_size
            budget = self.file_size - self._scanned if max_bytes is None else max_bytes
            added = 0
            size = self.chunk_bytes
            while budget > 0 and self._scanned < self.file_size:
                base = self._scanned
                buf = os.pread(fd, min(size, self.file_size - base), base)
                newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
                if len(newlines) == 0:
                    if base + len(buf) >= self.file_size:
                        self._only_partial_left = True  # an unterminated last line
                        break
                    size *= 2  # a line longer than a chunk: read more at once
                    continue
                size = self.chunk_bytes
                self._only_partial_left = False
                ends = newlines.astype(np.int64) + base
                starts = np.empty_like(ends)
                starts[0] = base
                starts[1:] = ends[:-1] + 1
                keep = ends > starts  # blank lines carry no record
                errors = self._find_errors(buf[: int(newlines[-1]) + 1], base)
                with self._lock:
                    self._starts = np.concatenate([self._starts, starts[keep]])
                    self._ends = np.concatenate([self._ends, ends[keep]])
                    self._error_offsets.extend(errors)
                    self._scanned = int(ends[-1]) + 1
                added += int(keep.sum())
                budget -= self._scanned - base
            return added
        finally:
            os.close(fd)

    @staticmethod
    def _find_errors(buf: bytes, base: int) -> list[int]:
        found: list[int] = []
        pos = buf.find(_ERROR_MARK)
        while pos >= 0:
            found.append(base + pos)
            pos = buf.find(_ERROR_MARK, pos + len(_ERROR_MARK))
        return found

    def line(self, i: int) -> bytes:
        """The bytes of line ``i`` (without its newline)."""
        with self._lock:
            start, end = int(self._starts[i]), int(self._ends[i])
        return self._pread(end - start, start)

    def _pread(self, length: int, offset: int) -> bytes:
        fd = self._open()
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)

    def record(self, i: int) -> dict[str, Any]:
        """Line ``i`` parsed (a garbage line gives an ``event: corrupt`` record)."""
        return parse_log_line(self.line(i))

    def records(self, first: int, stop: int) -> list[dict[str, Any]]:
        """Lines ``first`` to ``stop - 1`` parsed, with one read for the whole range."""
        stop = min(stop, len(self))
        if first >= stop:
            return []
        with self._lock:
            starts = self._starts[first:stop].copy()
            ends = self._ends[first:stop].copy()
        base = int(starts[0])
        blob = self._pread(int(ends[-1]) - base, base)
        return [parse_log_line(blob[s - base : e - base]) for s, e in zip(starts.tolist(),
                                                                        ends.tolist(),
                                                                        strict=True)]

    def torn(self) -> dict[str, Any] | None:
        """The bytes after the last complete line, as a ``torn`` record (None if there are
        none, or the index is not complete yet). Only a reader that knows the writer is
        done (episode.json exists) should show it: before, it is a line mid-append."""
        if not self.complete:
            return None
        try:
            fd = self._open()
        except FileNotFoundError:
            return None
        try:
            return torn_tail(fd, self._scanned)
        finally:
            os.close(fd)

    def error_lines(self) -> list[int]:
        """Indexes of the lines that are ``error`` records, in file order."""
        with self._lock:
            offsets = np.asarray(self._error_offsets, dtype=np.int64)
            starts = self._starts
        if len(offsets) == 0:
            return []
        return (np.searchsorted(starts, offsets, side="right") - 1).tolist()
