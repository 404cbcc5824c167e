"""Where a set's members are submitted: the backend at ``$BACKEND_URL``, an embedded one,
or Slurm job arrays.

A :class:`SetTarget` is the four scheduler operations a set needs (submit, read a run,
cancel, resume); a target that sends submissions in batches also has ``flush()``, which
the runner calls after each step (SubmitRefused when the batch is refused).
:class:`EmbeddedTarget` runs a :class:`~evaltui.scheduler.JobScheduler` in this process,
as the TUI does (same admission, same machine-wide ledger; the runs live in their own
sessions and outlive it); :class:`~evaltui.api.settarget.ApiTarget` (in the API layer,
which sets sit below) calls ``evaltui serve`` through its client;
:class:`~evaltui.sets.arraytarget.SlurmArrayTarget` sends each step's members as one
Slurm job array. All answer with the same status views; ``sets/dispatch.local_target``
and ``api/settarget.open_target`` pick one.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from evaltui.contract.spec import SpecError
from evaltui.contract.views import Run
from evaltui.rundir.layout import outputs_root
from evaltui.scheduler.scheduler import JobScheduler, NotResumable, RunNotFound
from evaltui.sets.memberruns import member_runs


class TargetError(RuntimeError):
    """A scheduler call failed; the message is meant for the user."""


class RunGone(TargetError):
    """The scheduler knows no such run (its run dir was deleted)."""


class ResumeRefused(TargetError):
    """The run cannot be resumed (active, or nothing left to re-run)."""


class SubmitRefused(TargetError):
    """A batch of submissions was refused as a whole (Slurm refused the array); nothing
    of it is left. The message names the field at fault, as a SetFileError's does."""


class SetTarget(Protocol):
    """The scheduler operations of a set. Every method may block."""

    label: str

    def submit(self, spec: dict[str, Any]) -> str:
        """Queue a JobSpec; its run_id (SpecError names a bad field)."""

    def get_run(self, run_id: str) -> Run:
        """The run's status view (TargetError if there is none)."""

    def cancel(self, run_id: str) -> None:
        """Cancel a queued or running run (a finished one is left as it is)."""

    def resume(self, run_id: str, more: int | None = None) -> None:
        """Queue a finished run again for its episodes that are not ok (ResumeRefused);
        ``more``: N more episodes of its order past its stop or cap (a race's round)."""

    def member_runs(self, set_id: str) -> dict[str, str]:
        """The runs already made for members of ``set_id`` (``scheduling.set_member`` ->
        run id); a run dir whose writing was cut short is removed, never listed."""

    def flush(self) -> None:
        """Send what this step's submits and resumes queued (a target that sends in
        batches, as a Slurm job array); the runner calls it after every step."""

    def close(self) -> None:
        """Stop what the target started; runs are never killed by this."""


class EmbeddedTarget:
    """A JobScheduler in this process: one of its own (:meth:`start`, ticking on its own
    thread until ``close``), or one that runs already (the API server's, the TUI's),
    which ``close`` leaves running."""

    label = "embedded scheduler"

    def __init__(self, scheduler: Any, *, owned: bool = False) -> None:
        self.scheduler = scheduler
        self.owned = owned

    @classmethod
    def start(cls, outputs: str | os.PathLike[str] | None = None, **options: Any
              ) -> EmbeddedTarget:
        """A new scheduler on ``outputs`` (same admission and machine ledger as any)."""

        return cls(JobScheduler(outputs_root(outputs), **options).start(), owned=True)

    def submit(self, spec: dict[str, Any]) -> str:
        return self.scheduler.submit(spec)[0]

    def get_run(self, run_id: str) -> Run:

        try:
            return self.scheduler.get_run(run_id)
        except RunNotFound:
            raise RunGone(f"no run {run_id}") from None

    def cancel(self, run_id: str) -> None:

        try:
            self.scheduler.cancel(run_id)
        except RunNotFound:
            raise TargetError(f"no run {run_id}") from None

    def resume(self, run_id: str, more: int | None = None) -> None:

        try:
            self.scheduler.resume(run_id, more)
        except RunNotFound:
            raise ResumeRefused(f"no run {run_id}") from None
        except (NotResumable, SpecError) as exc:
            raise ResumeRefused(str(exc)) from None

    def member_runs(self, set_id: str) -> dict[str, str]:
        return member_runs(self.scheduler.outputs, set_id)

    def flush(self) -> None:
        """Every submit reached the scheduler when it was made."""

    def close(self) -> None:
        if self.owned:
            self.scheduler.stop()
