"""RemoteNodeset: a hosted nodeset that looks local to the LoopRunner.

A URL (from ``shared_urls.json``) plus a secret is all a client needs::

    policy = connect("evaltui+unix:///tmp/evaltui-x/policy.sock", secret)
    policy.call("act", {"obs": obs})          # -> {"action": 2}

Wire format, after the channel handshake (:mod:`evaltui.engine.hosting.channel`): the client
sends ``(kind, name, payload, timeout)`` with kind one of ``call`` (a node op),
``method`` (``set_episode``/``begin_episode``/``trajectory``), ``describe``, ``stats``
or ``ping``; the host answers ``("ok", value)`` or ``("error", type_name, message,
traceback_text)``. One request is in flight per connection at a time (a lock), so a
thread that needs its own concurrency opens its own proxy.

If the host went away *before* it could receive a request (the send fails), the proxy
reconnects, waiting up to ``connect_timeout`` for a restarted host, and sends again:
nothing ran twice. If it went away *after*, the call raises :class:`HostGoneError`
(the request may or may not have run) and the next call reconnects.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from multiprocessing import AuthenticationError
from typing import Any

from evaltui.engine.hosting.channel import ChannelError, dial
from evaltui.engine.hosting.wire import FrameSocket, decode_answer, request_parts

RESPONSE_MARGIN_SEC = 1.0
"""How much longer than its own timeout a client waits for the host's answer."""


class RemoteError(RuntimeError):
    """The hosted nodeset raised; the message carries the host's traceback."""

    def __init__(self, type_name: str, message: str, remote_traceback: str) -> None:
        super().__init__(f"{type_name}: {message}\n--- in the nodeset host ---\n"
                         f"{remote_traceback.rstrip()}")
        self.type_name = type_name
        self.remote_message = message
        self.remote_traceback = remote_traceback


class HostGoneError(ConnectionError):
    """The host closed the connection while a request was in flight."""


class RemoteNodeset:
    """Client proxy of one hosted nodeset (thread-safe, one request in flight)."""

    def __init__(self, url: str, secret: bytes, *, timeout: float | None = None,
                 connect_timeout: float = 30.0) -> None:
        self.url = url
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._secret = secret
        self._conn: FrameSocket | None = None
        self._lock = threading.Lock()
        self._info: dict[str, Any] | None = None

    # ---- what the LoopRunner uses ----------------------------------------------------------
    def call(self, op: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Fire one node op on the host (batched there if the node is batched)."""
        payload = inputs if type(inputs) is dict else dict(inputs)
        return self._request("call", op, payload)  # type: ignore[no-any-return]

    def set_episode(self, episode: Mapping[str, Any]) -> dict[str, Any]:
        return self._request("method", "set_episode", (dict(episode),))  # type: ignore[no-any-return]

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        self._request("method", "begin_episode", (dict(episode),))

    def trajectory(self) -> Any:
        return self._request("method", "trajectory", ())

    @property
    def success_distance(self) -> float:
        value = self.describe().get("success_distance")
        return 1.0 if value is None else float(value)

    # ---- host introspection ----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The host's impl, node specs, pid and success_distance (cached)."""
        if self._info is None:
            self._info = self._request("describe", None, None)
        return dict(self._info)

    def stats(self) -> dict[str, Any]:
        """The host's batch-size statistics and client count."""
        return self._request("stats", None, None)  # type: ignore[no-any-return]

    def ping(self) -> None:
        self._request("ping", None, None)

    def connect(self) -> RemoteNodeset:
        """Connect now (rather than at the first call); returns self."""
        with self._lock:
            if self._conn is None:
                self._conn = self._dial()
        return self

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> RemoteNodeset:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport -------------------------------------------------------------------------
    def _request(self, kind: str, name: str | None, payload: Any) -> Any:
        parts = request_parts(kind, name, payload, self.timeout)
        with self._lock:
            conn = self._conn or self._dial()
            self._conn = conn
            try:
                conn.send(*parts)
            except OSError:
                # The host was gone before it could read this: safe to send it again.
                self._drop()
                conn = self._conn = self._dial()
                conn.send(*parts)
            try:
                frame = conn.recv()
            except TimeoutError:
                self._drop()  # a late answer would be taken for the next request's
                raise TimeoutError(f"{self.url}: no answer to {kind} {name!r} within "
                                   f"{self._wait()} s") from None
            except (EOFError, OSError) as exc:
                self._drop()
                raise HostGoneError(f"the nodeset host at {self.url} went away during "
                                    f"{kind} {name!r}") from exc
        response = decode_answer(frame)
        if response[0] == "ok":
            return response[1]
        _, type_name, text, remote_tb = response
        raise RemoteError(type_name, text, remote_tb)

    def _wait(self) -> float | None:
        return None if self.timeout is None else self.timeout + RESPONSE_MARGIN_SEC

    def _dial(self) -> FrameSocket:
        deadline = time.monotonic() + self.connect_timeout
        delay = 0.02
        while True:
            try:
                conn = FrameSocket.from_connection(dial(self.url, self._secret))
                conn.set_recv_timeout(self._wait())
                return conn
            except AuthenticationError:
                raise
            except ChannelError:
                # The host may be (re)starting: its socket is not there yet.
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def connect(url: str, secret: bytes, *, timeout: float | None = None,
            connect_timeout: float = 30.0) -> RemoteNodeset:
    """A connected proxy of the nodeset hosted at ``url`` (raises if it cannot connect)."""
    return RemoteNodeset(url, secret, timeout=timeout, connect_timeout=connect_timeout).connect()
