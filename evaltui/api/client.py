"""ApiClient: typed calls to a backend's HTTP API, for the CLI, ``evaltui run`` and the TUI.

Each method mirrors one route and returns the same pydantic models the server declares
(evaltui.api.models). Failures raise an :class:`ApiError` subclass whose message is
meant for the user: no backend at the URL, a rejected token (naming the token file),
no such run, a conflict, or an invalid request naming the field at fault. The client
is thread-safe (one httpx connection pool) and imports neither FastAPI nor the
scheduler's machinery beyond the models.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from evaltui.api.auth import TOKEN_ENV, TokenError, read_token, token_path
from evaltui.api.models import (
    API_PREFIX,
    Admit,
    BackendInfo,
    EpisodeRow,
    Health,
    Lock,
    LogPage,
    Nodeset,
    QueueEntry,
    Resources,
    Run,
    RunRef,
    SubmitRef,
)
from evaltui.api.sse import ServerEvent, iter_sse
from evaltui.contract.settings import settings

URL_ENV = "BACKEND_URL"
DEFAULT_URL = "http://127.0.0.1:8000"
T = TypeVar("T")


class ApiError(RuntimeError):
    """A request failed; ``str(error)`` is meant for the user."""

    def __init__(self, message: str, status: int | None = None, field: str | None = None
                 ) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


class BackendUnavailable(ApiError):
    """Nothing answers at the URL (or it is not an evaltui backend)."""


class BackendTimeout(BackendUnavailable):
    """Something took the connection but did not answer in time."""


class AuthError(ApiError):
    """The backend rejected the token (401)."""


class NotFound(ApiError):
    """No such run, episode, nodeset or admit entry (404)."""


class Conflict(ApiError):
    """The request conflicts with the current state (409): e.g. the run already ended."""


class InvalidRequest(ApiError):
    """The backend refused the request as invalid (400, 413, 422); ``field`` names it."""


def default_url() -> str:
    """``$BACKEND_URL``, else ``http://127.0.0.1:8000``."""
    return (settings().backend_url or DEFAULT_URL).rstrip("/")


