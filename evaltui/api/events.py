"""Server-sent events: scheduler events fanned out to every ``GET /events`` client.

The scheduler calls its listeners on its own thread; :class:`EventHub` numbers each
event, keeps the last few hundred (so a client reconnecting with ``Last-Event-ID``
misses nothing recent) and appends it to each subscriber's bounded queue. A client too
slow to keep up loses its *oldest* events, never blocks the scheduler, and is told how
many it lost (a ``dropped`` event) so it can re-read state. Idle streams get a comment
line every ``heartbeat_sec`` so proxies and clients see the connection is alive.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from evaltui.contract.views import Admit
from evaltui.scheduler.events import (
    EpisodeFinished,
    NodesetsChanged,
    RunStateChanged,
    SchedulerEvent,
)


@dataclass(frozen=True)
class Event:
    """One numbered event: ``name`` is the SSE event type, ``data`` its JSON payload."""

    id: int
    name: str
    data: dict[str, Any]

    @property
    def run_id(self) -> str | None:
        value = self.data.get("run_id")
        return value if isinstance(value, str) else None


def scheduler_event(event: SchedulerEvent) -> tuple[str, dict[str, Any]]:
    """The SSE name and payload of a scheduler event."""
    if isinstance(event, RunStateChanged):
        return "run", {"run_id": event.run_id, "state": event.state.value,
                       "previous": event.previous.value if event.previous else None,
                       "at": event.at}
    if isinstance(event, EpisodeFinished):
        return "episode", {"run_id": event.run_id, "episode_index": event.episode_index,
                           "status": event.status, "at": event.at}
    if isinstance(event, NodesetsChanged):
        return "nodeset", {"name": event.name, "loaded": event.loaded,
                           "refcount": event.refcount, "at": event.at}
    raise TypeError(f"not a scheduler event: {event!r}")


def admit_event(info: Admit) -> tuple[str, dict[str, Any]]:
    """The SSE name and payload of an admit entry change."""
    return "admit", {"admit_id": info.admit_id, "state": info.state.value, "gpu": info.gpu,
                     "waiting_reason": info.waiting_reason,
                     "release_reason": info.release_reason}


class Subscription:
    """One client's queue; filled from any thread, drained by the client's stream."""

    def __init__(self, hub: EventHub, loop: asyncio.AbstractEventLoop, maxlen: int,
                 run_id: str | None) -> None:
        self._hub = hub
        self._loop = loop
        self._queue: deque[Event] = deque(maxlen=maxlen)
        self.run_id = run_id
        self.dropped = 0
        self._ready = asyncio.Event()

    def push(self, event: Event) -> None:
        """Queue ``event`` (hub lock held); the oldest goes if the queue is full."""
        if self.run_id is not None and event.run_id != self.run_id:
            return
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1  # the append drops the oldest
        self._queue.append(event)
        self._wake()

    def _wake(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:
            pass  # the server's loop is closed: nobody is reading any more

    async def next(self, timeout: float) -> tuple[list[Event], int] | None:
        """Events queued so far and how many were dropped since the last call; None on
        timeout."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return None
        self._ready.clear()
        with self._hub.lock:
            events = list(self._queue)
            self._queue.clear()
            dropped, self.dropped = self.dropped, 0
        return events, dropped


class EventHub:
    """Numbered events, a replay window, and the live subscriptions."""

    def __init__(self, queue_size: int = 1000, history: int = 500,
                 heartbeat_sec: float = 15.0) -> None:
        self.lock = threading.Lock()
        self.queue_size = queue_size
        self.heartbeat_sec = heartbeat_sec
        self._history: deque[Event] = deque(maxlen=history)
        self._subs: set[Subscription] = set()
        self._next_id = 1
        self.closed = threading.Event()

    def publish(self, name: str, data: dict[str, Any]) -> None:
        """Number and deliver one event (any thread; never blocks on a client)."""
        with self.lock:
            event = Event(self._next_id, name, data)
            self._next_id += 1
            self._history.append(event)
            for sub in self._subs:
                sub.push(event)

    def on_scheduler_event(self, event: SchedulerEvent) -> None:
        """A scheduler listener."""
        self.publish(*scheduler_event(event))

    def on_admit(self, info: Admit) -> None:
        """An admit queue listener."""
        self.publish(*admit_event(info))

    def subscribe(self, run_id: str | None = None, last_id: int | None = None) -> Subscription:
        """A subscription on the running loop; replays history after ``last_id``."""
        sub = Subscription(self, asyncio.get_running_loop(), self.queue_size, run_id)
        with self.lock:
            if last_id is not None:
                for event in self._history:
                    if event.id > last_id:
                        sub.push(event)
            self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            self._subs.discard(sub)

    def close(self) -> None:
        """End every stream (server shutdown): streams return at their next wake-up."""
        self.closed.set()
        with self.lock:
            for sub in self._subs:
                sub._wake()

    async def stream(self, sub: Subscription) -> AsyncIterator[bytes]:
        """The SSE byte stream of one subscription, until the hub closes or the client
        goes away (Starlette then cancels this generator)."""
        try:
            yield b"retry: 2000\n\n"
            while not self.closed.is_set():
                got = await sub.next(self.heartbeat_sec)
                if got is None:
                    yield b": keep-alive\n\n"
                    continue
                events, dropped = got
                if dropped:
                    yield _frame(None, "dropped", {"count": dropped})
                for event in events:
                    yield _frame(event.id, event.name, event.data)
        finally:
            self.unsubscribe(sub)


def _frame(event_id: int | None, name: str, data: dict[str, Any]) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\n".encode() + b"data: " + orjson.dumps(data) + b"\n\n"
