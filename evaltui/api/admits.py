"""Routes of admit entries: ``evaltui run`` queues its command here (an addition to
DESIGN §7; see evaltui.scheduler.admits.queue)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from evaltui.api.context import ApiContext, ApiFailure, context, errors, json_response
from evaltui.api.models import Admit, AdmitBind, AdmitRequest, AdmitServing
from evaltui.contract.pidref import PidRef
from evaltui.scheduler.admits.queue import AdmitError, AdmitQueue, HolderNotRunning

router = APIRouter(tags=["admits"])
Ctx = Annotated[ApiContext, Depends(context)]
AdmitId = Annotated[str, Path(max_length=64)]


@router.post("/admits", status_code=201, response_model=Admit, responses=errors())
def create(body: AdmitRequest, ctx: Ctx) -> Any:
    """Queue a command for admission; the reservation lives with ``holder_pid``."""
    admits = _queue(ctx)
    try:
        info = admits.add(body.profile, PidRef(body.holder_pid, body.holder_create_time),
                          vram_mb=body.marginal_vram_mb, exclusive=body.exclusive_gpu,
                          priority=body.priority, command=body.command,
                          cpus=body.cpus or 0.0, kind=body.kind, ram_mb=body.ram_mb or 0)
    except AdmitError as exc:
        raise ApiFailure(422, str(exc), "holder_pid") from None
    return json_response(info.model_dump(mode="json"), 201)


@router.get("/admits", response_model=list[Admit], responses=errors())
def list_admits(ctx: Ctx) -> Any:
    """Waiting entries in admission order, then admitted ones, then recently released."""
    return json_response([a.model_dump(mode="json") for a in _queue(ctx).all()])


@router.get("/admits/{admit_id}", response_model=Admit, responses=errors(404))
def get(admit_id: AdmitId, ctx: Ctx,
        wait: Annotated[float, Query(ge=0, le=30)] = 0,
        seen: Annotated[int | None, Query(ge=0)] = None) -> Any:
    """One entry. With ``?wait=S`` the answer comes once its ``version`` differs from
    ``seen`` (default: its version now), or after S seconds: a long poll."""
    admits = _queue(ctx)
    info = admits.wait(admit_id, wait, seen) if wait else admits.get(admit_id)
    return json_response(info.model_dump(mode="json"))


@router.post("/admits/{admit_id}/bind", response_model=Admit, responses=errors(404, 409))
def bind(admit_id: AdmitId, body: AdmitBind, ctx: Ctx) -> Any:
    """Hand the entry's reservation to the command's process (it leads its own session)."""
    try:
        info = _queue(ctx).bind(admit_id, PidRef(body.pid, body.create_time))
    except HolderNotRunning as exc:
        raise ApiFailure(422, str(exc), "pid") from None
    except AdmitError as exc:
        raise ApiFailure(409, str(exc)) from None
    return json_response(info.model_dump(mode="json"))


@router.post("/admits/{admit_id}/serving", response_model=Admit, responses=errors(404))
def serving(admit_id: AdmitId, body: AdmitServing, ctx: Ctx) -> Any:
    """A serving entry (``evaltui serve-policy``) says where it listens and what it has
    answered; the reply's ``state`` tells it whether it was released (cancelled)."""
    info = _queue(ctx).serving(admit_id, body.url, body.requests_served)
    return json_response(info.model_dump(mode="json"))


@router.delete("/admits/{admit_id}", response_model=Admit, responses=errors(404))
def release(admit_id: AdmitId, ctx: Ctx) -> Any:
    """Leave the queue, or release the reservation (idempotent)."""
    info = _queue(ctx).release(admit_id)
    return json_response(info.model_dump(mode="json"))


def _queue(ctx: ApiContext) -> AdmitQueue:
    if ctx.admits is None:
        raise ApiFailure(404, "this backend queues no admit entries (start it with "
                         "`evaltui serve`)")
    return ctx.admits
