"""``evaltui eval --executor slurm`` from a login node (docs/slurm.md): one sbatch job whose
batch step is the evaltui run process, followed from here.

The run dir is written here (it must be on a filesystem the nodes share) and the job runs
``python -m evaltui.engine.main RUN_DIR`` as its batch step (``--wrap=exec ...``, so the
run process is the one that gets the signal before the time limit); the run's workers are
job steps of that allocation (:mod:`evaltui.engine.executor.slurm`). While the job is
pending, Slurm's reason is shown (``Slurm job 14: PENDING (Priority)``); then the progress
bar of any ``evaltui eval``. Ctrl-C: the cancel recorded, then ``scancel``. The job is
followed through the one follower (:mod:`evaltui.slurm.follow`): when it has ended, the
run dir is the truth; where it says nothing terminal (the job was cancelled while
pending, or killed before the run could write its summary), ``follow_status``'s reading
of Slurm is written into scheduler.json as the run's state, Slurm's word in its note.
Where Slurm would not requeue the job (``--no-requeue``, ``PreemptMode=CANCEL``), the job
is submitted again on the same run dir (:mod:`evaltui.slurm.resubmit`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from evaltui.commands.console import INTERRUPTED, error
from evaltui.commands.console import warning as say_warning
from evaltui.commands.runend import exit_code, print_results
from evaltui.commands.runfollow import follow
from evaltui.contract.spec import SpecError
from evaltui.contract.states import RunState
from evaltui.engine.graph.specchecks import CheckedSpec, validate_in_workspace
from evaltui.rundir.jsonfiles import touch_done
from evaltui.rundir.layout import outputs_root
from evaltui.rundir.status import read_run_status
from evaltui.rundir.summaryfile import read_summary, summary_header
from evaltui.slurm.commands import SlurmError
from evaltui.slurm.episodetime import (
    budget_episode,
    measured_episode,
    signal_offset,
    time_limit_warning,
)
from evaltui.slurm.follow import cancel_slurm_run, follow_status, record_slurm_end, shared_queue
from evaltui.slurm.resubmit import MAX_RESUBMITS, resubmit_reason
from evaltui.slurm.runsubmit import batch_job, resubmit_run, submit_run

if TYPE_CHECKING:
    from evaltui.commands.evalstart import DeferredInterrupt
    from evaltui.slurm.jobinfo import SlurmJobInfo
    from evaltui.slurm.submit import BatchJob


class SlurmJobProcess:
    """The submitted job as the run process's stand-in (``poll``/``wait``) for
    :func:`evaltui.commands.runfollow.follow`, read from the one follower's queue
    (:func:`evaltui.slurm.follow.shared_queue`): ended once Slurm lists it ended or no
    longer lists it. A Ctrl-C seen by ``interrupt`` cancels the run once (as ``evaltui
    cancel`` does); following goes on until Slurm ends the job."""

    def __init__(self, run_dir: Path, job_id: str, interrupt: DeferredInterrupt) -> None:
        self.run_dir, self.job_id, self.interrupt = run_dir, job_id, interrupt
        self.info: SlurmJobInfo | None = None
        """Slurm's last word on the job while it listed it."""
        self.ended = self.cancelled = False
        self.since = time.time()  # a queue read older than the job cannot know it

    def poll(self) -> int | None:
        if self.interrupt.seen and not self.cancelled:
            self.cancelled = True
            cancel_slurm_run(self.run_dir, self.job_id)
        if not self.ended:
            info, why_not = shared_queue().lookup(self.job_id, newer_than=self.since)
            self.info = info or self.info  # not asked (why_not): asked again next time
            self.ended = why_not is None and (info is None or info.run_state()[0].terminal)
        return 0 if self.ended else None

    def pending(self) -> bool:
        return self.poll() is None and self.info is not None and \
            self.info.run_state()[0] is RunState.QUEUED

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"slurm job {self.job_id}", timeout or 0)
            time.sleep(0.1)
        return code


