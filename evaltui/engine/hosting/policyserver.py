"""PolicyServer: one node of a nodeset served over openpi's websocket dialect, batched
across every connection (DESIGN §13, docs/policy-servers.md).

Each connection gets the metadata frame first, then sends requests one at a time: a
request is one item, unbatched, a map keyed by the node's input ports (``{"obs": {...}}``)
and its reply is that item's outputs (``{"action": ...}``) plus ``server_timing``
(``{"infer_ms": ...}``, the request's time in the server: queue and forward). Requests
from all connections go to one :class:`BatchedInferenceServer`, which stacks those
queued together into one forward pass and hands each caller its own slice: it runs a
batch as soon as every connected caller has a request queued, ``max_batch`` are queued,
or the first has waited ``max_wait_ms``. ``max_batch=1`` answers one request at a time
(what openpi's own server does).

The batches run on the event loop's own thread, between reads (as a run's nodeset
host drives the same server, engine/hosting/host.py): no request crosses threads, which
on a loaded machine costs a scheduler wake-up each way. While a forward pass runs, the
next requests wait in the sockets and form the next batch.

A fault answers one text frame of one line (never a traceback) and keeps the connection
open: a frame that is not msgpack, a request missing a port, the node raising. Control
frames (``episode_start``/``episode_end``) are acknowledged. ``GET /healthz`` answers
``OK``; ``GET /stats`` the batch statistics as JSON. With an API key set, every request
but ``/healthz`` must present it (``Authorization: Api-Key KEY`` or ``Api-Key: KEY``) or
is refused with HTTP 401 before the handshake.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from evaltui.engine.hosting import openpiwire as wire
from evaltui.engine.hosting.batching import BatchedInferenceServer
from evaltui.engine.nodes import NodeSet

MAX_FRAME_BYTES = 1 << 28
"""The largest request frame accepted (256 MiB: camera images, never a whole dataset)."""


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1); any other name is not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def address_problem(host: str, api_key: str | None) -> str | None:
    """Why ``host`` may not be served on (not loopback, and no API key), or None."""
    if not is_loopback_host(host) and not api_key:
        return (f"--host {host} is not loopback: serving beyond this machine needs an API "
                "key (--api-key-env VAR)")
    return None


def error_text(exc: BaseException) -> str:
    """An exception as the one line a client gets: type and the message's first line."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class PolicyServer:
    """Serves ``nodeset``'s ``op`` to websocket clients; :meth:`run` until ``stop`` is set."""

    def __init__(self, nodeset: NodeSet, op: str, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, max_batch: int = 32, max_wait_ms: float = 5.0,
                 metadata: Mapping[str, Any] | None = None) -> None:
        if (problem := address_problem(host, api_key)) is not None:
            raise ValueError(problem)
        self.spec = type(nodeset).node_specs()[op]
        self.op, self.host, self.port, self.api_key = op, host, port, api_key
        self.connections = 0
        self.batcher = BatchedInferenceServer(nodeset, max_batch_size=max_batch,
                                              max_wait_ms=max_wait_ms,
                                              callers=lambda: self.connections)
        self.metadata = {"server": "evaltui", "op": op, "inputs": list(self.spec.inputs),
                         "outputs": list(self.spec.outputs), "batched": self.spec.batched,
                         "max_batch": max_batch, "max_wait_ms": max_wait_ms,
                         **dict(metadata or {})}
        self.served = 0
        self.started = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None

    def stats(self) -> dict[str, Any]:
        """Requests served, batch-size histogram, connections (``GET /stats``)."""
        return {"requests_served": self.served, "connections": self.connections,
                "uptime_sec": round(time.monotonic() - self.started, 3), **self.batcher.stats()}

    async def run(self, stop: asyncio.Event, ready: Callable[[int], None]) -> None:
        """Serve until ``stop`` is set; ``ready(port)`` once listening."""
        try:
            async with serve(self._handle, self.host, self.port, compression=None,
                             max_size=MAX_FRAME_BYTES, process_request=self._process_request
                             ) as server:
                ready(_bound_port(server))
                await stop.wait()
        finally:
            self.batcher.close()

    # ---- HTTP before the handshake ----------------------------------------------------------
    def _process_request(self, connection: ServerConnection, request: Request
                         ) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/healthz":
            return connection.respond(HTTPStatus.OK, "OK\n")
        if self.api_key is not None:
            given = wire.presented_key(request.headers) or ""
            if not hmac.compare_digest(given.encode(), self.api_key.encode()):
                return connection.respond(HTTPStatus.UNAUTHORIZED,
                                          "wrong or missing API key\n")
        if path == "/stats":
            return connection.respond(HTTPStatus.OK, json.dumps(self.stats()) + "\n")
        return None

    # ---- one connection ------------------------------------------------------------------
    async def _handle(self, ws: ServerConnection) -> None:
        self.connections += 1
        try:
            await ws.send(wire.pack(self.metadata))
            async for frame in ws:
                await ws.send(await self._answer(frame))
        except ConnectionClosed:
            pass
        finally:
            self.connections -= 1

    async def _answer(self, frame: str | bytes) -> str | bytes:
        """The reply frame to one request frame: msgpack, or a one-line error text."""
        if isinstance(frame, str):
            return "requests must be binary msgpack frames, not text"
        try:
            request = wire.unpack(frame)
        except wire.WireError as exc:
            return str(exc)
        if wire.is_control(request):
            return wire.pack({wire.ACK_KEY: str(request[wire.CTRL_KEY])})
        if not isinstance(request, Mapping):
            return f"a request must be a map keyed by {list(self.spec.inputs)}"
        missing = [p for p in self.spec.inputs if p not in request]
        if missing:
            return (f"request has no input {missing[0]!r} (expects {list(self.spec.inputs)}, "
                    f"got {sorted(map(str, request))})")
        started = time.monotonic()
        ok, value = await self._call({p: request[p] for p in self.spec.inputs})
        if not ok:
            return error_text(value)
        reply = dict(value)
        reply[wire.TIMING_KEY] = {"infer_ms": (time.monotonic() - started) * 1e3}
        try:
            packed = wire.pack(reply)
        except wire.WireError as exc:
            return f"cannot send the reply of {self.op!r}: {exc}"
        self.served += 1
        return packed

    async def _call(self, inputs: dict[str, Any]) -> tuple[bool, Any]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[bool, Any]] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:  # on this loop's thread (_run_due)
            if not done.done():
                done.set_result((ok, value))

        self.batcher.submit(self.op, inputs, settle)
        self._schedule(loop)
        return await done

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the queue's head when it is due: now if every connection has a request
        queued, else when the first has waited ``max_wait_ms``."""
        due = self.batcher.due_in()
        if due is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_later(max(due, 0.0), self._run_due, loop)

    def _run_due(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self.batcher.run_due()
        self._schedule(loop)


def _bound_port(server: Server) -> int:
    for sock in server.sockets:
        return int(sock.getsockname()[1])
    raise RuntimeError("the policy server has no listening socket")
