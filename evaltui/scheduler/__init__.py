"""The backend's scheduler: queue, GPU-budget admission, machine-wide ledger, run lifecycle.

Headless: it never imports the TUI or the HTTP API (they are built on :class:`JobScheduler`).
"""

from evaltui.scheduler.admission import WaitKind
from evaltui.scheduler.events import EpisodeFinished, NodesetsChanged, RunStateChanged
from evaltui.scheduler.lock import LockHeldError, LockInfo
from evaltui.scheduler.scheduler import JobScheduler, NotQueued, NotResumable, RunNotFound
from evaltui.scheduler.shared import NodesetError

__all__ = [
    "EpisodeFinished",
    "JobScheduler",
    "LockHeldError",
    "LockInfo",
    "NodesetError",
    "NodesetsChanged",
    "NotQueued",
    "NotResumable",
    "RunNotFound",
    "RunStateChanged",
    "WaitKind",
]
