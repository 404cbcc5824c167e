"""The dealing core's node-loss rule, for every executor (issue 24): a worker death that
the executor reports as its machine lost (``Died(..., node_lost=True)``) has its episode
dealt again without counting against ``max_episode_retries``; a plain death does count.

The slot side here is a scripted executor in this process (the core is what is tested:
the local pool never loses a machine, and the Ray executor's node loss is tested on a
real cluster in tests/ray/test_ray_raylet_kill.py).
"""

from __future__ import annotations

from collections import deque

import pytest

from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.loop import EpisodeOutcome
from evaltui.engine.executor.dealing import SlotExecutor
from evaltui.engine.executor.protocol import EpisodeResult
from evaltui.engine.executor.slots import Died, Finished, Ready, Slot, SlotEvent


class ScriptedExecutor(SlotExecutor[Slot]):
    """Workers that start at once; the first attempt at ``doomed`` dies as ``death``."""

    wait_slice_sec = 0.0

    def __init__(self, doomed: int, death: dict[str, bool], **kw: object) -> None:
        super().__init__([Slot(0), Slot(1)], **kw)  # type: ignore[arg-type]
        self.doomed, self.death = doomed, death
        self.events: deque[SlotEvent] = deque()
        self.died_once = False
        for slot in self.slots:  # what an executor's __enter__ does
            self.start_worker(slot)

    def start_worker(self, slot: Slot) -> None:
        self.events.append(Ready(slot))

    def send_episode(self, slot: Slot, index: int, attempt: int) -> None:
        if index == self.doomed and not self.died_once:
            self.died_once = True
            self.events.append(Died(slot, "its machine left", " on node-x", **self.death))
        else:
            self.events.append(Finished(slot, index, EpisodeOutcome(EpisodeStatus.OK, 3, 0.0)))

    def wait_events(self, timeout: float, cancelling: bool) -> list[SlotEvent]:
        events, self.events = list(self.events), deque()
        return events

    def kill_worker(self, slot: Slot) -> str:
        return "1"

    def cancel_worker(self, slot: Slot) -> None:
        pass


@pytest.mark.parametrize("node_lost", [True, False])
def test_a_node_lost_death_is_retried_outside_max_episode_retries(node_lost: bool) -> None:
    executor = ScriptedExecutor(2, {"node_lost": node_lost}, max_episode_retries=0)
    results: list[EpisodeResult] = []
    executor.run(range(4), results.append)
    last = {r.index: r for r in results}
    assert sorted(last) == [0, 1, 2, 3]
    first_try = next(r for r in results if r.index == 2)
    assert first_try.outcome.status is EpisodeStatus.ERROR
    assert "worker died (its machine left) while running this episode (worker" in \
        str(first_try.outcome.error)
    if node_lost:  # dealt again, to whichever worker is free: ok on its second attempt
        assert last[2].outcome.status is EpisodeStatus.OK and last[2].attempts == 2
        assert len(results) == 5
    else:  # a plain death is the episode's error, with no retries allowed
        assert last[2].outcome.status is EpisodeStatus.ERROR and last[2].attempts == 1
        assert len(results) == 4
    assert all(r.outcome.status is EpisodeStatus.OK for i, r in last.items() if i != 2)
