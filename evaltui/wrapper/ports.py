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

from evaltui.contract.settings import settings
from evaltui.rundir.layout import state_dir

DEFAULT_POOL = "8765-8769"
HOST = "127.0.0.1"
MIN_PORT, MAX_PORT = 1024, 65535
"""Ports below 1024 are privileged: only with ``allow_privileged`` (a backend started as
root on port 80 is not something to do by accident)."""
POOL_MAX = 1024
"""More ports than this is a typo (``8765-87690``), not a pool."""


class PortPoolError(ValueError):
    """A port pool that cannot be used; the message is one line naming what is wrong."""


def parse_pool(spec: str, *, allow_privileged: bool = False,
               source: str = "port pool") -> list[int]:
    """Ports from ``8765-8769`` or ``8765,8767`` (several terms, each a port or an ordered
    ``LO-HI`` range inside 1024-65535, or 1-65535 with ``allow_privileged``).

    Raises :class:`PortPoolError` naming ``source`` and the bad term.
    """
    low = 1 if allow_privileged else MIN_PORT
    ports: list[int] = []
    seen: set[int] = set()
    terms = [t.strip() for t in spec.split(",")]
    if not any(terms):
        raise PortPoolError(f"{source}: empty (expected LO-HI, e.g. {DEFAULT_POOL})")
    for term in terms:
        lo, dash, hi = term.partition("-")
        if not _digits(lo) or (dash and not _digits(hi)):
            raise PortPoolError(f"{source}: {term!r} is not a port or a LO-HI range "
                                f"(e.g. {DEFAULT_POOL})")
        first = int(lo)
        last = int(hi) if dash else first
        if first > last:
            raise PortPoolError(f"{source}: {term!r} is not ordered (LO must be <= HI)")
        if last > MAX_PORT:
            raise PortPoolError(f"{source}: {term!r} is outside {low}-{MAX_PORT}")
        if first < low:
            hint = "" if allow_privileged or first < 1 else \
                " (ports below 1024 are privileged; pass --allow-privileged-ports)"
            raise PortPoolError(f"{source}: {term!r} is outside {low}-{MAX_PORT}{hint}")
        for port in range(first, last + 1):
            if port not in seen:
                seen.add(port)
                ports.append(port)
            if len(ports) > POOL_MAX:  # refused as it passes the cap, not after 64,000
                raise PortPoolError(f"{source}: more than {POOL_MAX} ports")
    return ports


def _digits(text: str) -> bool:
    text = text.strip()
    return text.isascii() and text.isdigit() and len(text) <= 6


def port_pool(*, allow_privileged: bool = False) -> list[int]:
    """The pool: ``$EVALTUI_PORT_POOL`` or 8765-8769 (PortPoolError if malformed)."""
    raw = settings().port_pool
    if raw is None:
        return parse_pool(DEFAULT_POOL)
    return parse_pool(raw, allow_privileged=allow_privileged, source="EVALTUI_PORT_POOL")


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
