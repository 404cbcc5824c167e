"""What every route handler reaches: the scheduler, run files, admits, events, errors.

Handlers take an :class:`ApiContext` through ``Depends(context)``. Errors are raised as
:class:`ApiFailure` so that every error body has the same shape (``ErrorBody``:
``detail`` and the ``field`` at fault).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response

from evaltui.api.events import EventHub
from evaltui.api.models import ErrorBody
from evaltui.api.runfiles import RunFiles
from evaltui.api.runlist import RunList
from evaltui.api.setdrivers import SetDrivers
from evaltui.scheduler.admits.queue import AdmitQueue
from evaltui.scheduler.scheduler import JobScheduler


@dataclass
class ApiContext:
    """The app's collaborators (``app.state.ctx``)."""

    scheduler: JobScheduler
    files: RunFiles
    hub: EventHub
    token: str
    runs: RunList
    admits: AdmitQueue | None = None
    sets: SetDrivers | None = None
    """The sets this backend drives (``/sets`` routes)."""
    started_at: float = field(default_factory=time.time)
    detach: list[Callable[[], None]] = field(default_factory=list)
    """Undo the listener registrations when the app shuts down."""


class ApiFailure(Exception):
    """An error answer: HTTP status, message, and the request field at fault."""

    def __init__(self, status: int, detail: str, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.field = field
        self.headers = headers


def context(request: Request) -> ApiContext:
    """FastAPI dependency: the app's context."""
    ctx: ApiContext = request.app.state.ctx
    return ctx


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None
                  ) -> Response:
    """A JSON answer serialised by orjson, skipping FastAPI's per-field validation pass
    (big lists: ``GET /runs`` with thousands of runs)."""
    return Response(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS
                                 | orjson.OPT_SERIALIZE_NUMPY),
                    status_code=status, media_type="application/json", headers=headers)


def error_response(failure: ApiFailure) -> Response:
    body = ErrorBody(detail=failure.detail, field=failure.field).model_dump()
    return json_response(body, failure.status, failure.headers)


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "no token, or a wrong one"},
    413: {"model": ErrorBody, "description": "request body over the size limit"},
    422: {"model": ErrorBody, "description": "invalid request; `field` names the culprit"},
}
"""Error answers every authenticated route can give (documented in the OpenAPI)."""


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for ``codes`` plus the common ones."""
    described = {404: "no such run (or episode, nodeset, admit entry)",
                 409: "conflicts with the current state"}
    out = dict(ERRORS)
    for code in codes:
        out[code] = {"model": ErrorBody, "description": described.get(code, "error")}
    return out
