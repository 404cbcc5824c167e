"""The paired race: decided in favour of the better graph, its interval the betting CS
of the paired differences, and (by simulation) wrong no more than 5 % of the time."""

from __future__ import annotations

import numpy as np

from evaltui.engine.stats.betting import betting_interval
from evaltui.engine.stats.paired import PairedRace


def test_pairs_are_taken_in_order_and_the_interval_is_the_cs_of_the_differences() -> None:
    rng = np.random.default_rng(1)
    n = 80
    a = (rng.random(n) < 0.5).astype(float)
    b = np.maximum(a, (rng.random(n) < 0.6).astype(float))  # B never worse, often better
    order = list(rng.permutation(n))
    race = PairedRace(order)
    # B's rows arrive first, A's later and out of order: pairs still go in the order.
    for i in order:
        race.add("B", i, b[i])
    for i in reversed(order):
        race.add("A", i, a[i])
    state = race.state()
    assert state.n == n
    lo, hi = betting_interval([(b[i] - a[i] + 1) / 2 for i in order])
    assert state.interval == (2 * lo - 1, 2 * hi - 1)
    assert race.winner == "B" and race.decided_at is not None and race.decided_at < n
    assert state.diff == float(np.mean(b - a))


def test_equal_graphs_are_rarely_called_different() -> None:
    rng = np.random.default_rng(2)
    wrong = 0
    runs, n = 300, 60
    for _ in range(runs):
        x = (rng.random((2, n)) < 0.6).astype(float)  # two runs of the same policy
        race = PairedRace(list(range(n)))
        for i in range(n):
            race.add("A", i, x[0, i])
            race.add("B", i, x[1, i])
        wrong += race.winner in ("A", "B")
    # Two runs of one policy: any call is wrong; the CS of the policies' expected
    # difference makes one in at most 5 % of races.
    assert wrong / runs <= 0.05
