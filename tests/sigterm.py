"""A SIGTERMed pytest still stops the clusters it started.

Python's default SIGTERM ends the process at once: no ``finally`` runs, so a session's Ray
head (gcs_server, raylets) or Slurm daemons outlive a pytest a developer or a CI timeout
terminated. Inside :func:`teardown_on_sigterm` SIGTERM raises KeyboardInterrupt instead,
which pytest answers as it answers Ctrl-C: it stops the session and tears its fixtures
down, each cluster's stop-by-PID included.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}: the session's clusters are being stopped")


@contextmanager
def teardown_on_sigterm() -> Iterator[None]:
    """SIGTERM is KeyboardInterrupt while the block runs (main thread only: elsewhere
    a handler cannot be set, and the block runs unchanged)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
