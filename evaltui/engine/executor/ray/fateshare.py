"""An evaltui actor process ends when its node's raylet dies.

Ray's worker processes are children of their node's raylet. When the raylet is
SIGKILLed, its workers that run an evaltui actor (an episode worker, a nodeset host, a
scheduler's node probe, the cluster ledger) were seen to keep running, orphaned, for
good: nothing can reach them any more (``ray.kill`` goes through the dead raylet), and
the run has already given them up and retried their episodes elsewhere (a cluster ledger
actor is restarted elsewhere by Ray). So each such actor watches its own parent: once it
is no longer the raylet that started it (the process was reparented), the actor exits.
Ray's own per-node processes are not ours to end (``ray start``'s ``log_monitor`` is
Ray's, see docs/pool.md).
"""

from __future__ import annotations

import os
import threading

WATCH_EVERY_SEC = 0.5
EXIT_CODE = 70
"""The orphaned actor's exit status (EX_SOFTWARE): not a signal, so it reads as ours."""


def follow_raylet() -> bool:
    """Start the watch in this actor process; False (nothing watched) when its parent is
    not a raylet (a local-mode actor, or a Ray that starts workers otherwise)."""
    parent = os.getppid()
    if "raylet" not in _cmdline(parent):
        return False
    threading.Thread(target=_watch, args=(parent,), name="evaltui-follow-raylet",
                     daemon=True).start()
    return True


def _watch(parent: int) -> None:
    stop = threading.Event()
    while not stop.wait(WATCH_EVERY_SEC):
        if os.getppid() != parent:  # the raylet died: this process was reparented
            os._exit(EXIT_CODE)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # no /proc (not Linux): nothing to follow
        return ""
