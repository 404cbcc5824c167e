"""The one polling wait of the suite: a condition checked every 20 ms, up to a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """The first truthy value of ``cond()``; AssertionError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
