"""Cancelling a set whose members are Slurm array tasks: scancel of its arrays that still
have tasks in the queue, a wait for them to leave it, then each member's end read (into
its run dir, and into set.json unless a ``set run`` following the set holds it: that one
writes it then). Shared by ``evaltui set cancel`` and the API's
``POST /sets/{set_id}/cancel``."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from evaltui.sets.setdir import SetBusy, hold_set, read_set
from evaltui.sets.slurmarray import ArrayManifest
from evaltui.sets.slurmfollow import queued_tasks, refresh
from evaltui.slurm.control import cancel

CANCEL_WAIT_SEC = 60.0
"""How long a cancel waits for the cancelled tasks to leave Slurm's queue."""


@dataclass(frozen=True)
class ArraysCancelled:
    """What a cancel of a set's arrays did."""

    set_id: str
    jobs: list[str]
    """The array job ids scancelled (those with tasks in the queue)."""
    tasks: int
    """How many of the set's tasks were queued or running when asked."""


def cancel_arrays(path: Path, wait_sec: float = CANCEL_WAIT_SEC) -> ArraysCancelled:
    """scancel the set's queued and running array tasks and wait (at most ``wait_sec``)
    for them to leave the queue; then read each member's end. SetDirError when the set
    dir cannot be read, SlurmError (one line) when Slurm refuses or does not answer."""

    manifest = ArrayManifest.read(path)
    record = read_set(path)
    queued = queued_tasks(manifest, fresh=True)
    jobs = sorted({t.split("_")[0] for t in queued}, key=int)
    for job in jobs:
        cancel(job)
    deadline = time.monotonic() + wait_sec
    while queued_tasks(manifest, fresh=True) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        with hold_set(path):
            refresh(record, manifest, path)
    except SetBusy:  # the `set run` following it writes set.json
        pass
    return ArraysCancelled(record.set_id, jobs, len(queued))
