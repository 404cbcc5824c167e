"""Fair share at equal priority: experiment sets and lone runs take turns in the queue.

The queue order is priority, then age (DESIGN §6). Within one priority, a 100-member set
submitted a minute before a lone run would keep that run waiting behind all 100 of its
members; so the jobs of one priority are grouped -- each set (``scheduling.set_id``) is
a group, and the runs of no set together are one more -- and the groups take turns: the
first queued job of every group, oldest group first, then every group's second, and so
on; among the groups of one turn, the one served least recently (a job of it admitted)
goes first, so a set whose member just started waits while a lone run has its turn.
Within a group, and with no set queued at all, the order is the plain one.

Only the order changes: admission (``admission.decide``) still takes the jobs in the
order given, with its claims against starvation by memory. A set member waiting behind
its turn says so in its waiting reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from evaltui.scheduler.admission.decision import Wait, WaitKind
from evaltui.scheduler.runs.jobs import Job


@dataclass(frozen=True)
class Turn:
    """Where a queued set member stands: its turn in its set, of how many groups."""

    set_id: str
    turn: int
    """0 for the set's first queued member, 1 for its second..."""
    groups: int
    """Groups taking turns at its priority (sets, plus one for the lone runs)."""
    priority: int


@dataclass(frozen=True)
class FairShare:
    """The queued jobs in fair-share order, and each set member's turn."""

    order: list[Job]
    turns: dict[str, Turn]

    def explain(self, wait: Wait) -> Wait:
        """``wait`` with its reason saying that the member waits for its set's turn."""
        turn = self.turns.get(wait.run_id)
        if turn is None or turn.turn == 0 or turn.groups < 2 or wait.kind is WaitKind.LOCK:
            return wait
        others = turn.groups - 1
        return replace(wait, reason=f"{wait.reason}; fair share: {turn.turn} queued member(s) "
                       f"of set {turn.set_id} go first, taking turns with {others} other "
                       f"set(s)/lone runs at priority {turn.priority}")


def set_id_of(job: Job) -> str | None:
    return job.spec.scheduling.set_id if job.spec is not None else None


class ServedClock:
    """When each group was last served (a job of it admitted), as a sequence number.

    Kept by the scheduler's core for its lifetime: a new scheduler starts with every group
    unserved (then the oldest group goes first, as without fair share).
    """

    def __init__(self) -> None:
        self._last: dict[tuple[int, str | None], int] = {}
        self._seq = 0

    def served(self, job: Job) -> None:
        """``job`` was admitted: its group had its turn."""
        self._seq += 1
        self._last[(job.priority, set_id_of(job))] = self._seq

    def last(self, group: tuple[int, str | None]) -> int:
        return self._last.get(group, 0)


def fair_share(jobs: Sequence[Job], clock: ServedClock | None = None) -> FairShare:
    """Reorder ``jobs`` (in queue order) so that groups take turns within each priority:
    every group's first queued job, the least recently served group first (then the
    oldest), then every group's second, and so on."""
    if not any(set_id_of(j) for j in jobs):
        return FairShare(list(jobs), {})  # the plain order: nothing to share
    clock = clock or ServedClock()
    turn_of: dict[str, int] = {}
    counts: dict[tuple[int, str | None], int] = {}
    head: dict[tuple[int, str | None], int] = {}  # group -> queue position of its first job
    for position, job in enumerate(jobs):
        group = (job.priority, set_id_of(job))
        turn_of[job.run_id] = counts.get(group, 0)
        counts[group] = turn_of[job.run_id] + 1
        head.setdefault(group, position)
    groups_at: dict[int, int] = {}
    for priority, _ in head:
        groups_at[priority] = groups_at.get(priority, 0) + 1

    def key(item: tuple[int, Job]) -> tuple[int, int, int, int, int]:
        position, job = item
        group = (job.priority, set_id_of(job))
        return (-job.priority, turn_of[job.run_id], clock.last(group), head[group], position)

    order = [job for _, job in sorted(enumerate(jobs), key=key)]
    turns = {j.run_id: Turn(sid, turn_of[j.run_id], groups_at[j.priority], j.priority)
             for j in jobs if (sid := set_id_of(j))}
    return FairShare(order, turns)
