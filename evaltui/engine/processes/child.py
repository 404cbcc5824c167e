"""Engine child processes (the workers' zygote, nodeset hosts): ``python -m MODULE`` plus a pipe.

A child is started with ``subprocess.Popen`` rather than ``multiprocessing`` so that
``ps`` shows what it is (``python -m evaltui.engine.hosting.hostprocess --nodeset policy``), no
resource tracker process comes along, and nothing but the control pipe is inherited.
(Workers are not started here: they are forks of the zygote,
:mod:`evaltui.engine.executor.local.zygote`.)
The control pipe is one end of a ``socketpair`` passed by fd; over it the parent sends
the child's ``sys.path`` (so user nodesets from ``active_workspace_dir`` import), then its config,
which may carry a secret: secrets travel only through this inherited pipe.

The child arms ``PR_SET_PDEATHSIG`` before anything else, stays in its parent's process
group (so a group SIGTERM/SIGKILL of the run reaches it too), and its end of the pipe
closing is how the parent learns it died: the parent waits on the connection.

PR_SET_PDEATHSIG fires when the parent *thread* that spawned the child exits, so the
owner must spawn children from a thread that lives as long as they do (the run's main
thread does).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from evaltui.engine.processes.pdeathsig import arm_pdeathsig


@dataclass
class Child:
    """The parent's handle on one child: its process and its control connection."""

    name: str
    proc: subprocess.Popen[bytes]
    conn: Connection

    @property
    def pid(self) -> int:
        return self.proc.pid

    def exit_code(self, wait_sec: float = 0.0) -> int | None:
        """The exit code once the child exited (negative: killed by that signal)."""
        try:
            return self.proc.wait(timeout=wait_sec) if wait_sec > 0 else self.proc.poll()
        except subprocess.TimeoutExpired:
            return None

    def describe_exit(self, wait_sec: float = 1.0) -> str:
        """``"signal 9"``, ``"exit code 1"`` or ``"still running"``, for error messages."""
        code = self.exit_code(wait_sec)
        if code is None:
            return "still running"
        return f"signal {-code}" if code < 0 else f"exit code {code}"

    def send_signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def end(self, grace_sec: float = 2.0) -> None:
        """Close the pipe, SIGTERM, and SIGKILL after ``grace_sec``; always reaps."""
        self.conn.close()
        if self.proc.poll() is None:
            self.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_sec)
            except subprocess.TimeoutExpired:
                self.send_signal(signal.SIGKILL)
        self.proc.wait()


def spawn_child(module: str, config: Any, *, name: str, args: Sequence[str] = (),
                env: Mapping[str, str] | None = None) -> Child:
    """Start ``python -m module`` with a control pipe and send it ``config`` (pickled);
    ``env``: variables set on top of this process's environment."""
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--control-fd", str(theirs.fileno()),
             "--parent-pid", str(os.getpid()), *args],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            env={**os.environ, **env} if env else None,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    conn = Connection(ours.detach())
    with suppress(OSError):  # the child died at once; the caller sees EOF on the connection
        conn.send(list(sys.path))
        conn.send(config)
    return Child(name=name, proc=proc, conn=conn)


def child_bootstrap(argv: Sequence[str] | None = None) -> tuple[Connection, Any, list[str]]:
    """In the child: arm the death signal, adopt the parent's sys.path, read the config.

    Returns the control connection, the config and the remaining command-line args.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    known, rest = parser.parse_known_args(argv)
    arm_pdeathsig(signal.SIGKILL, expected_parent=known.parent_pid)
    conn = Connection(known.control_fd)
    parent_path = conn.recv()
    # The parent's entries first (its workspace dir), then ours minus duplicates.
    sys.path[:] = list(dict.fromkeys([*parent_path, *sys.path]))
    config = conn.recv()
    return conn, config, rest
