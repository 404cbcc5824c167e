"""Routes of experiment sets (DESIGN §12): create, list, show with the table, cancel, resume.

``POST /sets`` takes a set file (JSON, or YAML text with a ``yaml``/``text`` content
type), checks it exactly as ``evaltui set run`` does (a 422 whose ``field`` is the set
file's field at fault; nothing written on refusal) and starts a driver
(:mod:`evaltui.api.setdrivers`) that submits the members to this backend's scheduler.
Paths in the file are relative to ``?base_dir=`` (an absolute directory of the backend's
machine; default the backend's working directory). A set id is only ever joined under
``outputs/eval_sets`` once it is a well-formed set name and its directory does not lead
out of that root: anything else is a 404.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from contextlib import suppress
from pathlib import Path as FsPath
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Depends, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from evaltui.api.context import ApiContext, ApiFailure, context, errors, json_response
from evaltui.api.setdrivers import SetBusyHere, SetDrivers
from evaltui.contract.setspec import SET_FILENAME, SetFileError, SetRecord, is_set_name
from evaltui.engine.executor.kinds import executor_kind
from evaltui.scheduler.scheduler import RunNotFound
from evaltui.sets.arraytarget import SlurmArrayTarget
from evaltui.sets.dispatch import cancel_set
from evaltui.sets.plan import SetPlan, plan_data, plan_record
from evaltui.sets.runner import RunnerOptions
from evaltui.sets.setdir import SetBusy, SetDirError, read_set, sets_root
from evaltui.sets.table import build_table, table_json

router = APIRouter(tags=["sets"])
Ctx = Annotated[ApiContext, Depends(context)]
SetId = Annotated[str, Path(max_length=100, description="a set's name (its set dir)")]
MAX_SET_FILE_BYTES = 1 << 20
ARRAY_CANCEL_WAIT_SEC = 20.0
"""A Slurm set's cancel waits this long (at most) for its tasks to leave the queue."""


def runner_options(retries: Annotated[int, Query(ge=0, le=100)] = 0,
                   retry_backoff: Annotated[float, Query(ge=0, le=3600)] = 2.0,
                   max_error_rate: Annotated[float | None, Query(ge=0, le=1)] = None,
                   max_parallel: Annotated[int | None, Query(ge=1)] = None) -> RunnerOptions:
    """FastAPI dependency: how a set run treats failures, from the query."""
    return RunnerOptions(retries=retries, max_error_rate=max_error_rate,
                         backoff_sec=retry_backoff, max_parallel=max_parallel)


Options = Annotated[RunnerOptions, Depends(runner_options)]


def drivers(ctx: ApiContext) -> SetDrivers:
    assert ctx.sets is not None, "make_api adds the set drivers"
    return ctx.sets


@router.post("/sets", status_code=202, responses=errors(409))
async def create(request: Request, ctx: Ctx, options: Options,
                 base_dir: Annotated[str | None, Query(max_length=4096)] = None) -> Response:
    """Check a set file and run it: 202 once it is checked and set.json written; the
    members are then submitted to this backend's queue by the set's driver (again for an
    existing set: ``done`` members are reused, the rest continue); ``set`` events and
    ``GET /sets/{set_id}`` follow them."""
    data = _parse_body(await request.body(), request.headers.get("content-type", ""))
    base = _base_dir(base_dir)
    # Checking imports the graphs' nodesets and the first step submits: off the loop.
    return await run_in_threadpool(_create, ctx, data, base, options)


def _create(ctx: ApiContext, data: Any, base: FsPath, options: RunnerOptions) -> Response:
    plan = plan_data(data, base, ctx.scheduler.outputs, check=True)
    _not_an_array(plan)
    if _leaves_root(ctx, plan.set_id):
        raise ApiFailure(422, f"name: set dir {plan.set_id} is a symlink out of the outputs "
                         "root", "name")
    driver = _start(ctx, plan, options)
    return json_response({"set_id": plan.set_id, "name": plan.expansion.setfile.name,
                          "set_dir": str(plan.path), "warnings": plan.warnings,
                          "members": [_member_brief(m) for m in driver.first_members]}, 202)


@router.get("/sets", responses=errors())
def list_all(ctx: Ctx) -> Response:
    """Every set under the outputs root: its members' count per state, running or not."""
    out = []
    root = sets_root(ctx.scheduler.outputs)
    for child in sorted(root.iterdir()) if root.is_dir() else ():
        # By dir name, as GET /sets/{set_id} finds them; never through a symlink out.
        if not is_set_name(child.name) or _leaves_root(ctx, child.name):
            continue
        try:
            record = read_set(child)
        except SetDirError:
            continue
        out.append({"set_id": child.name, "name": record.name,
                    "members": len(record.members),
                    "states": dict(Counter(m.state.value for m in record.members)),
                    "running": drivers(ctx).running(record.set_id)})
    return json_response(out)


@router.get("/sets/{set_id}", responses=errors(404))
def get(set_id: SetId, ctx: Ctx,
        baseline: Annotated[str | None, Query(max_length=2000, description="a JSON object "
                                              "of axis values, or empty: the set file's")]
        = None) -> Response:
    """The set's members with their state and its table (``set show --format json``,
    read from the run dirs), plus ``running`` (this backend drives it now)."""
    record = _record(ctx, set_id)
    entry = _baseline(record, baseline)

    try:
        table = build_table(record, ctx.scheduler.outputs, baseline=entry)
    except (SetFileError, ValueError) as exc:
        raise ApiFailure(422, str(exc), "baseline") from None
    body = table_json(table)
    extra = {m.key: m for m in record.members}
    for member in body["members"]:
        rec = extra[member["key"]]
        member.update(attempts=rec.attempts, error=rec.error)
        if rec.run_id is not None:  # the scheduler's word over a file read mid-start
            with suppress(RunNotFound):  # its run dir is gone: set.json's state stands
                member["state"] = ctx.scheduler.get_run(rec.run_id).state.value
    driver = drivers(ctx).get(set_id)
    body.update(set_dir=str(_set_path(ctx, set_id)), running=driver is not None,
                held=bool(driver and driver.held), axes=table.axes, metrics=table.metrics)
    return json_response(body)


