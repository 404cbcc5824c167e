"""Loopback ports that were free a moment ago (bound to port 0 and let go), for tests
that must name a port before the process that binds it starts."""

from __future__ import annotations

import socket


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: all bound at once, so no two are the same."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port() -> int:
    [port] = free_ports(1)
    return port
