"""``start_backend()``: a scheduler's HTTP API and admit queue, started and stopped together.

The one place that wires a backend: ``evaltui serve``, the TUI and ``evaltui demo``
(which embed a scheduler) and the API tests all call it. The scheduler itself stays
its caller's: ``serve`` starts and stops it around the backend, the TUI's
EmbeddedBackend does the same. No Textual here, so ``serve`` never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaltui.api.app import make_api
from evaltui.api.auth import load_or_create_token
from evaltui.api.limits import DEFAULT_MAX_BODY
from evaltui.api.server import ApiServer
from evaltui.scheduler.admits.queue import AdmitQueue
from evaltui.scheduler.scheduler import JobScheduler


@dataclass
class ServedBackend:
    """A scheduler's API server and admit queue; ``stop()`` ends both (not the scheduler)."""

    scheduler: JobScheduler
    admits: AdmitQueue
    server: ApiServer
    token: str

    @property
    def url(self) -> str:
        """``http://host:port``, with the real port (also when asked for port 0)."""
        return self.server.url

    def stop(self) -> None:
        """Stop serving (event streams end, requests in flight finish)."""
        self.server.stop()

    def __enter__(self) -> ServedBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_backend(scheduler: JobScheduler, *, host: str = "127.0.0.1", port: int = 8000,
                  token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY,
                  log_level: str = "warning",
                  **app_kwargs: Any) -> ServedBackend:
    """Serve ``scheduler`` on ``host:port`` (0: any free port) with its admit queue.

    ``token`` defaults to the state dir's token file (created if missing; TokenError if
    unusable). Raises OSError when the port cannot be bound and RuntimeError when uvicorn
    does not start; nothing is left running then. ``app_kwargs`` go to ``make_api``.
    """
    if token is None:
        token = load_or_create_token()
    admits = scheduler.admits  # ticked by the scheduler's own loop, with its eval runs
    app = make_api(scheduler, token, admits=admits, max_body_bytes=max_body_bytes,
                   **app_kwargs)
    server = ApiServer(app, host, port, log_level=log_level)
    try:
        server.start()
    except BaseException:
        for undo in app.state.ctx.detach:  # the lifespan that would detach never ran
            undo()
        raise
    return ServedBackend(scheduler, admits, server, token)
