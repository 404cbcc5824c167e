"""What Slurm says about a job: ``scontrol show job --oneliner`` and ``squeue`` read into
one record, and the run state and reason that follow from it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaltui.contract.slurmoptions import slurm_time_seconds
from evaltui.contract.states import RunState
from evaltui.slurm.commands import raise_for_exit, run_slurm
from evaltui.slurm.jobid import SlurmJobId
from evaltui.slurm.jobstate import RUN_STATE_OF, SlurmJobState

SQUEUE_FORMAT = "%i|%F|%K|%T|%r|%N|%j"
"""id, array job id, array task id, state, reason, nodes, name (last: it may hold ``|``)."""

# a key of scontrol's KEY=VALUE words: CamelCase, may hold / and : (CPUs/Task, ReqB:S:C:T)
_KEY = re.compile(r"(?:^| )([A-Za-z][A-Za-z0-9/:_]*)=")
_UNKNOWN_JOB = "Invalid job id specified"


@dataclass(frozen=True)
class SlurmJobInfo:
    """One job (or array task) as Slurm reports it now. ``state`` is None for a state
    evaltui does not know (``state_word`` keeps Slurm's word)."""

    job_id: SlurmJobId
    state_word: str
    reason: str | None = None
    nodes: str | None = None
    name: str | None = None
    restarts: int | None = None
    exit_code: str | None = None
    batch_host: str | None = None
    time_limit_s: int | None = None
    run_time_s: int | None = None

    @property
    def state(self) -> SlurmJobState | None:
        return SlurmJobState.read(self.state_word)

    def run_state(self) -> tuple[RunState, str]:
        """The run state this job means, and a reason in Slurm's words:
        ``Slurm job 14: PENDING (Priority)``, ``Slurm job 22: TIMEOUT (TimeLimit)``."""
        state = self.state
        words = [self.reason] if self.reason else []
        if self.restarts:
            words.append(f"requeued {self.restarts}x")
        if state is SlurmJobState.FAILED and self.exit_code:
            code, _, sig = self.exit_code.partition(":")
            words.append(f"signal {sig}" if sig not in ("", "0") else f"exit {code}")
        detail = f" ({', '.join(words)})" if words else ""
        reason = f"Slurm job {self.job_id}: {self.state_word}{detail}"
        if state is None:
            return RunState.RUNNING, reason + " -- a state evaltui does not know"
        return RUN_STATE_OF[state], reason


def parse_scontrol_fields(line: str) -> dict[str, str]:
    """``KEY=VALUE`` words of one ``scontrol show ... --oneliner`` line; a value runs to
    the next key, so a job name with spaces is read whole."""
    keys = list(_KEY.finditer(line))
    fields = {}
    for here, after in zip(keys, [*keys[1:], None], strict=True):
        end = after.start() if after is not None else len(line)
        fields[here.group(1)] = line[here.end():end].strip()
    return fields


def _duration(text: str | None) -> int | None:
    try:
        return None if text in (None, "", "N/A") else slurm_time_seconds(text)
    except ValueError:
        return None


def _none(text: str | None) -> str | None:
    return None if text in (None, "", "(null)", "None") else text


def parse_scontrol_job(line: str) -> SlurmJobInfo:
    """One job of ``scontrol show job --oneliner``. ValueError when the line is no job."""
    f = parse_scontrol_fields(line)
    if "JobId" not in f or "JobState" not in f:
        raise ValueError(f"not a scontrol job line: {line[:80]!r}")
    if f.get("ArrayJobId"):
        tasks = f.get("ArrayTaskId", "")
        job_id = SlurmJobId.parse(f"{f['ArrayJobId']}_{tasks}" if tasks.isdigit()
                                  else f"{f['ArrayJobId']}_[{tasks}]")
    else:
        job_id = SlurmJobId.parse(f["JobId"])
    restarts = f.get("Restarts", "")
    return SlurmJobInfo(
        job_id=job_id, state_word=f["JobState"], reason=_none(f.get("Reason")),
        nodes=_none(f.get("NodeList")), name=f.get("JobName"),
        restarts=int(restarts) if restarts.isdigit() else None,
        exit_code=_none(f.get("ExitCode")), batch_host=_none(f.get("BatchHost")),
        time_limit_s=_duration(f.get("TimeLimit")), run_time_s=_duration(f.get("RunTime")))


def parse_squeue_line(line: str) -> SlurmJobInfo:
    """One line of ``squeue --noheader --format=SQUEUE_FORMAT``."""
    parts = line.rstrip("\n").split("|", 6)
    if len(parts) != 7:
        raise ValueError(f"not a squeue line of {SQUEUE_FORMAT!r}: {line[:80]!r}")
    ident, _array_job, _task, state, reason, nodes, name = parts
    return SlurmJobInfo(job_id=SlurmJobId.parse(ident), state_word=state,
                        reason=_none(reason), nodes=_none(nodes), name=name)


def show_job(job: SlurmJobId | str) -> list[SlurmJobInfo]:
    """``scontrol show job`` of ``job``: one record, or one per task (and pending
    remainder) for an array's id; [] when Slurm no longer knows the job (without
    slurmdbd it forgets an ended job after ``MinJobAge``: the run dir is the truth)."""
    done = run_slurm(["scontrol", "show", "job", "--oneliner", str(job)], check=False)
    if done.returncode != 0:
        if _UNKNOWN_JOB in done.stderr:
            return []
        raise_for_exit(done)
    return [parse_scontrol_job(ln) for ln in done.stdout.splitlines() if ln.strip()]


def queue(job: SlurmJobId | str) -> list[SlurmJobInfo]:
    """``squeue`` of ``job`` (an array's tasks one per line); [] when not in the queue."""
    argv = ["squeue", "--noheader", "--array", f"--jobs={job}", f"--format={SQUEUE_FORMAT}"]
    done = run_slurm(argv, check=False)
    if done.returncode != 0:
        if _UNKNOWN_JOB in done.stderr:
            return []
        raise_for_exit(done)
    return [parse_squeue_line(ln) for ln in done.stdout.splitlines() if ln.strip()]
