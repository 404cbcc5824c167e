"""ApiServer: uvicorn serving an app on a thread, started and stopped in one place.

The socket is bound before the thread starts, so ``start`` fails fast (and with the
real error) on a port in use, and port 0 gives an ephemeral port known at once. uvicorn
runs off the main thread and therefore installs no signal handlers: whoever owns the
server (``evaltui serve``, the TUI, a test) decides what SIGTERM means and calls
``stop``, which ends the event streams first so that shutdown never waits on them.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any

import uvicorn

from evaltui.api.events import EventHub

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # any other name may resolve to a public address


class ApiServer:
    """Serves ``app`` on ``host:port`` from a background thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 8000, *,
                 log_level: str = "warning", graceful_sec: float = 3.0) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._config = uvicorn.Config(app, log_level=log_level, access_log=False,
                                      timeout_graceful_shutdown=int(max(1, graceful_sec)),
                                      lifespan="on", server_header=False)
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` (the real port once started)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 10.0) -> ApiServer:
        """Bind (raises OSError, e.g. port in use), then serve; returns once listening."""
        if self._thread is not None:
            return self
        self._sock = _bind(self.host, self.port)
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="evaltui-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the API server exited during startup (see the log)")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the API server did not start within {timeout} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """End the event streams, let requests in flight finish, close the socket."""
        thread, self._thread = self._thread, None
        hub = _hub(self.app)
        if hub is not None:
            hub.close()
        self._server.should_exit = True
        if thread is not None:
            thread.join(timeout)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when
    # the protocol says TCP; with 0 every response would wait ~40 ms on delayed ACKs.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
        sock.set_inheritable(False)
    except OSError:
        sock.close()
        raise
    return sock


def _hub(app: Any) -> EventHub | None:
    ctx = getattr(getattr(app, "state", None), "ctx", None)
    return getattr(ctx, "hub", None)
