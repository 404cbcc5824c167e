"""A handle on one run's process: did it exit, reap it, end what it left behind.

Runs are session and process-group leaders (``start_new_session=True``). A run this
scheduler spawned is its child: ``waitid(WNOWAIT)`` sees the exit without reaping, so
the leader's PID (and with it the group id) stays reserved until :meth:`RunHandle.finish`
has SIGKILLed any straggler of the group and then reaped. An adopted run (spawned by an
earlier scheduler) is watched by PID and create time. Where the kernel has pidfds, the
scheduler's loop also waits on them, so an exit is handled at once instead of at the
next tick.
"""

from __future__ import annotations

import os
import signal
import subprocess

from evaltui.contract.pidref import PidRef
from evaltui.procs.groups import signal_group
from evaltui.scheduler import procs


class RunHandle:
    """The process of one run (spawned here, or adopted from an earlier scheduler)."""

    def __init__(self, ref: PidRef, proc: subprocess.Popen[bytes] | None = None) -> None:
        self.ref = ref
        self.proc = proc
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(ref.pid) if procs.alive(ref.pid, ref.create_time) \
                else None
        except (AttributeError, OSError):
            self.pidfd = None  # no pidfd support: the 1 Hz tick notices the exit

    @property
    def adopted(self) -> bool:
        return self.proc is None

    def exited(self) -> bool:
        """True once the run's leader process has exited (without reaping it)."""
        if self.proc is not None:
            if self.proc.returncode is not None:
                return True
            try:
                info = os.waitid(os.P_PID, self.proc.pid,
                                 os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return True  # reaped elsewhere
            return info is not None
        return not procs.alive(self.ref.pid, self.ref.create_time)

    def finish(self) -> int | None:
        """End stragglers of the run's process group, reap the leader; its exit code.

        None for an adopted run (its exit status went to its real parent).
        """
        kill_group(self.ref.pid)
        code = self.proc.wait() if self.proc is not None else None
        self.close()
        return code

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def kill_group(pgid: int) -> None:
    """SIGKILL whatever is left in a process group whose leader has exited.

    For a spawned run the unreaped leader keeps ``pgid`` from being reused. For an adopted
    one the kernel does not hand out a PID that is still some group's id, so stragglers
    are hit and nobody else, unless the group emptied and its id was reused by a new group
    leader in the moment since the exit: PID wrap-around within that moment is not a
    practical risk.
    """
    signal_group(pgid, signal.SIGKILL)
