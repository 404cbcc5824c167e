"""NodesetServer: serves one nodeset at a URL to authenticated clients (DESIGN §1, §5).

Two threads per host: *accept* takes connections and hands each to a short-lived
handshake thread (so a silent peer cannot stall the others); *io* waits on every
authenticated connection at once (one epoll set), decodes requests, queues them on the
:class:`~evaltui.engine.hosting.batching.BatchedInferenceServer` and, between reads, runs what
the server says is due and sends the answers back. One thread does all of it, so a
request never waits for a GIL hand-off between threads, and the nodeset is never entered
concurrently. Nothing is decoded from a connection before its handshake succeeded.
Node calls arrive packed (:mod:`evaltui.engine.hosting.wire`): a batched node's requests stay
raw bytes until the batch is stacked from them; answers go back packed when they can.

In a subprocess: :class:`~evaltui.engine.hosting.hostprocess.HostProcess` starts one (config
through its control pipe); or call :func:`serve_nodeset` from any process that wants to
host a nodeset itself (the scheduler does, with the per-host secret).
"""

from __future__ import annotations

import os
import select
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from contextlib import suppress
from functools import partial
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection
from typing import Any

from evaltui.engine.foreign.envspec import NodesetEnvironment
from evaltui.engine.foreign.standin import foreign_class
from evaltui.engine.hosting.batching import BatchedInferenceServer
from evaltui.engine.hosting.channel import listen, parse_url, server_handshake
from evaltui.engine.hosting.packing import Packed
from evaltui.engine.hosting.wire import FrameSocket, answer_parts, decode_request
from evaltui.engine.nodes import EnvNodeSet, NodeSet, import_impl
from evaltui.engine.usererrors import build_nodeset


