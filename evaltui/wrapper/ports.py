"""The port pool of ``evaltui run``: which ports it may start backends on, and their locks.

Each port has a *start* lock (exclusive: one wrapper at a time probes the port and
starts a backend there) and a *use* lock (shared: held by every wrapper using the
backend, so ``evaltui teardown`` can tell a backend still in use). Lock files live in
``state_dir()/ports/``.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from evaltui.rundir import state_dir
from evaltui.settings import settings

DEFAULT_POOL = "8765-8769"
HOST = "127.0.0.1"


def parse_pool(spec: str) -> list[int]:
    """Ports from ``8765-8769`` or ``8765,8767`` (ValueError if malformed)."""
    ports: list[int] = []
    for part in spec.replace(" ", "").split(","):
        lo, dash, hi = part.partition("-")
        first, last = int(lo), int(hi) if dash else int(lo)
        if not 1 <= first <= last <= 65535:
            raise ValueError(f"bad port range {part!r}")
        ports.extend(range(first, last + 1))
    return ports


def port_pool() -> list[int]:
    """The pool: ``$EVALTUI_PORT_POOL`` or 8765-8769."""
    return parse_pool(settings().port_pool or DEFAULT_POOL)


@contextmanager
def port_lock(port: int, kind: str, *, shared: bool = False, block: bool = True
              ) -> Iterator[int | None]:
    """flock ``ports/{port}.{kind}.lock``; yields the fd, or None if not taken (no block)."""
    directory = state_dir() / "ports"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(directory / f"{port}.{kind}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if block else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, mode)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)


def in_use(port: int) -> bool:
    """True if a running ``evaltui run`` holds the port's use lock."""
    with port_lock(port, "use", block=False) as fd:
        return fd is None


def use_lock(port: int) -> int:
    """Take the port's use lock (shared) for as long as the returned fd stays open."""
    directory = state_dir() / "ports"
    fd = os.open(directory / f"{port}.use.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def bindable(port: int) -> bool:
    """True if nothing listens on ``HOST:port`` (so a backend can be started there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True
