"""AttachedBackend: the TUI's Backend over the HTTP API of a running ``evaltui serve``.

``evaltui --attach URL`` uses it instead of an embedded scheduler: runs, the queue,
resources and the lock come from the API, actions are API calls, and an
:class:`~evaltui.tui.eventstream.EventFollower` turns ``GET /events`` into prompt
re-polls. The run and replay screens read run dirs from disk at the path the API
reports, so they work when the backend runs on this machine (the loopback case);
otherwise the queue screen says the directory is not readable here.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from evaltui.api.auth import TokenError, read_token
from evaltui.api.client import ApiClient, ApiError, BackendUnavailable, InvalidRequest, NotFound
from evaltui.api.models import Admit, BackendInfo
from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunState
from evaltui.tui.backend import (
    BackendError,
    QueueSnapshot,
    queue_rows,
    readable_dir,
    scheduler_info,
)
from evaltui.tui.eventstream import EventFollower

POLL_TIMEOUT_SEC = 5.0
"""A hung backend shows as unreachable after this long, instead of a frozen queue."""
ACTION_TIMEOUT_SEC = 30.0
T = TypeVar("T")


def normalise_url(url: str) -> str:
    """``host:port`` → ``http://host:port``; raises BackendError for anything not http(s)."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BackendError(f"not an http(s) URL: {url!r} (e.g. http://127.0.0.1:8000)")
    return url


class AttachedBackend:
    """A Backend reached over HTTP. ``start`` checks that the backend answers and accepts
    the token (raising BackendError with a one-line reason if not) and starts following
    its events; ``stop`` ends that. Neither touches the backend's runs."""

    def __init__(self, url: str, token: str | None = None, *, owner: str | None = None,
                 poll_timeout: float = POLL_TIMEOUT_SEC,
                 action_timeout: float = ACTION_TIMEOUT_SEC) -> None:
        self.url = normalise_url(url)
        self.label = self.url
        self.owner = owner or f"evaltui TUI ({getpass.getuser()}, pid {os.getpid()})"
        if token is None:
            try:
                token = read_token()  # $EVALTUI_TOKEN, else the token file: as the CLI
            except TokenError:
                token = None  # the backend's 401 then names the token file
        # Separate pools: a slow action never delays a poll, and the event stream's
        # long-lived connection never takes a pool slot the others need.
        self._poll = ApiClient(self.url, token, timeout=poll_timeout)
        self._actions = ApiClient(self.url, token, timeout=action_timeout)
        self._warnings: dict[str, list[str]] = {}  # submit warnings until the form asks
        self._stream = ApiClient(self.url, token)
        self._callbacks: list[Callable[[], None]] = []
        self._follower = EventFollower(self._stream, self._changed, self._connection)
        self._note: str | None = None
        self._identity_stale = False
        """Set when the backend may have been restarted (a reconnection, a failed poll):
        the next poll reads /info again, so the header names the live backend's pid."""
        self._closed = False

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._poll.health()  # not an evaltui backend, or nothing there
            info = self._poll.info()  # the first call that needs the token
        except BackendUnavailable as exc:
            raise BackendError(f"cannot attach to {self.url}: {unreachable(exc)}") from None
        except ApiError as exc:
            raise BackendError(f"cannot attach to {self.url}: {exc}") from None
        self._note = identity(info)
        self._follower.start()

    def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._follower.stop()
        for client in (self._poll, self._actions, self._stream):
            client.close()

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def _changed(self) -> None:
        for callback in list(self._callbacks):
            callback()

    def _connection(self, connected: bool, _reason: str | None) -> None:
        # Either way the UI polls at once: the poll's success or failure is what the
        # header shows, so the event stream and the header never disagree for long.
        if connected:
            self._identity_stale = True  # a reconnection may be to a new backend process
        self._changed()

    # --- reads ---------------------------------------------------------------------------

    def snapshot(self) -> QueueSnapshot:
        try:
            if self._identity_stale:
                self._identity_stale = False
                self._note = identity(self._poll.info())
            resources = self._poll.resources()
            queue = self._poll.queue()
            runs = self._poll.list_runs()
            admits = self._admits()
        except BackendUnavailable as exc:
            self._identity_stale = True
            raise BackendError(f"{self.url} ({unreachable(exc)})") from None
        except ApiError as exc:
            raise BackendError(str(exc)) from None
        # The lock measured against the backend's own clock (taken_at), not ours.
        return QueueSnapshot(scheduler_info(resources, self.label, self._note,
                                            resources.taken_at), resources,
                             tuple(queue_rows(runs, queue, admits)))

    def _admits(self) -> list[Admit]:
        """The backend's admit entries (none where it queues none: ``evaltui serve``
        without an admit queue answers 404)."""
        try:
            return self._poll.list_admits()
        except NotFound:
            return []

    def run_dir(self, run_id: str) -> Path | None:
        try:
            path = Path(self._poll.get_run(run_id).run_dir)
        except NotFound:
            return None
        except ApiError as exc:
            raise BackendError(str(exc)) from None
        return path if readable_dir(path) else None

    # --- actions -------------------------------------------------------------------------

    def submit(self, spec: dict[str, Any]) -> tuple[str, RunState]:
        try:
            ref = self._actions.submit(spec)
        except InvalidRequest as exc:
            if exc.field:  # lands under the form field it names, as the embedded one does
                raise SpecError(exc.field, str(exc).removeprefix(f"{exc.field}: ")) from None
            raise BackendError(str(exc)) from None
        except ApiError as exc:
            raise BackendError(self._message(exc)) from None
        self._warnings[ref.run_id] = list(ref.warnings)
        return ref.run_id, ref.state

    def submit_warnings(self, run_id: str) -> list[str]:
        return self._warnings.pop(run_id, [])

    def cancel(self, run_id: str) -> RunState:
        if run_id.startswith("admit:"):  # a served policy: released, it stops itself
            self._act(self._actions.release_admit, run_id.removeprefix("admit:"))
            return RunState.CANCELLED
        return self._act(self._actions.cancel, run_id).state

    def resume(self, run_id: str) -> RunState:
        return self._act(self._actions.resume, run_id).state

    def set_priority(self, run_id: str, priority: int) -> None:
        self._act(self._actions.set_priority, run_id, priority)

    def lock(self, ttl_sec: float) -> None:
        self._act(self._actions.lock, self.owner, ttl_sec)

    def unlock(self) -> None:
        if not self._act(self._actions.unlock, self.owner):
            raise BackendError("the interactive lock is held by someone else")

    def _act(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except ApiError as exc:
            raise BackendError(self._message(exc)) from None

    def _message(self, exc: ApiError) -> str:
        if isinstance(exc, BackendUnavailable):
            return f"backend unreachable: {self.url} ({unreachable(exc)})"
        return str(exc)


def identity(info: BackendInfo) -> str:
    """The header's words for which backend process answers: ``backend pid 4242 · outputs
    /data/outputs`` (the pid changes when the backend restarts)."""
    return f"backend pid {info.pid} · outputs {info.outputs}"


def unreachable(exc: BackendUnavailable) -> str:
    """Why the backend did not answer, in a few words (the client's message suggests
    setting $BACKEND_URL, which the TUI does not read)."""
    cause = exc.__context__  # kept by the client's `raise ... from None`
    if isinstance(cause, httpx.TimeoutException):
        return "it does not answer in time"
    if isinstance(cause, httpx.TransportError):
        return "nothing answers there; start one with `evaltui serve`"
    return str(exc)  # something answered, but not the evaltui API
