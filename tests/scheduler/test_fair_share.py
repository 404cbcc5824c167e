"""Fair share: at equal priority, a big set does not starve a run submitted after it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedhelpers import line_spec, wait_until

from evaltui.contract.states import RunState
from evaltui.scheduler.scheduler import JobScheduler

Make = Callable[..., JobScheduler]


def member(dataset: Path, set_id: str | None, **kwargs: Any) -> dict[str, Any]:
    spec = line_spec(dataset, episodes=1, marginal_vram_mb=600, **kwargs)
    if set_id is not None:
        spec["scheduling"]["set_id"] = set_id
    return spec


def test_sets_and_lone_runs_take_turns_within_a_priority(make_scheduler: Make,
                                                         dataset: Path) -> None:
    sched = make_scheduler()  # not started: the queue is only ordered
    a = [sched.submit(member(dataset, "a"))[0] for _ in range(3)]
    b = [sched.submit(member(dataset, "b"))[0] for _ in range(2)]
    lone = [sched.submit(member(dataset, None))[0] for _ in range(2)]
    urgent = sched.submit(member(dataset, "a", priority=5))[0]
    order = [q.run_id for q in sched.queue()]
    assert order == [urgent, a[0], b[0], lone[0], a[1], b[1], lone[1], a[2]]


def test_a_lone_run_starts_before_the_last_member_of_a_big_set(
        make_scheduler: Make, dataset: Path, fake_gpus: Callable[[str], None]) -> None:
    fake_gpus("1x1000")  # one 600 MiB run at a time
    sched = make_scheduler()
    members = [sched.submit(member(dataset, "big"))[0] for _ in range(100)]
    lone = sched.submit(member(dataset, None))[0]
    sched.tick()  # admits the set's first member only: one fits at a time
    queue = sched.queue()
    assert [q.run_id for q in queue[:2]] == [lone, members[1]]
    reason = queue[-1].waiting_reason or ""
    assert queue[-1].run_id == members[-1]
    assert "fair share: 99 queued member(s) of set big go first, taking turns with 1 other" \
        in reason
    sched.start()
    wait_until(lambda: sched.get_run(lone).state is RunState.DONE, timeout=60,
               what="the lone run to finish")
    assert sched.get_run(members[-1]).state is RunState.QUEUED
    started = [m for m in members if sched.get_run(m).state is not RunState.QUEUED]
    assert len(started) <= 3  # the set's first member, and the next while the lone one ran
