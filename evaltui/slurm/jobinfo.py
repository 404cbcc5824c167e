"""What Slurm says about a job: a ``squeue`` line read into one record, and the run state
and reason that follow from it."""

from __future__ import annotations

from dataclasses import dataclass

from evaltui.contract.states import RunState
from evaltui.slurm.jobid import SlurmJobId
from evaltui.slurm.jobstate import RUN_STATE_OF, SlurmJobState

SQUEUE_FORMAT = "%i|%F|%K|%T|%r|%N|%j"
"""id, array job id, array task id, state, reason, nodes, name (last: it may hold ``|``)."""


@dataclass(frozen=True)
class SlurmJobInfo:
    """One job (or array task) as Slurm reports it now. ``state`` is None for a state
    evaltui does not know (``state_word`` keeps Slurm's word)."""

    job_id: SlurmJobId
    state_word: str
    reason: str | None = None
    nodes: str | None = None
    name: str | None = None

    @property
    def state(self) -> SlurmJobState | None:
        return SlurmJobState.read(self.state_word)

    def run_state(self) -> tuple[RunState, str]:
        """The run state this job means, and a reason in Slurm's words:
        ``Slurm job 14: PENDING (Priority)``, ``Slurm job 22: TIMEOUT (TimeLimit)``."""
        state = self.state
        detail = f" ({self.reason})" if self.reason else ""
        reason = f"Slurm job {self.job_id}: {self.state_word}{detail}"
        if state is None:
            return RunState.RUNNING, reason + " -- a state evaltui does not know"
        return RUN_STATE_OF[state], reason


def _none(text: str | None) -> str | None:
    return None if text in (None, "", "(null)", "None") else text


def parse_squeue_line(line: str) -> SlurmJobInfo:
    """One line of ``squeue --noheader --format=SQUEUE_FORMAT``."""
    parts = line.rstrip("\n").split("|", 6)
    if len(parts) != 7:
        raise ValueError(f"not a squeue line of {SQUEUE_FORMAT!r}: {line[:80]!r}")
    ident, _array_job, _task, state, reason, nodes, name = parts
    return SlurmJobInfo(job_id=SlurmJobId.parse(ident), state_word=state,
                        reason=_none(reason), nodes=_none(nodes), name=name)
