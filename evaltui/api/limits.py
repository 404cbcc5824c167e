"""Request body size limit: an ASGI middleware answering 413 before the app sees the body.

A declared ``Content-Length`` over the limit is refused at once. A body without one
(chunked) is read up to the limit and refused as soon as it goes over, so a client
can never make the server buffer more than ``max_bytes``. A body within the limit is
handed to the app as one message.
"""

from __future__ import annotations

from typing import Any

import orjson

Scope = dict[str, Any]
Message = dict[str, Any]

DEFAULT_MAX_BODY = 1 << 20
_NO_BODY = frozenset({"GET", "HEAD", "OPTIONS"})


class BodyLimit:
    """Wraps an ASGI app; ``max_bytes`` is the largest body accepted."""

    def __init__(self, app: Any, max_bytes: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared == -1:
            await error_reply(send, 400, "Content-Length is not a non-negative integer")
            return
        if declared is not None and declared > self.max_bytes:
            await error_reply(send, 413, self._too_large())
            return
        if scope["method"] in _NO_BODY and not declared:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client went away before sending its body: nothing left to answer.
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await error_reply(send, 413, self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later calls wait for the disconnect, as usual

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"request body over the limit of {self.max_bytes} bytes"


def _content_length(scope: Scope) -> int | None:
    """The declared length, None if absent, -1 if malformed."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return -1
            return length if length >= 0 else -1
    return None


async def error_reply(send: Any, status: int, detail: str,
                      extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with an ErrorBody straight from ASGI middleware (no app involved)."""
    body = orjson.dumps({"detail": detail, "field": None})
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), *(extra_headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
