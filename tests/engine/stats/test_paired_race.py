"""The paired race: decided in favour of the better graph, its interval the betting CS
of the paired differences, and (by simulation) wrong no more than 5 % of the time."""

from __future__ import annotations

import numpy as np

from evaltui.engine.stats.betting import betting_interval
from evaltui.engine.stats.paired import PairedRace, two_proportion_n


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


def test_with_step_the_winner_is_steps_and_the_interval_still_the_cs() -> None:
    from evaltui.engine.stats.step import StepDecider

    # A toy STEP table: from pair 3 on, a lead of 3 successes decides outright.
    n = 12
    table = [[np.array([float(t)])] * (t + 1) for t in range(3)]
    table += [[np.array([x + 2.0]) for x in range(t + 1)] for t in range(3, n + 1)]
    a = [1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1]
    b = [0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1]
    race = PairedRace(list(range(n)), step=StepDecider(table, seed=0))
    for i in range(n):
        race.add("A", i, a[i])
        race.add("B", i, b[i])
    state = race.state()
    assert race.winner == "A" and race.decided_at == 5  # A 5 - B 2 after five pairs
    assert state.method == "step"
    lo, hi = betting_interval([(y - x + 1) / 2 for x, y in zip(a, b, strict=True)])
    assert state.interval == (2 * lo - 1, 2 * hi - 1)
    assert lo < 0.5 < hi  # the CS alone would not have called it
    assert state.fixed_n == two_proportion_n(sum(a) / n, sum(b) / n)


def test_the_fixed_n_of_two_proportions_is_the_textbook_one() -> None:
    # Fleiss's normal-approximation sample sizes (no continuity correction), 5 %, 80 %.
    assert two_proportion_n(0.5, 0.7) == 93
    assert two_proportion_n(0.2, 0.4) == 82
    assert two_proportion_n(0.6, 0.6) is None
