"""Events the scheduler reports to its listeners (the API's SSE stream, the TUI).

Listeners are called on a scheduler thread: they must return quickly and hand the event
to their own loop (``loop.call_soon_threadsafe``, ``App.call_from_thread``). A listener
that raises is logged and kept; it never stops the scheduler.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from evaltui.contract.states import RunState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunStateChanged:
    """A run moved to ``state`` (queued, starting, running, or a terminal state)."""

    run_id: str
    state: RunState
    previous: RunState | None
    at: float
    """``time.time()``."""


@dataclass(frozen=True)
class EpisodeFinished:
    """An episode of a run wrote its episode.json."""

    run_id: str
    episode_index: int
    status: str
    at: float


@dataclass(frozen=True)
class NodesetsChanged:
    """A shared nodeset was loaded or unloaded, or its refcount changed."""

    name: str
    loaded: bool
    refcount: int
    at: float


SchedulerEvent = RunStateChanged | EpisodeFinished | NodesetsChanged
Listener = Callable[[SchedulerEvent], None]
E = TypeVar("E")


class Listeners(Generic[E]):
    """A thread-safe list of listeners of events ``E`` (the scheduler's, its admit queue's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[E], None]] = []

    def add(self, listener: Callable[[E], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove(self, listener: Callable[[E], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def emit(self, event: E) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                log.exception("scheduler event listener %r failed on %r", listener, event)
