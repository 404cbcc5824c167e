"""Which scheduler owns a queued or running run (so two never start or finish the same one).

Several schedulers may share one outputs root (the TUI and ``evaltui serve`` both default
to ``./outputs``). Each run's scheduler.json names its owner (``owner``:
``{pid}:{create_time}:{token}``); a scheduler queues or adopts a run only if it owns it,
or if its owner is gone, and claims it under the ledger lock so that only one wins. The
token tells apart two schedulers of one process (a UI that restarts its scheduler): an
instance counts as gone once stopped or garbage-collected.
"""

from __future__ import annotations

import os
import secrets
import threading
import weakref
from dataclasses import dataclass

from evaltui.contract.pidref import PidRef
from evaltui.scheduler import procs

_live_tokens: set[str] = set()
_tokens_lock = threading.Lock()


@dataclass(frozen=True)
class Owner:
    """One scheduler instance's identity."""

    pid: int
    create_time: float
    token: str

    def __str__(self) -> str:
        return f"{self.pid}:{self.create_time:.3f}:{self.token}"


def new_owner(holder: object) -> Owner:
    """A fresh identity for ``holder`` (a scheduler); it lives until ``retire`` or GC."""
    me = PidRef.current()
    owner = Owner(me.pid, me.create_time, secrets.token_hex(4))
    with _tokens_lock:
        _live_tokens.add(owner.token)
    weakref.finalize(holder, retire, owner)
    return owner


def retire(owner: Owner) -> None:
    """This instance no longer owns anything: others may claim its runs."""
    with _tokens_lock:
        _live_tokens.discard(owner.token)


def revive(owner: Owner) -> None:
    """The instance owns its runs again (started after a stop)."""
    with _tokens_lock:
        _live_tokens.add(owner.token)


def parse_owner(value: object) -> Owner | None:
    """The owner named in a record, or None (no owner, or unreadable)."""
    if not isinstance(value, str):
        return None
    pid, _, rest = value.partition(":")
    ctime, _, token = rest.partition(":")
    try:
        return Owner(int(pid), float(ctime), token)
    except ValueError:
        return None


def owner_alive(value: object) -> bool:
    """True if the scheduler named by a record's ``owner`` still runs."""
    owner = parse_owner(value)
    if owner is None or not procs.alive(owner.pid, owner.create_time):
        return False
    if owner.pid != os.getpid():
        return True
    with _tokens_lock:
        return owner.token in _live_tokens
