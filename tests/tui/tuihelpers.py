"""Constants and waiting for the TUI tests, in a module of its own: ``from conftest import``
is ambiguous when tests/tui and tests/api (each with a conftest.py) run in one session."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

SIZE = (120, 36)


async def wait_for(cond: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    """Let the app run until ``cond()`` holds (workers and watcher threads post late)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.02)
