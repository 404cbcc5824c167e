"""A parser of server-sent event streams (the client side of ``GET /events``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class ServerEvent:
    """One event: its id (None for ``dropped``), type and JSON payload."""

    id: int | None
    event: str
    data: Any


def iter_sse(lines: Iterable[str]) -> Iterator[ServerEvent]:
    """Events from the lines of a ``text/event-stream`` body (comments are skipped)."""
    event_id: int | None = None
    name = "message"
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                raw = "\n".join(data)
                try:
                    payload: Any = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    payload = raw
                yield ServerEvent(event_id, name, payload)
            event_id, name, data = None, "message", []
            continue
        if line.startswith(":"):
            continue  # a heartbeat
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id":
            event_id = int(value) if value.isdigit() else None
