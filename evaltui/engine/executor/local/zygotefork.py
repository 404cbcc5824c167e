"""The workers' zygote as a fork of the run process (``WorkerZygote.start_by_fork``).

``evaltui eval``'s run process has imported the worker code, numpy and the graph's
nodesets by the end of its spec check, and has no thread yet: a ``fork()`` then gives a
warm zygote in milliseconds, where a fresh
``python -m evaltui.engine.executor.local.zygoteproc`` redoes
~0.6 s of the same imports on the same cores. The forked zygote runs
:func:`evaltui.engine.executor.local.zygoteproc.serve_forked` (the fork loop every zygote runs) and
leaves through ``os._exit``: the run's ``atexit`` handlers and ``finally`` blocks are not
its own. :class:`ForkedProcess` is what :class:`~evaltui.engine.processes.child.Child` uses of a
``Popen``, for it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection

from evaltui.engine.executor.local.zygoteproc import serve_forked
from evaltui.engine.processes.quickexit import exit_forked


def fork_zygote() -> tuple[int, Connection]:
    """Fork the zygote; its PID and this end of its control socketpair."""
    ours, theirs = socket.socketpair()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else the child would write this process's buffers again
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the zygote: never returns into the run's code
        code = 1
        try:
            ours.close()
            code = serve_forked(theirs.detach(), parent)
        except BaseException:
            traceback.print_exc()
        finally:
            exit_forked(code)
    theirs.close()
    return pid, Connection(ours.detach())


class ForkedProcess:
    """``pid``, ``poll``, ``wait`` and ``send_signal`` of a child this process forked."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.005)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)  # unreaped: the PID is still our child's