def submit_and_follow(args: argparse.Namespace, spec: dict[str, Any],
                      interrupt: DeferredInterrupt) -> int:
    """Write the run dir, submit its job, follow it to the end; the exit code of eval."""
    try:
        checked = validate_in_workspace(spec)  # refused: nothing written
        submitted = submit_run(checked, outputs_root(args.outputs))
    except (SpecError, SlurmError) as exc:
        return error(str(exc))
    run_dir, job_id = submitted.run_dir, submitted.job_id
    ev, total, job = checked.spec.eval, submitted.total, batch_job(run_dir, checked)
    console = Console(stderr=True)
    for warning in [*checked.warnings, *_time_limit_warnings(checked, run_dir, job)]:
        say_warning(warning)
    console.print(f"run [bold]{run_dir.name}[/]: {checked.graph.name} on {ev.dataset}/"
                  f"{checked.split}, {total} episodes, Slurm job {job_id} -> {run_dir}",
                  highlight=False)
    proc = SlurmJobProcess(run_dir, job_id, interrupt)
    return _follow(args, run_dir, proc, total, console, checked)


def _follow(args: argparse.Namespace, run_dir: Path, proc: SlurmJobProcess, total: int,
            console: Console, checked: CheckedSpec) -> int:
    earlier: list[str] = []
    while True:
        _show_pending(proc, console)
        follow(run_dir, proc, total, console)
        interrupted = proc.cancelled or proc.interrupt.seen
        why = None if interrupted else resubmit_reason(run_dir, proc.info)
        if why is None:
            break
        if len(earlier) >= MAX_RESUBMITS:
            console.print(f"[red]not resubmitted[/]: {MAX_RESUBMITS} resubmissions already "
                          f"({escape(why)})", highlight=False)
            break
        # Slurm will not bring the job back: a new one, on the same run dir, runs what is
        # not yet ok (the run dir is the truth; the store's reset clears the last end)
        try:
            job_id = resubmit_run(run_dir, checked, read_run_status(run_dir).state.value)
        except SlurmError as exc:
            touch_done(run_dir)  # the run reads as the last job left it (its summary's end)
            console.print(f"[red]not resubmitted[/]: {escape(str(exc))}", highlight=False)
            break
        earlier.append(proc.job_id)  # recorded by resubmit_run too
        console.print(f"[yellow]resubmitted[/]: {escape(why)}: Slurm job {job_id}",
                      highlight=False)
        proc = SlurmJobProcess(run_dir, job_id, proc.interrupt)
    read = read_run_status(run_dir)
    run_status = follow_status(run_dir, read)  # the run dir first, then Slurm's last word
    if run_status is not read and run_status.state.terminal:
        record_slurm_end(run_dir, run_status.state, run_status.note)
    state = run_status.state
    summary = read_summary(run_dir)
    if args.json:
        print(json.dumps({"run_id": run_dir.name, "state": state.value, "summary": summary,
                          "slurm_job_id": proc.job_id}, indent=2))
    else:
        print_results(Console(), run_dir, state, summary)
    if proc.cancelled or state is RunState.CANCELLED:
        return INTERRUPTED
    if state is RunState.ABORTED and run_status.note:
        console.print(f"[red]aborted[/]: {escape(run_status.note)}", highlight=False)
    return exit_code(state, summary_header(summary), run_dir)


def _time_limit_warnings(checked: CheckedSpec, run_dir: Path, job: BatchJob) -> list[str]:
    """A time limit that cannot fit one episode (before the signal to stop), by an earlier
    run's longest episode, else the per-step budget x the step budget."""
    ev = checked.spec.eval
    if ev.slurm.time_limit_seconds() is None:
        return []
    expected = measured_episode(run_dir.parent, checked.graph.name, ev.dataset,
                                checked.split, exclude=run_dir.name) \
        or budget_episode(ev.per_step_budget_sec, ev.step_budget)
    warning = time_limit_warning(ev.slurm, expected, signal_offset(job.signal))
    return [warning] if warning else []


def _show_pending(proc: SlurmJobProcess, console: Console) -> None:
    """While the job is pending, one line each time Slurm's reason changes."""
    said = None
    while proc.pending():
        assert proc.info is not None
        reason = proc.info.run_state()[1]
        if reason != said:
            console.print(f"[yellow]queued[/]: {escape(reason)}", highlight=False)
            said = reason
        time.sleep(0.1)
