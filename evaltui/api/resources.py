"""Routes of the machine: queue, resources, shared nodesets, interactive lock, backend info."""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from evaltui import __version__
from evaltui.api.context import ApiContext, ApiFailure, context, errors, json_response
from evaltui.api.models import (
    BackendInfo,
    Lock,
    LockRequest,
    Nodeset,
    NodesetLoad,
    QueueEntry,
    Resources,
    Unlocked,
)
from evaltui.contract.settings import settings
from evaltui.engine.nodes import import_impl
from evaltui.rundir.layout import state_dir
from evaltui.scheduler.lock import LockHeldError
from evaltui.scheduler.reads import lock_view
from evaltui.scheduler.shared.nodesets import NodesetError

router = APIRouter(tags=["machine"])
Ctx = Annotated[ApiContext, Depends(context)]
Name = Annotated[str, Path(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")]


@router.get("/info", response_model=BackendInfo, responses=errors())
def info(ctx: Ctx) -> BackendInfo:
    """Which backend this is: version, process, outputs root, state dir."""
    sched = ctx.scheduler
    return BackendInfo(version=__version__, pid=os.getpid(), outputs=str(sched.outputs),
                       runs_root=str(sched.runs_root), state_dir=str(state_dir()),
                       started_at=ctx.started_at,
                       fake_gpus=bool(settings().fake_gpus),
                       admits=ctx.admits is not None)


@router.get("/queue", response_model=list[QueueEntry], responses=errors())
def queue(ctx: Ctx) -> Any:
    """Queued runs in admission order, each with its ``waiting_reason``."""
    return json_response([q.model_dump(mode="json") for q in ctx.scheduler.queue()])


@router.get("/resources", response_model=Resources, responses=errors())
def resources(ctx: Ctx) -> Any:
    """Per-GPU total/used/free/reserved, host RAM and CPU, the ledger, the lock."""
    return json_response(ctx.scheduler.resources().model_dump(mode="json"))


@router.get("/nodesets", response_model=list[Nodeset], responses=errors())
def nodesets(ctx: Ctx) -> Any:
    """Shared nodesets hosted by the scheduler, with refcounts and holders."""
    return json_response([ns.model_dump(mode="json") for ns in ctx.scheduler.nodesets()])


@router.post("/nodesets/{name}/load", response_model=Nodeset, responses=errors())
def load_nodeset(name: Name, body: NodesetLoad, ctx: Ctx) -> Any:
    """Host a shared nodeset by hand; it stays loaded until unloaded."""
    try:
        import_impl(body.impl)  # a clear 422 here beats a host process failing to start
    except Exception as exc:  # importing runs arbitrary module code: anything may raise
        raise ApiFailure(422, f"impl: {exc}", "impl") from None
    try:
        ns = ctx.scheduler.load_nodeset(name, body.impl, body.params, body.gpu)
    except NodesetError as exc:
        raise ApiFailure(422, str(exc)) from None
    return json_response(ns.model_dump(mode="json"))


@router.post("/nodesets/{name}/unload", response_model=Nodeset, responses=errors(404, 409))
def unload_nodeset(name: Name, ctx: Ctx, force: bool = False) -> Any:
    """Stop a shared nodeset; refused while runs use it unless ``?force=true``."""
    if all(ns.name != name for ns in ctx.scheduler.nodesets()):
        raise ApiFailure(404, f"no shared nodeset named {name!r} is loaded")
    try:
        ns = ctx.scheduler.unload_nodeset(name, force=force)
    except NodesetError as exc:
        raise ApiFailure(409, str(exc)) from None
    return json_response(ns.model_dump(mode="json"))


@router.post("/lock", response_model=Lock, responses=errors(409))
def lock(body: LockRequest, ctx: Ctx) -> Any:
    """Take (or extend, for the same owner) the interactive lock: nothing is admitted
    while it is held, until it is released or its TTL runs out."""
    try:
        held = ctx.scheduler.lock(body.owner, body.ttl_sec)
    except LockHeldError as exc:
        raise ApiFailure(409, str(exc)) from None
    except ValueError as exc:
        raise ApiFailure(422, str(exc)) from None
    return json_response(lock_view(held).model_dump(mode="json"))


@router.delete("/lock", response_model=Unlocked, responses=errors())
def unlock(ctx: Ctx, owner: Annotated[str | None, Query(max_length=200)] = None) -> Unlocked:
    """Release the lock (only ``owner``'s if given); ``released`` says if one was dropped."""
    released = ctx.scheduler.unlock(owner)
    if ctx.admits is not None:
        ctx.admits.nudge()
    return Unlocked(released=released)
