"""``WebsocketPolicy``: a policy behind an openpi-style websocket server, as a nodeset.

Give the graph's policy nodeset ``"impl": "evaltui.nodesets.openpi:WebsocketPolicy"``
(``"parallelism": "replicated"``: each worker holds its own connection) and the params
of DESIGN §13::

    "params": {"url": "ws://127.0.0.1:8000", "api_key_env": "POLICY_KEY",
               "obs_keys": {"obs/image": "observation/image", "obs/mission": "prompt"},
               "action_key": "actions", "replan_every": 5, "episode_control": true}

- ``obs_keys`` maps paths into the node's inputs (``obs``, ``obs/image``) onto the
  server's request keys (``/`` nests: ``observation/image``). Default: the request is
  the node's inputs as they are, ``{"obs": {...}}`` (what ``evaltui serve-policy`` takes).
- ``action_key``: where in the reply the action is (``/`` nests).
- ``replan_every``: the reply is a chunk of actions ``[H, ...]``; its first
  ``min(replan_every, H)`` are executed one per step before the server is asked again
  (openpi's LIBERO client). Default: the reply is one action.
- ``episode_control``: send ``episode_start`` (with the episode id) before each episode
  and ``episode_end`` after it (sent when the next one starts, or at close).
- ``timeout_s``: the longest a reply may take. No reply by then: the connection is
  dropped and the episode ends ``timeout``. A reply that comes but later than the run's
  ``per_step_budget_sec`` ends it ``timeout`` too (the loop's own check).

Faults end the episode, never the run: a text frame (the server's error) is an
``error`` carrying its first line; a lost connection is an ``error`` (retried per
``max_episode_retries``), and the next episode reconnects with back-off. A server that
cannot be reached, or that refuses the API key, when the run starts is refused at spec
check (one line, exit 2, nothing run). The metadata frame and per-step round trips are
kept in the run dir (:mod:`evaltui.nodesets.serverrecord`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field
from websockets.exceptions import ConnectionClosed, InvalidStatus, InvalidURI, WebSocketException
from websockets.sync.client import ClientConnection, connect

from evaltui.engine.episode.loop import StepTimeout
from evaltui.engine.hosting import openpiwire as wire
from evaltui.nodesets.remotepolicy import PolicyServerError, RemotePolicy
from evaltui.nodesets.serverrecord import record_metadata

BACKOFF_FIRST_SEC, BACKOFF_MAX_SEC = 0.1, 2.0


class PolicyServerRefused(PolicyServerError):
    """The server refused the connection (a wrong or missing API key): never retried."""


def api_key_from(api_key_env: str | None) -> str | None:
    """The API key named by ``api_key_env``; ValueError (one line) if it is unset."""
    if not api_key_env:
        return None
    key = os.environ.get(api_key_env, "")
    if not key:
        raise ValueError(f"api_key_env: the environment variable {api_key_env} is not set")
    return key


def open_connection(url: str, api_key: str | None, timeout: float
                    ) -> tuple[ClientConnection, Any]:
    """Connect and read the metadata frame; one-line errors (OSError when unreachable)."""
    headers = wire.auth_header(api_key) if api_key else None
    try:
        # Entered as a context manager (websockets >= 17.1 warns otherwise); the nodeset
        # holds it across episodes and closes it itself. No keepalive pings: a server
        # whose forward pass blocks its loop longer than the ping timeout would be
        # dropped, and ``timeout_s`` already bounds every request.
        ws = connect(url, additional_headers=headers, open_timeout=timeout,
                     compression=None, max_size=None, ping_interval=None).__enter__()
    except InvalidStatus as exc:
        code = exc.response.status_code
        if code in (401, 403):
            raise PolicyServerRefused(f"policy server at {url} refused the connection "
                                      f"(HTTP {code}): wrong or missing API key") from None
        raise PolicyServerError(f"policy server at {url} answered HTTP {code}") from None
    except InvalidURI as exc:
        raise ValueError(f"url: {exc}") from None
    except (OSError, TimeoutError, WebSocketException) as exc:
        raise OSError(f"cannot reach the policy server at {url}: "
                      f"{exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
                      ) from None
    try:
        first = ws.recv(timeout=timeout)
    except (TimeoutError, ConnectionClosed) as exc:
        ws.close()
        raise PolicyServerError(f"policy server at {url} sent no metadata frame: {exc}"
                                ) from None
    if isinstance(first, str):
        ws.close()
        raise PolicyServerError(f"policy server at {url}: {wire.error_line(first)}")
    try:
        return ws, wire.unpack(first)
    except wire.WireError as exc:
        ws.close()
        raise PolicyServerError(f"policy server at {url}: metadata frame: {exc}") from None


class WebsocketPolicy(RemotePolicy):
    """A policy served over openpi's websocket dialect; see the module docstring."""

    @classmethod
    def check_params(cls, params: Mapping[str, Any]) -> None:
        """At spec check: the server answers, with the key given, before anything runs."""
        url = str(params.get("url") or "")
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"url: must start with ws:// or wss://, got {url!r}")
        key = api_key_from(params.get("api_key_env"))
        try:
            ws, _ = open_connection(url, key, float(params.get("connect_timeout_s") or 5.0))
        except (OSError, PolicyServerError) as exc:
            raise ValueError(f"url: {exc}") from None
        ws.close()

    def __init__(self, url: str, api_key_env: str | None = None,
                 obs_keys: dict[str, str] | None = None, action_key: str = "action",
                 replan_every: Annotated[int, Field(ge=1)] | None = None,
                 episode_control: bool = False,
                 timeout_s: Annotated[float, Field(gt=0)] = 60.0,
                 connect_timeout_s: Annotated[float, Field(gt=0)] = 5.0,
                 connect_tries: Annotated[int, Field(ge=1)] = 6) -> None:
        self.url = url
        self.api_key = api_key_from(api_key_env)
        self.setup(obs_keys, action_key, replan_every)
        self.episode_control = episode_control
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self.connect_tries = connect_tries
        self.metadata: Any = None
        self._ws: ClientConnection | None = None
        self._episode_open = False

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        super().begin_episode(episode)
        if not self.episode_control:
            return
        self._end_episode()
        self.ask(wire.control(wire.EPISODE_START,
                              **{wire.EPISODE_ID_KEY: episode.get("episode_id")}))
        self._episode_open = True

    def close(self) -> None:
        super().close()
        with contextlib.suppress(Exception):  # closing: the server may be gone already
            if self._ws is not None:
                self._end_episode()
        self._drop()

    def _end_episode(self) -> None:
        if self._episode_open:
            self._episode_open = False
            self.ask(wire.control(wire.EPISODE_END))

    def ask(self, request: Mapping[str, Any]) -> Any:
        ws = self._connected()
        frame = wire.pack(request)
        try:
            ws.send(frame)
            reply = ws.recv(timeout=self.timeout_s)
        except TimeoutError:
            self._drop()  # its late reply would answer the next request
            raise StepTimeout(f"policy server at {self.url} sent no reply within "
                              f"timeout_s {self.timeout_s:g} s") from None
        except ConnectionClosed as exc:
            self._drop()
            raise PolicyServerError(f"policy server at {self.url} closed the connection "
                                    f"mid-request ({exc})") from None
        if isinstance(reply, str):
            self._drop()  # openpi's server closes after an error frame
            raise PolicyServerError(f"policy server error: {wire.error_line(reply)}")
        try:
            return wire.unpack(reply)
        except wire.WireError as exc:
            self._drop()
            raise PolicyServerError(f"policy server at {self.url}: {exc}") from None

    def _connected(self) -> ClientConnection:
        """The open connection, (re)connecting with exponential back-off."""
        if self._ws is not None:
            return self._ws
        delay, last = BACKOFF_FIRST_SEC, ""
        for attempt in range(self.connect_tries):
            if attempt:
                time.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX_SEC)
            try:
                self._ws, self.metadata = open_connection(self.url, self.api_key,
                                                          self.connect_timeout_s)
            except OSError as exc:
                last = str(exc)
                continue
            record_metadata(self.url, self.metadata)
            return self._ws
        raise PolicyServerError(f"{last} (after {self.connect_tries} tries)")

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        self._chunk = []
        self._episode_open = False
        if ws is not None:
            with contextlib.suppress(Exception):  # already broken
                ws.close()