@router.post("/sets/{set_id}/cancel", responses=errors(404))
def cancel(set_id: SetId, ctx: Ctx) -> Response:
    """Cancel every queued or running member's run; the set stops submitting. A Slurm set
    (its members array tasks): scancel of its arrays, as ``evaltui set cancel`` does."""
    record = _record(ctx, set_id)
    plan = plan_record(record, ctx.scheduler.outputs, check=False)
    if executor_kind(plan.setfile.base.executor).batch:
        return _cancel_arrays(ctx, plan)
    asked = drivers(ctx).cancel(plan)
    return json_response({"set_id": set_id, "cancelled": asked})


@router.post("/sets/{set_id}/resume", responses=errors(404, 409))
def resume(set_id: SetId, ctx: Ctx, options: Options) -> Response:
    """Continue a set from its set.json: resume incomplete members, retry failed ones."""
    record = _record(ctx, set_id)
    plan = plan_record(record, ctx.scheduler.outputs, check=True)
    _not_an_array(plan)
    driver = _start(ctx, plan, options)
    return json_response({"set_id": set_id, "name": record.name, "set_dir": str(plan.path),
                          "members": [_member_brief(m) for m in driver.first_members]})


# ---- helpers --------------------------------------------------------------------------------


def _start(ctx: ApiContext, plan: SetPlan, options: RunnerOptions) -> Any:
    try:
        return drivers(ctx).run(plan, options)
    except (SetBusy, SetBusyHere) as exc:
        raise ApiFailure(409, str(exc)) from None


def _parse_body(body: bytes, content_type: str) -> Any:
    if len(body) > MAX_SET_FILE_BYTES:
        raise ApiFailure(413, f"a set file is at most {MAX_SET_FILE_BYTES} bytes")
    text = body.decode("utf-8", errors="replace")
    if "json" in content_type or not content_type:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ApiFailure(422, f"<set file>: not valid JSON ({exc})", "<set file>") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0]
        raise ApiFailure(422, f"<set file>: not valid YAML ({first})", "<set file>") from None


def _base_dir(raw: str | None) -> FsPath:
    if raw is None:
        return FsPath.cwd()
    if not (os.path.isabs(raw) and os.path.isdir(raw)):
        raise ApiFailure(422, "base_dir: must be an absolute path to an existing directory on "
                         "the backend's machine", "base_dir")
    return FsPath(raw)


def _leaves_root(ctx: ApiContext, set_id: str) -> bool:
    """True if the set dir (or its set.json) is a symlink out of ``eval_sets``."""
    root = sets_root(ctx.scheduler.outputs).resolve()
    path = sets_root(ctx.scheduler.outputs) / set_id
    return any(item.is_symlink() and not item.resolve().is_relative_to(root)
               for item in (path, path / SET_FILENAME))


def _set_path(ctx: ApiContext, set_id: str) -> FsPath:
    if not is_set_name(set_id) or _leaves_root(ctx, set_id):
        raise ApiFailure(404, f"no set {set_id!r}")
    return sets_root(ctx.scheduler.outputs) / set_id


def _record(ctx: ApiContext, set_id: str) -> SetRecord:
    path = _set_path(ctx, set_id)
    try:
        return read_set(path)
    except SetDirError:
        raise ApiFailure(404, f"no set {set_id!r}") from None


def _cancel_arrays(ctx: ApiContext, plan: SetPlan) -> Response:
    """A Slurm set's cancel through its array target (``sets/dispatch.py``), waiting
    less than a client's timeout for its tasks to leave Slurm's queue."""
    target = SlurmArrayTarget.of_plan(plan, ctx.scheduler.outputs,
                                      wait_sec=ARRAY_CANCEL_WAIT_SEC)
    try:
        asked = cancel_set(plan, target)
    except SetDirError:
        raise ApiFailure(404, f"no set {plan.set_id!r}") from None
    jobs = sorted(set(target.cancelled.values()), key=int)
    return json_response({"set_id": plan.set_id, "cancelled": asked, "slurm_jobs": jobs})


def _not_an_array(plan: SetPlan) -> None:
    """A Slurm set is one job array submitted and followed by ``evaltui set run`` on a
    login node; this backend's scheduler would start its runs outside any allocation."""
    if executor_kind(plan.setfile.base.executor).batch:
        raise ApiFailure(422, "base.executor: a Slurm set goes to Slurm as one job array "
                         "from `evaltui set run FILE`, not through the backend",
                         "base.executor")


def _baseline(record: SetRecord, raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    if raw == "":
        entry = record.file.get("baseline")
        if not isinstance(entry, dict) or not entry:
            raise ApiFailure(422, "baseline: the set file names no baseline", "baseline")
        return entry
    try:
        entry = json.loads(raw)
    except ValueError:
        entry = None
    if not isinstance(entry, dict) or not entry:
        raise ApiFailure(422, "baseline: must be a JSON object of axis values", "baseline")
    return entry


def _member_brief(m: Any) -> dict[str, Any]:
    return {"key": m.key, "axes": m.axes, "run_id": m.run_id, "state": m.state.value,
            "attempts": m.attempts, "error": m.error}
