"""EventFollower: a thread that follows a backend's ``GET /events`` and survives outages.

The attached TUI learns of run state changes from the server-sent event stream instead
of waiting for its next poll. When the backend goes away the follower reports the
disconnection, then reconnects with exponential backoff (resuming with
``Last-Event-ID``, so nothing recent is missed when the same backend comes back) and
reports the reconnection, upon which the UI re-reads everything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from evaltui.api.client import ApiClient, ApiError
from evaltui.api.sse import ServerEvent

BACKOFF_MIN_SEC = 0.25
BACKOFF_MAX_SEC = 5.0
EPISODE_NOTIFY_SEC = 0.25
"""Episode events only move counters; the periodic poll catches up with any left out, so
at most one per this interval asks the UI to poll (a fast run sends hundreds a second)."""


class EventFollower:
    """Calls ``on_change()`` for events that change what the queue shows, and
    ``on_connection(connected, reason)`` when the stream is lost or regained. Both are
    called on the follower's thread."""

    def __init__(self, client: ApiClient, on_change: Callable[[], None],
                 on_connection: Callable[[bool, str | None], None], *,
                 backoff_min: float = BACKOFF_MIN_SEC, backoff_max: float = BACKOFF_MAX_SEC
                 ) -> None:
        self.client = client
        self.on_change = on_change
        self.on_connection = on_connection
        self.backoff_min = backoff_min
        self.backoff_max = backoff_max
        self.connected = False
        self._stop = threading.Event()
        self._abort: Callable[[], None] | None = None
        self._abort_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._last_episode_notify = 0.0

    def start(self) -> None:
        """Start following (once)."""
        if self._thread is None:
            # A daemon: a stream the abort could not reach must never keep the process alive.
            self._thread = threading.Thread(target=self._run, name="evaltui-events",
                                            daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the stream and the thread."""
        self._stop.set()
        with self._abort_lock:
            abort = self._abort
        if abort is not None:
            abort()
        if self._thread is not None:
            self._thread.join(timeout)

    def _opened(self, abort: Callable[[], None]) -> None:
        with self._abort_lock:
            self._abort = abort
        if self._stop.is_set():
            abort()  # stop() ran while this stream was being opened
            return
        self._set_connected(True, None)

    def _run(self) -> None:
        delay = self.backoff_min
        last_id: int | None = None
        while not self._stop.is_set():
            reason = "the backend ended the event stream"
            try:
                for event in self.client.events(last_event_id=last_id, on_open=self._opened):
                    delay = self.backoff_min
                    if event.id is not None:
                        last_id = event.id
                    self._dispatch(event)
            except (ApiError, httpx.HTTPError) as exc:  # gone, restarting, token revoked
                reason = str(exc)
            finally:
                with self._abort_lock:
                    self._abort = None
            if self._stop.is_set():
                break
            self._set_connected(False, reason)
            self._stop.wait(delay)
            delay = min(delay * 2, self.backoff_max)

    def _dispatch(self, event: ServerEvent) -> None:
        if event.event == "episode":
            now = time.monotonic()
            if now - self._last_episode_notify < EPISODE_NOTIFY_SEC:
                return
            self._last_episode_notify = now
        elif event.event == "admit":
            return  # `evaltui run` entries are not shown in the queue screen
        self.on_change()

    def _set_connected(self, connected: bool, reason: str | None) -> None:
        # Reported on every reconnection even if no disconnection was seen: the stream may
        # have been down between two reads, and the UI must re-read what it missed.
        if connected or self.connected:
            self.connected = connected
            self.on_connection(connected, reason)
