"""The pipe protocol between the run process and one worker, whichever executor holds it
(a forked local worker, or a Slurm job step dialling back): the control messages a
worker is sent and what its answers mean to the dealing core.

The run sends ``("episode", index)`` and ``("stop",)``; a worker answers ``("ready",)``
once built, ``("failed", error)`` when it could not build its nodesets, ``("outcome",
index, result)`` per episode and ``("skipped", index)`` for one dealt that it never
started (it was told to stop first).
"""

from __future__ import annotations

from contextlib import suppress
from multiprocessing.connection import Connection
from typing import Any

from evaltui.engine.executor.slots import Finished, Ready, Skipped, Slot, SlotEvent, StartFailed


def send(conn: Connection | None, *message: Any) -> None:
    """Send a control message to a worker; a closed channel (the worker just died) is
    left to report itself on the next wait."""
    if conn is None:
        return
    with suppress(OSError):
        conn.send(message)


def decode(slot: Slot, message: tuple[Any, ...]) -> SlotEvent | None:
    """A worker's message as the dealing core's event (None: nothing the core needs)."""
    kind = message[0]
    if kind == "ready":
        return Ready(slot)
    if kind == "failed":
        return StartFailed(slot, message[1])
    if kind == "outcome":
        return Finished(slot, message[1], message[2])
    if kind == "skipped":
        return Skipped(slot, message[1])
    return None
