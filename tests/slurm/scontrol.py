"""What the cluster tests read of a job from ``scontrol show job`` and ``squeue`` (scontrol
still knows a job that has left the queue). evaltui itself reads only squeue
(:class:`evaltui.slurm.follow.SlurmQueue`); these readers are the tests' eyes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaltui.contract.slurmoptions import slurm_time_seconds
from evaltui.slurm.commands import raise_for_exit, run_slurm
from evaltui.slurm.jobid import SlurmJobId
from evaltui.slurm.jobinfo import SQUEUE_FORMAT, SlurmJobInfo, parse_squeue_line

# a key of scontrol's KEY=VALUE words: CamelCase, may hold / and : (CPUs/Task, ReqB:S:C:T)
_KEY = re.compile(r"(?:^| )([A-Za-z][A-Za-z0-9/:_]*)=")
_UNKNOWN_JOB = "Invalid job id specified"


@dataclass(frozen=True)
class ScontrolJob(SlurmJobInfo):
    restarts: int | None = None
    time_limit_s: int | None = None


def _fields(line: str) -> dict[str, str]:
    """``KEY=VALUE`` words of one ``--oneliner`` line; a value runs to the next key."""
    keys = list(_KEY.finditer(line))
    return {here.group(1): line[here.end():after.start() if after else len(line)].strip()
            for here, after in zip(keys, [*keys[1:], None], strict=True)}


def _job(line: str) -> ScontrolJob:
    f = _fields(line)
    if f.get("ArrayJobId"):
        tasks = f.get("ArrayTaskId", "")
        job_id = SlurmJobId.parse(f"{f['ArrayJobId']}_{tasks}" if tasks.isdigit()
                                  else f"{f['ArrayJobId']}_[{tasks}]")
    else:
        job_id = SlurmJobId.parse(f["JobId"])
    limit, restarts = f.get("TimeLimit", ""), f.get("Restarts", "")
    return ScontrolJob(
        job_id=job_id, state_word=f["JobState"],
        reason=None if f.get("Reason") in (None, "", "None") else f["Reason"],
        nodes=None if f.get("NodeList") in (None, "", "(null)") else f["NodeList"],
        name=f.get("JobName"), restarts=int(restarts) if restarts.isdigit() else None,
        time_limit_s=None if limit in ("", "N/A", "UNLIMITED") else slurm_time_seconds(limit))


def _lines(argv: list[str]) -> list[str]:
    done = run_slurm(argv, check=False)
    if done.returncode != 0:
        if _UNKNOWN_JOB in done.stderr:
            return []
        raise_for_exit(done)
    return [ln for ln in done.stdout.splitlines() if ln.strip()]


def show_job(job: SlurmJobId | str) -> list[ScontrolJob]:
    """``scontrol show job`` of ``job``: one record, or one per task of an array; [] when
    Slurm no longer knows the job."""
    return [_job(ln) for ln in _lines(["scontrol", "show", "job", "--oneliner", str(job)])]


def queue(job: SlurmJobId | str) -> list[SlurmJobInfo]:
    """``squeue`` of ``job`` (an array's tasks one per line); [] when not in the queue."""
    return [parse_squeue_line(ln) for ln in _lines(
        ["squeue", "--noheader", "--array", f"--jobs={job}", f"--format={SQUEUE_FORMAT}"])]
