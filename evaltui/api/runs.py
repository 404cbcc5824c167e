"""Routes of runs: submit, list, show, cancel, resume, episodes and their logs."""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response

from evaltui.api.context import ApiContext, ApiFailure, context, errors, json_response
from evaltui.api.models import EpisodeRow, LogPage, PriorityRequest, Run, RunRef, SubmitRef
from evaltui.api.runfiles import BadOffset
from evaltui.contract.spec import JobSpec
from evaltui.contract.states import RunState
from evaltui.rundir.diskfull import is_disk_full
from evaltui.scheduler.core import NotQueued, NotResumable
from evaltui.slurm.commands import SlurmError

router = APIRouter(tags=["runs"])
Ctx = Annotated[ApiContext, Depends(context)]
RunId = Annotated[str, Path(max_length=64, description="a run dir name, YYYYmmdd_HHMMSS[_N]")]
Index = Annotated[int, Path(ge=0, le=10_000_000, description="episode_index")]


@router.post("/runs", status_code=201, response_model=SubmitRef, responses=errors(507))
def submit(spec: JobSpec, ctx: Ctx) -> SubmitRef:
    """Validate a JobSpec and queue it (DESIGN §4): the next tick admits it if it fits."""
    workspace = spec.active_workspace_dir
    if workspace is not None and not (os.path.isabs(workspace) and os.path.isdir(workspace)):
        # The server puts it on sys.path to import the graph's nodesets: it must be a
        # directory of this machine, not a path relative to some client's cwd.
        raise ApiFailure(422, "active_workspace_dir: must be an absolute path to an existing "
                         "directory on the backend's machine", "active_workspace_dir")
    try:
        submitted = ctx.scheduler.submit(spec)  # parsed by FastAPI: checked, not re-parsed
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        # Nothing was left behind (write_run removes its run dir): the client may retry.
        raise ApiFailure(507, f"disk full: cannot write a run dir under {ctx.scheduler.outputs}"
                         f" ({exc.strerror or exc}); nothing was queued") from None
    return SubmitRef(run_id=submitted.run_id, state=submitted.state,
                     warnings=list(submitted.warnings), notes=list(submitted.notes))


@router.get("/runs", response_model=list[Run], responses=errors())
def list_runs(ctx: Ctx, state: RunState | None = None,
              limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
              offset: Annotated[int, Query(ge=0)] = 0) -> Response:
    """Runs, newest first (``?state=`` keeps one state); ``X-Total-Count`` before paging."""
    runs = ctx.runs.runs(state)
    page = runs[offset:offset + limit if limit is not None else None]
    return json_response(page, headers={"X-Total-Count": str(len(runs))})


@router.get("/runs/{run_id}", response_model=Run, responses=errors(404))
def get_run(run_id: RunId, ctx: Ctx) -> Response:
    """State, scheduler record and summary (without rows) of one run."""
    return json_response(_info(ctx, run_id).model_dump(mode="json"))


@router.get("/runs/{run_id}/spec", response_model=dict[str, Any], responses=errors(404))
def get_spec(run_id: RunId, ctx: Ctx) -> Response:
    """The run's spec.json, as submitted (plus the shared URLs it was given)."""
    ctx.files.run_dir(run_id)
    spec = ctx.files.spec(run_id)
    if spec is None:
        raise ApiFailure(404, f"run {run_id} has no readable spec.json")
    return json_response(spec)


@router.post("/runs/{run_id}/cancel", response_model=RunRef, responses=errors(404, 409))
def cancel(run_id: RunId, ctx: Ctx) -> RunRef:
    """Cancel a queued run at once, or a running one (SIGTERM, SIGKILL after a grace)."""
    before = _info(ctx, run_id).state
    if before.terminal:
        raise ApiFailure(409, f"run {run_id} is already {before.value}")
    try:
        state = ctx.scheduler.cancel(run_id)
    except SlurmError as exc:  # a Slurm run whose scancel failed: Slurm's one line
        raise ApiFailure(502, f"run {run_id}: {exc}") from None
    return RunRef(run_id=run_id, state=state)


@router.post("/runs/{run_id}/resume", response_model=RunRef, responses=errors(404, 409))
def resume(run_id: RunId, ctx: Ctx,
           more: Annotated[int | None, Query(ge=0)] = None) -> RunRef:
    """Queue again the episodes of a finished run that are not ``ok``, same run dir;
    ``more`` (a run stopped by its rule): that many more past the stop, 0 to the end."""
    ctx.files.run_dir(run_id)
    try:
        state = ctx.scheduler.resume(run_id, more)
    except NotResumable as exc:
        raise ApiFailure(409, str(exc)) from None
    return RunRef(run_id=run_id, state=state)


@router.post("/runs/{run_id}/priority", response_model=RunRef, responses=errors(404, 409))
def set_priority(run_id: RunId, body: PriorityRequest, ctx: Ctx) -> RunRef:
    """Give a queued run another priority (-100..100), moving it in the queue."""
    ctx.files.run_dir(run_id)
    try:
        state = ctx.scheduler.set_priority(run_id, body.priority)
    except NotQueued as exc:
        raise ApiFailure(409, str(exc)) from None
    return RunRef(run_id=run_id, state=state)


@router.get("/runs/{run_id}/episodes", response_model=list[EpisodeRow], responses=errors(404))
def episodes(run_id: RunId, ctx: Ctx,
             status: Annotated[str | None, Query(max_length=32)] = None,
             limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
             offset: Annotated[int, Query(ge=0)] = 0) -> Response:
    """Finished episodes' rows in episode order (``?status=ok|error|timeout|cancelled``)."""
    rows = ctx.files.episodes(run_id)
    if status is not None:
        rows = [r for r in rows if r.get("status") == status]
    page = rows[offset:offset + limit if limit is not None else None]
    return json_response(page, headers={"X-Total-Count": str(len(rows))})


@router.get("/runs/{run_id}/episodes/{index}", response_model=EpisodeRow,
            responses=errors(404))
def episode(run_id: RunId, index: Index, ctx: Ctx) -> Response:
    """One episode's episode.json."""
    return json_response(ctx.files.episode(run_id, index))


@router.get("/runs/{run_id}/episodes/{index}/log", response_model=LogPage,
            responses=errors(404))
def episode_log(run_id: RunId, index: Index, ctx: Ctx,
                offset: Annotated[int, Query(ge=0, le=1 << 50)] = 0,
                limit: Annotated[int, Query(ge=1, le=10_000)] = 500) -> Response:
    """Complete log.jsonl records from a byte ``offset`` (0, or a page's ``next_offset``)."""
    try:
        records, next_offset, complete = ctx.files.log_page(run_id, index, offset, limit)
    except BadOffset as exc:
        raise ApiFailure(422, str(exc), "offset") from None
    return json_response({"run_id": run_id, "episode_index": index, "offset": offset,
                          "next_offset": next_offset, "complete": complete,
                          "records": [{"offset": o, "record": r} for o, r in records]})


# ---- helpers --------------------------------------------------------------------------------


def _info(ctx: ApiContext, run_id: str) -> Run:
    ctx.files.run_dir(run_id)  # a malformed id never reaches the scheduler's path joins
    return ctx.scheduler.get_run(run_id)
