"""The torn last line of a log.jsonl, shown rather than dropped once its episode is over.

The logger appends whole lines, so a last line without its newline is either a writer
mid-append (the episode still runs: readers leave it for a later read, as
``logread.iter_log`` does) or a line cut short by a kill, a full disk or a copy (the
episode is over: its episode.json exists). In the second case readers add one ``torn``
record, so a cut last line is never lost silently.
"""

from __future__ import annotations

import os
from typing import Any

TORN_EVENT = "torn"
_RAW_CHARS = 200
_CHUNK = 1 << 20


def torn_record(tail: bytes, size: int | None = None) -> dict[str, Any]:
    """The record standing in for a torn last line (``tail``: its first bytes)."""
    size = len(tail) if size is None else size
    raw = tail[: _RAW_CHARS * 4].decode("utf-8", errors="replace")[:_RAW_CHARS]
    return {"event": TORN_EVENT, "raw": raw, "bytes": size,
            "error": f"torn last line: {size} bytes without a newline (the episode ended "
                     "while it was being written)"}


def torn_tail(fd: int, offset: int) -> dict[str, Any] | None:
    """The torn record for the bytes of ``fd`` from ``offset`` (just past the last
    complete line) to the end, or None if there are none or they hold a newline now (the
    file grew: the next read has them as complete lines)."""
    size = os.fstat(fd).st_size
    if size <= offset:
        return None
    head = b""
    pos = offset
    while pos < size:
        chunk = os.pread(fd, min(_CHUNK, size - pos), pos)
        if not chunk:
            break
        if b"\n" in chunk:
            return None
        if len(head) < _RAW_CHARS * 4:
            head += chunk[: _RAW_CHARS * 4]
        pos += len(chunk)
    return torn_record(head, pos - offset) if pos > offset else None
