"""Reading a log.jsonl (DESIGN §2): append-only, read while it grows.

A reader ignores a trailing partial line (the writer may be mid-line) and turns a
garbage line into a ``corrupt`` record instead of failing the whole read.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from contextlib import nullcontext
from pathlib import Path
from typing import Any, BinaryIO

import orjson

_LOG_CHUNK = 1 << 20
_CORRUPT_RAW_CHARS = 200


def iter_log(path: Path | BinaryIO, start_offset: int = 0
             ) -> Generator[tuple[int, dict[str, Any]], None, int]:
    """Yield ``(byte offset, record)`` for each complete line of a log.jsonl from ``start_offset``.

    A trailing line without its newline is a writer mid-append (or a crash) and is left
    for a later read. A complete line that is not a JSON object yields an
    ``{"event": "corrupt", ...}`` record. The generator's return value is the offset to
    resume from (see :func:`read_log`). ``path`` may be a file already open for binary
    reading (``safeopen.open_inside``); it is left open.
    """
    pos = start_offset
    with open(path, "rb") if isinstance(path, str | os.PathLike) else nullcontext(path) as f:
        f.seek(start_offset)
        carry: list[bytes] = []  # pieces of a line not yet terminated
        while chunk := f.read(_LOG_CHUNK):
            last_nl = chunk.rfind(b"\n")
            if last_nl < 0:
                carry.append(chunk)  # a line longer than a chunk: join once it ends
                continue
            carry.append(chunk[: last_nl + 1])
            block = b"".join(carry)
            carry = [chunk[last_nl + 1 :]]
            for line in block.split(b"\n")[:-1]:
                offset, pos = pos, pos + len(line) + 1
                if line.strip():
                    yield offset, parse_log_line(line)
    return pos


def read_log(path: Path, start_offset: int = 0) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """All complete records from ``start_offset`` on, and the offset to resume from."""
    records: list[tuple[int, dict[str, Any]]] = []
    gen = iter_log(path, start_offset)
    while True:
        try:
            records.append(next(gen))
        except StopIteration as stop:
            return records, stop.value


def parse_log_line(line: bytes) -> dict[str, Any]:
    """One log.jsonl line as a dict; a garbage line becomes an ``event: corrupt`` record."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        error = str(exc)
    else:
        if isinstance(record, dict):
            return record
        error = f"not a JSON object: {type(record).__name__}"
    raw = line[: _CORRUPT_RAW_CHARS * 4].decode("utf-8", errors="replace")
    return {"event": "corrupt", "raw": raw[:_CORRUPT_RAW_CHARS], "error": error}
