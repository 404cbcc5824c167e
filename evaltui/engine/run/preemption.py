"""A Slurm run's batch step, preempted or near its time limit (docs/slurm.md).

Jobs go in with ``--requeue --signal=B:USR1@90``: Slurm sends USR1 to the batch step --
this run process -- before it ends the job. On it the run stops dealing and ends as on a
cancel (busy episodes end ``cancelled`` at their next step and are recorded, the summary
flushed), and then requeues its own job (``scontrol requeue``, an array task by its array
id). Slurm restarts the batch step with ``SLURM_RESTART_COUNT`` one higher; the run,
started again on the same run dir, keeps the episodes that ended ``ok`` and runs only the
others (their attempts counted on). A job requeued from outside (``scontrol requeue``, a
preemption with ``PreemptMode=REQUEUE``) restarts the same way. Where Slurm refuses the
requeue (``--no-requeue``, ``JobRequeue=0``) the run says so in its run dir and the
follower on the login node submits the job again (:mod:`evaltui.slurm.resubmit`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evaltui.contract.records import DONE_FILENAME
from evaltui.engine.executor.kinds import executor_of
from evaltui.slurm.commands import SlurmError
from evaltui.slurm.control import requeue
from evaltui.slurm.jobid import own_job_id
from evaltui.slurm.resubmit import mark_requeue_refused

REQUEUE_SIGNAL = signal.SIGUSR1


def is_slurm_batch(spec: Any, environ: Mapping[str, str] = os.environ) -> bool:
    """This run process is a Slurm run's batch step (or inside some allocation)."""
    return executor_of(spec).batch and bool(environ.get("SLURM_JOB_ID"))


def restarted(run_dir: Path, environ: Mapping[str, str] = os.environ) -> bool:
    """A requeued job's batch step (``SLURM_RESTART_COUNT`` >= 1): the earlier attempt's
    ``_DONE`` is taken away, so that readers see the run going on."""
    try:
        count = int(environ.get("SLURM_RESTART_COUNT") or 0)
    except ValueError:
        count = 0
    if count >= 1:
        (run_dir / DONE_FILENAME).unlink(missing_ok=True)
        print(f"evaltui: Slurm restarted this run (restart {count}): the episodes not yet "
              "ok run again", file=sys.stderr, flush=True)
    return count >= 1


def requeue_on_signal(stop: threading.Event) -> threading.Event:
    """USR1 sets ``stop`` (the run ends as cancelled) and the returned event: requeue."""
    asked = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        asked.set()
        stop.set()

    signal.signal(REQUEUE_SIGNAL, on_signal)
    return asked


def requeue_self(run_dir: Path, environ: Mapping[str, str] = os.environ) -> int:
    """Requeue this process's own job; the exit code to end with if Slurm refuses. The run
    dir then reads as the run left it, with ``_REQUEUE_REFUSED`` saying why: the follower
    submits the job again (:mod:`evaltui.slurm.resubmit`)."""

    job = own_job_id(environ)
    if job is None:
        return 1
    print(f"evaltui: requeueing Slurm job {job} (USR1: preempted or near its time limit)",
          file=sys.stderr, flush=True)
    try:
        requeue(job)
    except SlurmError as exc:
        print(f"evaltui: {exc}", file=sys.stderr, flush=True)
        try:
            mark_requeue_refused(run_dir, str(exc))
        except OSError as err:  # the follower then sees an ended run, not a resumable one
            print(f"evaltui: cannot say so in the run dir: {err}", file=sys.stderr, flush=True)
        return 1
    return 0
