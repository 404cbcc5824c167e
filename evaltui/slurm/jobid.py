"""Slurm job ids as sbatch ``--parsable`` prints them and squeue/scontrol show them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_ID = re.compile(r"^(?P<job>\d+)(?:_(?:(?P<task>\d+)|\[(?P<tasks>[^\]]+)\]))?$")


@dataclass(frozen=True)
class SlurmJobId:
    """One job, one array task (``123_4``: ``job`` 123, ``task`` 4), or an array's
    tasks not yet split off (``123_[5-9%2]``: ``tasks`` ``5-9%2``). ``str()`` is the
    form Slurm's commands take; a requeued array task must be named so (``JOB_TASK``),
    not by its own job id."""

    job: int
    task: int | None = None
    tasks: str | None = None
    cluster: str | None = None

    def __str__(self) -> str:
        if self.task is not None:
            return f"{self.job}_{self.task}"
        if self.tasks is not None:
            return f"{self.job}_[{self.tasks}]"
        return str(self.job)

    @classmethod
    def parse(cls, text: str) -> SlurmJobId:
        """``123``, ``123_4``, ``123_[0-5%2]``, each optionally ``;cluster``
        (``--parsable`` on a multi-cluster setup). ValueError otherwise."""
        ident, _, cluster = text.strip().partition(";")
        m = _ID.match(ident)
        if m is None:
            raise ValueError(f"not a Slurm job id: {text.strip()!r}")
        task = m.group("task")
        return cls(int(m.group("job")), None if task is None else int(task),
                   m.group("tasks"), cluster or None)


def parse_parsable(stdout: str) -> SlurmJobId:
    """The job id ``sbatch --parsable`` printed (an array's is its array job id: the
    tasks are ``JOB_0`` ...). The last non-empty line: site wrappers may print first."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("sbatch --parsable printed no job id")
    return SlurmJobId.parse(lines[-1])


def own_job_id(environ: Mapping[str, str]) -> SlurmJobId | None:
    """The job a process runs in, as it must name itself to requeue: an array task as
    ``SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID`` (its own SLURM_JOB_ID is a different number,
    which requeues nothing useful: Lightning#15022), else SLURM_JOB_ID; None outside a job."""
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return SlurmJobId.parse(f"{array}_{task}")
    job = environ.get("SLURM_JOB_ID")
    return SlurmJobId.parse(job) if job else None
