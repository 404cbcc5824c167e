"""A set's members submitted to the backend at ``$BACKEND_URL``: :class:`ApiTarget`, the
:class:`~evaltui.sets.targets.SetTarget` over the HTTP client, and :func:`open_target`,
which picks it or an embedded scheduler.

They live in the API layer because sets sit below it: the backend's set routes drive a
SetRunner over its own scheduler (evaltui.api.setdrivers), and a command that runs a set
here reaches a remote backend through this client.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from evaltui.api.client import ApiClient, ApiError, Conflict, InvalidRequest, NotFound
from evaltui.contract.settings import settings
from evaltui.contract.spec import SpecError
from evaltui.contract.views import Run
from evaltui.engine.executor.kinds import executor_kind
from evaltui.sets.dispatch import local_target
from evaltui.sets.plan import SetPlan
from evaltui.sets.targets import ResumeRefused, RunGone, SetTarget, TargetError


class ApiTarget:
    """The backend of ``evaltui serve`` at ``url``."""

    def __init__(self, url: str) -> None:
        self.client = ApiClient(url)
        self.label = self.client.base_url

    def submit(self, spec: dict[str, Any]) -> str:
        try:
            return self.client.submit(spec).run_id
        except InvalidRequest as exc:
            raise SpecError(exc.field or "spec", str(exc)) from None
        except ApiError as exc:
            raise TargetError(str(exc)) from None

    def get_run(self, run_id: str) -> Run:
        try:
            return self.client.get_run(run_id)
        except NotFound as exc:
            raise RunGone(str(exc)) from None
        except ApiError as exc:
            raise TargetError(str(exc)) from None

    def cancel(self, run_id: str) -> None:
        try:
            self.client.cancel(run_id)
        except ApiError as exc:
            raise TargetError(str(exc)) from None

    def resume(self, run_id: str, more: int | None = None) -> None:
        try:
            self.client.resume(run_id, more)
        except (Conflict, NotFound, InvalidRequest) as exc:
            raise ResumeRefused(str(exc)) from None
        except ApiError as exc:
            raise TargetError(str(exc)) from None

    def member_runs(self, set_id: str) -> dict[str, str]:
        try:
            runs = self.client.list_runs()
        except ApiError as exc:
            raise TargetError(str(exc)) from None
        return {run.spec.set_member: run.run_id for run in runs
                if run.spec is not None and run.spec.set_id == set_id
                and run.spec.set_member is not None}

    def flush(self) -> None:
        """Every submit reached the backend when it was made."""

    def close(self) -> None:
        self.client.close()


def open_target(plan: SetPlan, outputs: str | os.PathLike[str] | None = None,
                url: str | None = None, *, say: Callable[[str], Any] | None = None
                ) -> SetTarget:
    """``url`` or ``$BACKEND_URL`` when given (and the set's executor is not a batch
    system's, whose arrays go from here), else :func:`~evaltui.sets.dispatch.local_target`."""
    url = url or settings().backend_url
    if url and not executor_kind(plan.setfile.base.executor).batch:
        return ApiTarget(url)
    return local_target(plan, outputs, say=say)