class NodesetServer:
    """Hosts ``nodeset`` at ``url``; ``start``/``close`` bound its threads."""

    def __init__(self, nodeset: NodeSet, url: str, secret: bytes, *, max_batch_size: int = 32,
                 max_wait_ms: float = 2.0, batching: bool = True) -> None:
        self.nodeset = nodeset
        self._secret = secret
        self._listener, self.url = listen(url)
        self._conns: dict[FrameSocket, threading.Lock] = {}
        self._conns_lock = threading.Lock()
        self._admitted: list[FrameSocket] = []
        # Connections that have called a node: the ones a batch may be waiting for (a
        # client that only asks for stats never will).
        self._callers: set[FrameSocket] = set()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._closed = threading.Event()
        self._wakeups = 0  # epoll returns with something to read: a cost per batch
        self.server = BatchedInferenceServer(nodeset, max_batch_size=max_batch_size,
                                             max_wait_ms=max_wait_ms, callers=self.caller_count,
                                             batching=batching)
        self._threads = [threading.Thread(target=self._accept_loop, name="host-accept",
                                          daemon=True),
                         threading.Thread(target=self._io_loop, name="host-io", daemon=True)]

    def start(self) -> NodesetServer:
        for thread in self._threads:
            thread.start()
        return self

    def client_count(self) -> int:
        """Authenticated connections open now."""
        return len(self._conns)

    def caller_count(self) -> int:
        """Open connections that have called a node (each has at most one call in flight)."""
        return len(self._callers)

    def describe(self) -> dict[str, Any]:
        cls = type(self.nodeset)
        return {
            "impl": f"{cls.__module__}:{cls.__qualname__}",
            "pid": os.getpid(),
            "url": self.url,
            "is_env": isinstance(self.nodeset, EnvNodeSet),
            "success_distance": getattr(self.nodeset, "success_distance", None),
            "node_specs": {op: {"inputs": list(s.inputs), "outputs": list(s.outputs),
                                "batched": s.batched, "batch_dim": s.batch_dim}
                           for op, s in cls.node_specs().items()},
        }

    def stats(self) -> dict[str, Any]:
        return {**self.server.stats(), "clients": self.client_count(),
                "callers": self.caller_count(), "pid": os.getpid(),
                "io_wakeups": self._wakeups}

    def close(self) -> None:
        """Stop accepting, drop every client, stop the server thread (the nodeset stays open)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._poke_accept()
        os.write(self._wake_w, b"x")
        for thread in self._threads:
            thread.join(timeout=5)
        self.server.close()
        with self._conns_lock:
            conns = list(self._conns)
            self._conns.clear()
            self._callers.clear()
        for conn in conns:
            conn.close()
        self._listener.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def __enter__(self) -> NodesetServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- threads ---------------------------------------------------------------------------
    def _poke_accept(self) -> None:
        # accept() does not return when its socket is closed from another thread; a
        # throw-away connection wakes it so it can see the closed flag.
        addr = parse_url(self.url)
        with suppress(OSError):  # the listener is gone already: accept() has returned
            Client(addr.address, addr.family).close()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn = self._listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                continue
            if self._closed.is_set():
                conn.close()
                return
            threading.Thread(target=self._admit, args=(conn,), name="host-handshake",
                             daemon=True).start()

    def _admit(self, conn: Connection) -> None:
        try:
            server_handshake(conn, self._secret)
        except (AuthenticationError, OSError, EOFError) as exc:
            print(f"evaltui host {self.url}: refused a connection: {exc}", file=sys.stderr)
            conn.close()
            return
        try:
            framed = FrameSocket.from_connection(conn)
        except OSError:
            conn.close()
            return
        with self._conns_lock:
            if self._closed.is_set():
                framed.close()
                return
            self._conns[framed] = threading.Lock()
            self._admitted.append(framed)
        os.write(self._wake_w, b"x")

    def _io_loop(self) -> None:
        # One long-lived epoll set: rebuilding a selector per wait would cost more than
        # a whole round trip.
        epoll = select.epoll()
        epoll.register(self._wake_r, select.EPOLLIN)
        by_fd: dict[int, FrameSocket] = {}
        try:
            while not self._closed.is_set():
                due = self.server.due_in()
                events = epoll.poll(1.0 if due is None else max(due, 0.0))
                self._wakeups += bool(events)
                for fd, _ in events:
                    if fd == self._wake_r:
                        self._take_admitted(epoll, by_fd)
                    elif fd in by_fd:
                        self._read_requests(by_fd[fd], epoll, by_fd)
                self.server.run_due()
        finally:
            epoll.close()

    def _read_requests(self, conn: FrameSocket, epoll: select.epoll,
                       by_fd: dict[int, FrameSocket]) -> None:
        while True:
            try:
                frame = conn.recv()
            except (EOFError, OSError, ValueError):
                del by_fd[conn.fileno()]
                epoll.unregister(conn.fileno())
                self._drop(conn)
                return
            try:
                request = decode_request(frame)
            except Exception as exc:  # arrived whole, but does not decode here
                self._reply(conn, False, exc)
            else:
                self._handle(conn, request)
            if not conn.buffered():
                return

    def _take_admitted(self, epoll: select.epoll, by_fd: dict[int, FrameSocket]) -> None:
        with suppress(BlockingIOError):  # drained
            while os.read(self._wake_r, 4096):
                continue
        with self._conns_lock:
            admitted, self._admitted = self._admitted, []
        for conn in admitted:
            by_fd[conn.fileno()] = conn
            epoll.register(conn.fileno(), select.EPOLLIN)

    def _handle(self, conn: FrameSocket, request: Any) -> None:
        reply = partial(self._reply, conn)
        try:
            kind, name, payload, timeout = request
        except (TypeError, ValueError):
            reply(False, ValueError("malformed request: expected (kind, name, payload, timeout)"))
            return
        if kind == "call" and isinstance(payload, (Packed, Mapping)):
            self._callers.add(conn)
            # A batched node stacks a packed request's raw bytes; the others get a dict.
            if isinstance(payload, Packed) and name not in self.server.batched:
                try:
                    payload = payload.unpack()
                except Exception as exc:
                    reply(False, exc)
                    return
            self.server.submit(name, payload, reply, timeout=timeout)
        elif kind == "method" and isinstance(payload, tuple):
            self.server.submit(name, payload, reply, timeout=timeout, is_method=True)
        elif kind == "describe":
            reply(True, self.describe())
        elif kind == "stats":
            reply(True, self.stats())
        elif kind == "ping":
            reply(True, None)
        else:
            reply(False, ValueError(f"unknown request kind {kind!r}"))

    def _reply(self, conn: FrameSocket, ok: bool, value: Any) -> None:
        lock = self._conns.get(conn)
        if lock is None:
            return  # the client is gone
        message = ("ok", value) if ok else _error_message(value)
        try:
            parts = answer_parts(message)
        except Exception as exc:  # the result does not pickle
            parts = answer_parts(_error_message(
                TypeError(f"the result could not be sent: {exc}")))
        with lock:
            try:
                conn.send(*parts)
            except (OSError, ValueError):
                return  # closed under us; the io loop drops it

    def _drop(self, conn: FrameSocket) -> None:
        with self._conns_lock:
            self._conns.pop(conn, None)
            self._callers.discard(conn)
        conn.close()


def _error_message(exc: BaseException) -> tuple[str, str, str, str]:
    return ("error", type(exc).__name__, str(exc),
            "".join(traceback.format_exception(exc)))


def serve_nodeset(impl: str, params: Mapping[str, Any], url: str, secret: bytes, *,
                  stop: threading.Event, max_batch_size: int = 32, max_wait_ms: float = 2.0,
                  batching: bool = True, on_ready: Callable[[str], None] | None = None,
                  environment: NodesetEnvironment | None = None, name: str | None = None
                  ) -> None:
    """Build ``impl(**params)``, host it at ``url`` until ``stop`` is set, then close it.

    ``on_ready`` gets the actual URL once clients can connect (a tcp port 0 resolved).
    With an ``environment`` the nodeset is a stand-in for one hosted in that environment
    (:mod:`evaltui.engine.foreign.standin`); batching happens here as for any nodeset.
    """
    cls = import_impl(impl) if environment is None else \
        foreign_class(name or impl, impl, environment, shared=True)
    nodeset = build_nodeset(impl, cls, params)
    try:
        with NodesetServer(nodeset, url, secret, max_batch_size=max_batch_size,
                         max_wait_ms=max_wait_ms, batching=batching) as host:
            if on_ready is not None:
                on_ready(host.url)
            stop.wait()
    finally:
        nodeset.close()
