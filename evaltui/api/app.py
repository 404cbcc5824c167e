"""The HTTP API of a JobScheduler (DESIGN §7): ``make_api(scheduler, token) -> FastAPI``.

Everything is under ``/api/eval/v2/``. Every path but ``/healthz`` needs the bearer
token, checked by an ASGI gate before routing or body parsing, so an unauthenticated
request learns nothing but 401 (``/openapi.json`` included). Bodies over the limit get
413 before the app reads them. Errors always have the ``ErrorBody`` shape.

The app never starts or stops the scheduler: its owner does (``evaltui serve``, or the
TUI that embeds a scheduler and serves it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from evaltui import __version__
from evaltui.api import admits as admit_routes
from evaltui.api import resources, runs
from evaltui.api import sets as set_routes
from evaltui.api.auth import token_matches
from evaltui.api.context import ERRORS, ApiContext, ApiFailure, error_response, json_response
from evaltui.api.events import EventHub
from evaltui.api.limits import DEFAULT_MAX_BODY, BodyLimit, error_reply
from evaltui.api.models import API_PREFIX, Health
from evaltui.api.runfiles import NotFoundError, RunFiles
from evaltui.api.runlist import RunList
from evaltui.api.setdrivers import SetDrivers
from evaltui.contract.setspec import SetFileError
from evaltui.contract.spec import SpecError
from evaltui.scheduler.admits.queue import AdmitNotFound, AdmitQueue
from evaltui.scheduler.core import RunNotFound
from evaltui.scheduler.scheduler import JobScheduler

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", f"{API_PREFIX}/healthz"})
_bearer = HTTPBearer(auto_error=False, description="the token in the state dir's `token` file "
                     "(the ASGI gate enforces it; this declares it in the OpenAPI)")


def make_api(scheduler: JobScheduler, token: str, *, admits: AdmitQueue | None = None,
             max_body_bytes: int = DEFAULT_MAX_BODY, heartbeat_sec: float = 15.0) -> FastAPI:
    """The FastAPI app over ``scheduler``; ``admits`` adds the admit-entry routes."""
    hub = EventHub(heartbeat_sec=heartbeat_sec)
    files = RunFiles(scheduler.runs_root)
    ctx = ApiContext(scheduler=scheduler, files=files, hub=hub, token=token,
                     runs=RunList(scheduler),
                     admits=admits, sets=SetDrivers(scheduler, hub.publish))
    ctx.detach.append(ctx.sets.close)
    scheduler.add_listener(hub.on_scheduler_event)
    ctx.detach.append(lambda: scheduler.remove_listener(hub.on_scheduler_event))
    if admits is not None:
        admits.add_listener(hub.on_admit)
        ctx.detach.append(lambda: admits.remove_listener(hub.on_admit))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        hub.close()
        for undo in ctx.detach:
            undo()

    app = FastAPI(title="evaltui", version=__version__, lifespan=lifespan, openapi_url=None,
                  docs_url=None, redoc_url=None, redirect_slashes=False,
                  description="Queue, admission and results of evaltui eval runs.")
    app.state.ctx = ctx
    secured = [Security(_bearer)]
    app.include_router(runs.router, prefix=API_PREFIX, dependencies=secured)
    app.include_router(resources.router, prefix=API_PREFIX, dependencies=secured)
    app.include_router(set_routes.router, prefix=API_PREFIX, dependencies=secured)
    if admits is not None:
        app.include_router(admit_routes.router, prefix=API_PREFIX, dependencies=secured)
    _add_events(app, hub, secured)
    _add_open_routes(app)
    _add_error_handlers(app)
    # Added last = outermost: the token gate runs before the body is even read.
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(TokenGate, token=token)
    return app


class TokenGate:
    """ASGI middleware: 401 for any request without ``Authorization: Bearer {token}``,
    except the open health check."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            header = None
            for name, value in scope.get("headers", ()):
                if name == b"authorization":
                    header = value.decode("latin-1")
                    break
            if not token_matches(self.token, header):
                await error_reply(send, 401, "missing or wrong bearer token (see the `token` "
                                  "file in the backend's state dir)",
                                  extra_headers=[(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


def _add_events(app: FastAPI, hub: EventHub, secured: list[Any]) -> None:
    @app.get(f"{API_PREFIX}/events", tags=["events"], dependencies=secured,
             response_class=StreamingResponse,
             responses={**ERRORS,
                        200: {"content": {"text/event-stream": {}},
                              "description": "events `run`, `episode`, `nodeset`, `admit`, "
                              "`set`, `dropped`; `id:` lines for Last-Event-ID"}})
    async def events(run_id: Annotated[str | None, Query(max_length=64)] = None,
                     last_event_id: Annotated[str | None, Header(max_length=32)] = None
                     ) -> StreamingResponse:
        """Server-sent events: run state changes, finished episodes, nodeset and admit
        changes (``?run_id=`` keeps one run's)."""
        last = int(last_event_id) if last_event_id and last_event_id.isdigit() else None
        sub = hub.subscribe(run_id=run_id, last_id=last)
        return StreamingResponse(hub.stream(sub), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})


def _add_open_routes(app: FastAPI) -> None:
    @app.get("/healthz", response_model=Health, tags=["health"])
    @app.get(f"{API_PREFIX}/healthz", response_model=Health, tags=["health"],
             include_in_schema=False)
    def healthz() -> Health:
        """Liveness; the only route without a token."""
        return Health(version=__version__)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> Response:
        return json_response(request.app.openapi())


def _add_error_handlers(app: FastAPI) -> None:
    # The errors of a lookup or a user's file, whichever route meets them: one answer each.
    @app.exception_handler(ApiFailure)
    async def failure(_request: Request, exc: ApiFailure) -> Response:
        return error_response(exc)

    @app.exception_handler(RunNotFound)
    async def no_run(_request: Request, exc: RunNotFound) -> Response:
        return error_response(ApiFailure(404, f"no run {exc.args[0]!r}"))

    @app.exception_handler(AdmitNotFound)
    async def no_admit(_request: Request, exc: AdmitNotFound) -> Response:
        return error_response(ApiFailure(404, f"no admit entry {exc.args[0]!r}"))

    @app.exception_handler(NotFoundError)
    async def not_found(_request: Request, exc: NotFoundError) -> Response:
        return error_response(ApiFailure(404, str(exc)))

    @app.exception_handler(SpecError)
    @app.exception_handler(SetFileError)
    async def bad_field(_request: Request, exc: SpecError | SetFileError) -> Response:
        return error_response(ApiFailure(422, str(exc), exc.field))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> Response:
        errs = exc.errors()
        first = errs[0] if errs else {"loc": (), "msg": "invalid request"}
        if first.get("type") == "json_invalid":
            ctx = first.get("ctx")
            reason = ctx.get("error", "") if isinstance(ctx, dict) else ""
            return error_response(ApiFailure(422, f"the body is not valid JSON: {reason}"))
        loc = [str(p) for p in first.get("loc", ())]
        if loc and loc[0] == "body":
            loc = loc[1:]
        field = ".".join(loc) or None
        msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        return error_response(ApiFailure(422, f"{field}: {msg}" if field else msg, field))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        return error_response(ApiFailure(exc.status_code, str(exc.detail),
                                         headers=dict(exc.headers or {})))

    @app.exception_handler(Exception)
    async def crash(_request: Request, exc: Exception) -> Response:
        log.exception("API request failed")
        return error_response(ApiFailure(500, f"internal error: {type(exc).__name__}: {exc}"))

