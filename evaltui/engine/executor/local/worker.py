"""The local worker subprocess: a fork of the run's zygote
(:mod:`evaltui.engine.executor.local.zygote`), which calls :func:`serve` in the fresh
child. It runs the shared episode loop (:mod:`evaltui.engine.executor.workerloop`) over
its control pipe; the pipe is inherited, so it needs no secret.
"""

from __future__ import annotations

import signal
import threading
from multiprocessing.connection import Connection

from evaltui.engine.executor.workerloop import WorkerConfig, run_worker

__all__ = ["WorkerConfig", "serve"]


def serve(conn: Connection, config: WorkerConfig) -> int:
    """The worker's main, in a freshly forked child; returns its exit code."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return run_worker(conn, config, stop)
