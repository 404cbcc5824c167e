"""RowSpool: a running run's episode rows, appended to rows.jsonl beside summary.json.

Each row is written once, as one JSON line, when the writer flushes; the spool keeps
only where each episode's latest line lies (offset and length), not the rows, so a
50,000-episode run neither rewrites its rows every second nor holds them in memory. The
final summary.json is streamed from the spool in episode order (:func:`summary_chunks`).
A row added again for the same episode (a re-run) replaces the earlier one: its new line
is appended and the index points at it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import orjson

from evaltui.contract.records import ROWS_FILENAME


class RowSpool:
    """rows.jsonl of one run dir; ``add`` from any thread, ``append`` from the flusher."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / ROWS_FILENAME
        self._where: dict[int, tuple[int, int]] = {}
        """Episode index -> (offset, length) of its latest line in the file."""
        self._pending: dict[int, bytes] = {}
        """Lines added since the last append (the newest per index)."""
        self._size = 0
        self._fd: int | None = None
        self._lock = threading.Lock()
        self.bytes_written = 0

    def open(self) -> None:
        """Start an empty file (a resumed run re-adds the rows it keeps)."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)

    def __len__(self) -> int:
        with self._lock:
            return len(self._where.keys() | self._pending.keys())

    def add(self, index: int, line: bytes) -> bytes | None:
        """Queue ``line`` (one row's JSON, no newline) for ``index``; returns the line it
        replaces, if the episode had one."""
        with self._lock:
            previous = self._pending.get(index)
            if previous is None and index in self._where:
                previous = self._read(*self._where[index])
            self._pending[index] = line
            return previous

    def append(self) -> None:
        """Write the queued lines at the end of the file (OSError leaves them queued and
        the file as it was)."""
        with self._lock:
            if not self._pending:
                return
            assert self._fd is not None, "RowSpool.open first"
            data = b"".join(line + b"\n" for line in self._pending.values())
            try:
                done = 0
                while done < len(data):
                    done += os.pwrite(self._fd, memoryview(data)[done:], self._size + done)
            except OSError:
                with suppress(OSError):
                    os.ftruncate(self._fd, self._size)  # no half line for the next append
                raise
            offset = self._size
            for index, line in self._pending.items():
                self._where[index] = (offset, len(line))
                offset += len(line) + 1
            self._size = offset
            self.bytes_written += len(data)
            self._pending.clear()

    def lines(self) -> Iterator[bytes]:
        """Every episode's latest line, in episode order (queued ones included)."""
        with self._lock:
            indices = sorted(self._where.keys() | self._pending.keys())
            pending = dict(self._pending)
            where = dict(self._where)
        for index in indices:
            line = pending.get(index)
            yield line if line is not None else self._read(*where[index])

    def rows(self) -> Iterator[dict[str, Any]]:
        """:meth:`lines` parsed."""
        return (orjson.loads(line) for line in self.lines())

    def unlink(self) -> None:
        """Remove the file once summary.json holds every row. The descriptor stays open
        (and readable): a later final write, say after a full disk failed ``_DONE``,
        streams the rows again."""
        self.path.unlink(missing_ok=True)

    def _read(self, offset: int, length: int) -> bytes:
        assert self._fd is not None
        return os.pread(self._fd, length, offset)


def summary_chunks(header: Mapping[str, Any], lines: Iterator[bytes]) -> Iterator[bytes]:
    """summary.json as byte chunks: ``header`` (indented, as every run-dir JSON file) with
    ``episodes`` holding ``lines`` (rows' JSON, compact) in order."""
    head = orjson.dumps(dict(header), option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    yield head[: head.rindex(b"}")].rstrip() + b',\n  "episodes": ['
    first = True
    for line in lines:
        yield (b"\n    " if first else b",\n    ") + line
        first = False
    yield b"\n  ]\n}\n" if not first else b"]\n}\n"
