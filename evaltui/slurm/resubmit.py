"""Where Slurm will not requeue a run's job, the follower submits it again (docs/slurm.md).

A job with ``--no-requeue`` (or a site that disables requeue, ``JobRequeue=0``), and a job
preempted under ``PreemptMode=CANCEL``, cannot come back by itself: the run's own ``scontrol
requeue`` after USR1 is refused, or Slurm ends the job ``PREEMPTED``. The batch step says so in the
run dir (:func:`mark_requeue_refused`: ``_REQUEUE_REFUSED`` with Slurm's words), since the run dir
is the truth (without slurmdbd Slurm soon forgets the job). The follower (``evaltui eval --executor
slurm`` on the login node) reads it when the job has ended (:func:`resubmit_reason`) and submits
the same batch step on the same run dir (:func:`evaltui.slurm.runsubmit.resubmit_run`, through the
store's one reset): the new job keeps the episodes that ended ``ok`` and runs only the others,
their attempts counted on, as after a requeue.
"""

from __future__ import annotations

from pathlib import Path

from evaltui.contract.records import REQUEUE_REFUSED_FILENAME
from evaltui.contract.states import RunState
from evaltui.rundir.status import read_run_status
from evaltui.slurm.jobinfo import SlurmJobInfo
from evaltui.slurm.jobstate import SlurmJobState

MAX_RESUBMITS = 10
"""A follower gives up after this many resubmissions of one run (a time limit too short
for any progress would otherwise resubmit it for ever)."""


def mark_requeue_refused(run_dir: Path, why: str) -> None:
    """Say in the run dir that its job should run again but Slurm refused to requeue it."""
    (run_dir / REQUEUE_REFUSED_FILENAME).write_text(why.strip() + "\n")


def resubmit_reason(run_dir: Path, info: SlurmJobInfo | None) -> str | None:
    """Why the ended job of the run in ``run_dir`` must be submitted again, or None: the
    run is not done, and it was refused a requeue or Slurm preempted it without one."""
    if read_run_status(run_dir).state is RunState.DONE:
        return None
    try:
        refused = (run_dir / REQUEUE_REFUSED_FILENAME).read_text().strip()
    except FileNotFoundError:
        refused = None
    except OSError as exc:  # unreadable, but there: the run did ask for a requeue
        refused = f"({exc})"
    if refused is not None:
        return refused or "Slurm refused to requeue the job"
    if info is not None and info.state is SlurmJobState.PREEMPTED:
        return f"{info.run_state()[1]}, not requeued"
    return None