class ApiClient:
    """Calls to one backend (``base_url`` like ``http://127.0.0.1:8000``)."""

    def __init__(self, base_url: str | None = None, token: str | None = None, *,
                 token_file: Path | None = None, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = (base_url or default_url()).rstrip("/")
        self.token_file = Path(token_file) if token_file is not None else None
        if token is None:
            try:
                token = read_token(self.token_file)
            except TokenError:
                token = None  # reported as a rejected token if the backend wants one
        self._token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url + API_PREFIX, headers=headers,
                                  timeout=timeout, transport=transport)

    # ---- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- backend ------------------------------------------------------------------------
    def health(self, timeout: float | None = None) -> Health:
        """``GET /healthz`` (no token needed)."""
        return self._call("GET", "/healthz", Health, timeout=timeout)

    def info(self) -> BackendInfo:
        return self._call("GET", "/info", BackendInfo)

    # ---- runs ---------------------------------------------------------------------------
    def submit(self, spec: dict[str, Any]) -> SubmitRef:
        """Queue a JobSpec; InvalidRequest names the field of a bad spec."""
        return self._call("POST", "/runs", SubmitRef, json=spec)

    def list_runs(self, state: str | None = None, limit: int | None = None,
                  offset: int = 0) -> list[Run]:
        """Runs, newest first."""
        params = _params(state=state, limit=limit, offset=offset or None)
        return self._call("GET", "/runs", list[Run], params=params)

    def get_run(self, run_id: str) -> Run:
        return self._call("GET", f"/runs/{_seg(run_id)}", Run)

    def cancel(self, run_id: str) -> RunRef:
        return self._call("POST", f"/runs/{_seg(run_id)}/cancel", RunRef)

    def resume(self, run_id: str, more: int | None = None) -> RunRef:
        """Re-run what is not ok; ``more``: a stopped run goes on past its rule (0: to the
        end of its order)."""
        return self._call("POST", f"/runs/{_seg(run_id)}/resume", RunRef,
                          params=_params(more=more))

    def set_priority(self, run_id: str, priority: int) -> RunRef:
        """Move a queued run in the queue; Conflict if it is not queued any more."""
        return self._call("POST", f"/runs/{_seg(run_id)}/priority", RunRef,
                          json={"priority": priority})

    def episodes(self, run_id: str, status: str | None = None, limit: int | None = None,
                 offset: int = 0) -> list[EpisodeRow]:
        params = _params(status=status, limit=limit, offset=offset or None)
        return self._call("GET", f"/runs/{_seg(run_id)}/episodes", list[EpisodeRow],
                          params=params)

    def episode(self, run_id: str, index: int) -> EpisodeRow:
        return self._call("GET", f"/runs/{_seg(run_id)}/episodes/{int(index)}", EpisodeRow)

    def log(self, run_id: str, index: int, offset: int = 0, limit: int = 500) -> LogPage:
        """One page of an episode's log; continue from ``page.next_offset``."""
        return self._call("GET", f"/runs/{_seg(run_id)}/episodes/{int(index)}/log", LogPage,
                          params={"offset": offset, "limit": limit})

    # ---- sets ---------------------------------------------------------------------------
    def create_set(self, data: dict[str, Any] | str, *, base_dir: str | Path | None = None,
                   retries: int = 0, retry_backoff: float = 2.0,
                   max_error_rate: float | None = None,
                   max_parallel: int | None = None) -> dict[str, Any]:
        """Check a set file (a mapping, or YAML text) and run it on the backend:
        ``{set_id, name, set_dir, warnings, members}``; InvalidRequest names the set
        file's field at fault, Conflict if the set is running already."""
        params = _params(base_dir=str(base_dir) if base_dir is not None else None,
                         retries=retries or None, max_error_rate=max_error_rate,
                         retry_backoff=retry_backoff if retry_backoff != 2.0 else None,
                         max_parallel=max_parallel)
        if isinstance(data, str):
            return self._call("POST", "/sets", dict[str, Any], params=params,
                              content=data.encode(), headers={"Content-Type": "text/yaml"})
        return self._call("POST", "/sets", dict[str, Any], json=data, params=params)

    def list_sets(self) -> list[dict[str, Any]]:
        """``[{set_id, name, members, states, running}]``."""
        return self._call("GET", "/sets", list[dict[str, Any]])

    def get_set(self, set_id: str, baseline: dict[str, Any] | None | bool = None
                ) -> dict[str, Any]:
        """The set's members and table (``set show --format json`` plus ``running``,
        ``held``, ``set_dir``); ``baseline=True`` compares with the set file's baseline."""
        raw = "" if baseline is True else (json.dumps(baseline) if baseline else None)
        return self._call("GET", f"/sets/{_seg(set_id)}", dict[str, Any],
                          params=_params(baseline=raw))

    def cancel_set(self, set_id: str) -> dict[str, Any]:
        """Cancel the set's queued and running members: ``{set_id, cancelled}``."""
        return self._call("POST", f"/sets/{_seg(set_id)}/cancel", dict[str, Any])

    def resume_set(self, set_id: str, *, retries: int = 0,
                   max_error_rate: float | None = None,
                   max_parallel: int | None = None) -> dict[str, Any]:
        """Continue a set from its set.json on the backend (Conflict if it runs)."""
        return self._call("POST", f"/sets/{_seg(set_id)}/resume", dict[str, Any],
                          params=_params(retries=retries or None,
                                         max_error_rate=max_error_rate,
                                         max_parallel=max_parallel))

    # ---- machine ------------------------------------------------------------------------
    def queue(self) -> list[QueueEntry]:
        return self._call("GET", "/queue", list[QueueEntry])

    def resources(self) -> Resources:
        return self._call("GET", "/resources", Resources)

    def nodesets(self) -> list[Nodeset]:
        return self._call("GET", "/nodesets", list[Nodeset])

    def load_nodeset(self, name: str, impl: str, params: dict[str, Any] | None = None,
                     gpu: int | None = None) -> Nodeset:
        return self._call("POST", f"/nodesets/{_seg(name)}/load", Nodeset,
                          json={"impl": impl, "params": params or {}, "gpu": gpu})

    def unload_nodeset(self, name: str, force: bool = False) -> Nodeset:
        return self._call("POST", f"/nodesets/{_seg(name)}/unload", Nodeset,
                          params={"force": "true" if force else "false"})

    def lock(self, owner: str, ttl_sec: float = 300.0) -> Lock:
        """Take the interactive lock; Conflict if someone else holds it."""
        return self._call("POST", "/lock", Lock, json={"owner": owner, "ttl_sec": ttl_sec})

    def unlock(self, owner: str | None = None) -> bool:
        """Release the lock (``owner``'s only, if given); True if one was released."""
        body = self._call("DELETE", "/lock", dict[str, bool], params=_params(owner=owner))
        return bool(body.get("released"))

    # ---- admit entries ------------------------------------------------------------------
    def create_admit(self, profile: str, holder_pid: int, holder_create_time: float, *,
                     marginal_vram_mb: int | None, exclusive_gpu: bool, priority: int = 0,
                     command: str = "", cpus: float | None = None, kind: str = "run",
                     ram_mb: int | None = None) -> Admit:
        body: dict[str, Any] = {
            "profile": profile, "marginal_vram_mb": marginal_vram_mb,
            "exclusive_gpu": exclusive_gpu, "priority": priority, "holder_pid": holder_pid,
            "holder_create_time": holder_create_time, "command": command}
        # Only when set: a backend of an earlier version forbids these fields.
        body.update(_params(cpus=cpus, kind=kind if kind != "run" else None, ram_mb=ram_mb))
        return self._call("POST", "/admits", Admit, json=body)

    def get_admit(self, admit_id: str, wait: float = 0.0, seen: int | None = None) -> Admit:
        """The entry; with ``wait`` the answer comes once its version differs from ``seen``
        (a long poll), or after ``wait`` seconds."""
        params = _params(wait=wait or None, seen=seen if wait else None)
        return self._call("GET", f"/admits/{_seg(admit_id)}", Admit, params=params or None,
                          timeout=wait + 10.0 if wait else None)

    def list_admits(self) -> list[Admit]:
        return self._call("GET", "/admits", list[Admit])

    def bind_admit(self, admit_id: str, pid: int, create_time: float) -> Admit:
        return self._call("POST", f"/admits/{_seg(admit_id)}/bind", Admit,
                          json={"pid": pid, "create_time": create_time})

    def report_serving(self, admit_id: str, url: str, requests_served: int) -> Admit:
        """A serving entry's report (``evaltui serve-policy``); the answer says whether it
        was released meanwhile."""
        return self._call("POST", f"/admits/{_seg(admit_id)}/serving", Admit,
                          json={"url": url, "requests_served": requests_served})

    def release_admit(self, admit_id: str) -> Admit:
        return self._call("DELETE", f"/admits/{_seg(admit_id)}", Admit)

    # ---- events -------------------------------------------------------------------------
    def events(self, run_id: str | None = None, last_event_id: int | None = None,
               on_open: Callable[[Callable[[], None]], None] | None = None
               ) -> Iterator[ServerEvent]:
        """Server-sent events until the backend ends the stream (or ``close()`` on the
        generator). The server's heartbeats bound how long one read may block.

        ``on_open(abort)`` is called once the stream is accepted; ``abort()`` ends it from
        any thread (the reading thread then gets BackendUnavailable), which closing the
        generator or the client cannot do while a read blocks.
        """
        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
        timeout = httpx.Timeout(10.0, read=60.0)
        try:
            with self._http.stream("GET", "/events", params=_params(run_id=run_id),
                                   headers=headers, timeout=timeout) as response:
                if response.status_code != 200:
                    response.read()
                    self._raise(response)
                if on_open is not None:
                    on_open(lambda: _shutdown(response))
                yield from iter_sse(response.iter_lines())
        except httpx.TransportError as exc:
            raise self._unavailable(exc) from None

    # ---- plumbing -----------------------------------------------------------------------
    def _call(self, method: str, path: str, model: type[T] | Any, *,
              json: Any = None, params: dict[str, Any] | None = None,
              timeout: float | None = None, content: bytes | None = None,
              headers: dict[str, str] | None = None) -> Any:
        try:
            response = self._http.request(
                method, path, json=json, params=params, content=content, headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout)
        except httpx.TransportError as exc:
            raise self._unavailable(exc) from None
        if response.status_code >= 400:
            self._raise(response)
        try:
            if isinstance(model, type) and issubclass(model, BaseModel):
                return model.model_validate_json(response.content)
            return TypeAdapter(model).validate_json(response.content)
        except ValidationError as exc:
            raise BackendUnavailable(f"{self.base_url} answered {method} {path} with something "
                                     f"that is not the evaltui API ({exc.error_count()} "
                                     "invalid fields); is it an evaltui backend?") from None

    def _unavailable(self, exc: Exception) -> BackendUnavailable:
        if isinstance(exc, httpx.TimeoutException):
            return BackendTimeout(f"the backend at {self.base_url} did not answer in time "
                                  f"({type(exc).__name__})")
        return BackendUnavailable(f"no backend at {self.base_url} (start one with `evaltui "
                                  f"serve`, or set {URL_ENV})")

    def _raise(self, response: httpx.Response) -> None:
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = {}
        detail = body.get("detail") if isinstance(body, dict) else None
        field = body.get("field") if isinstance(body, dict) else None
        message = str(detail) if detail else f"HTTP {status}"
        if status == 401:
            if settings().token:
                where = f"the token comes from ${TOKEN_ENV}"
            else:
                path = self.token_file or token_path()
                where = f"token file is {path}" + ("" if self._token else " (missing)")
            raise AuthError(f"token rejected by {self.base_url}; {where}", status)
        if status == 404:
            raise NotFound(message, status)
        if status == 409:
            raise Conflict(message, status)
        if status in (400, 413, 422):
            raise InvalidRequest(message, status, field if isinstance(field, str) else None)
        raise ApiError(f"{self.base_url}: {message}", status)


def _shutdown(response: httpx.Response) -> None:
    """Shut the response's socket down: this wakes a read blocked on it in another thread
    (closing the socket would not, on Linux)."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        with suppress(OSError):  # already closed by the peer or by the reader
            sock.shutdown(socket.SHUT_RDWR)


def _params(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None}


def _seg(value: str) -> str:
    """One path segment, escaped (a run id with '/' must stay one segment, and 404)."""
    return quote(str(value), safe="")
