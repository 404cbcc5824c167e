"""PairedRace: is graph B better than graph A on the same episodes, decided sequentially.

Both graphs run the split in the same recorded order. Once both have an episode's value,
its paired difference d = x_B - x_A (in [-1, 1] for a [0, 1] metric) is mapped to
(d + 1) / 2 in [0, 1] and fed, in the order, to a betting confidence sequence
(:class:`~evaltui.engine.stats.betting.BettingCS`) for the mean difference. The race is
decided when that interval excludes 0 (B better, or A better); it may also stop for
futility once the interval is narrower than ``min_diff`` around 0.

Which mean: by default (``population`` None) the policies' expected difference on the
episodes' distribution, the split being a sample of it (a random order of an iid sample
is iid): "B is better" is then a claim about the policies. With ``population`` N it is the
without-replacement sequence for this split's realized mean difference, which closes to it
at the end of the split; with stochastic policies that realized difference is nonzero even
between two runs of one policy, so it is not the default for a race.
This is the betting CS on the paired difference; STEP (Snyder et al., RSS 2025) for a
binary metric is not in evaltui (docs/statistics.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evaltui.engine.stats.betting import BettingCS

Z_975 = 1.959963984540054
Z_80 = 0.8416212335729143


@dataclass(frozen=True)
class RaceState:
    """Where the race stands after ``n`` pairs."""

    n: int
    diff: float | None
    """Mean of x_B - x_A over the pairs."""
    interval: tuple[float, float]
    """The 95 % confidence sequence of the mean difference B - A."""
    winner: str | None
    """"A", "B", "neither" (futility: the difference is within ``min_diff`` of 0) or None."""
    fixed_n: int | None
    """Pairs a fixed-n paired test of 80 % power at 5 % would need for the difference
    seen (with its spread), None while undefined (no difference or no spread yet)."""


class PairedRace:
    """The paired-difference sequence over ``order`` (the recorded dealing order)."""

    def __init__(self, order: list[int], alpha: float = 0.05, *,
                 population: int | None = None, min_diff: float | None = None) -> None:
        self.cs = BettingCS(alpha, population=population)
        self.min_diff = min_diff
        self._position = {index: pos for pos, index in enumerate(order)}
        self._values: dict[str, dict[int, float]] = {"A": {}, "B": {}}
        self._sum = self._sq = 0.0
        self.winner: str | None = None
        self.decided_at: int | None = None

    def add(self, side: str, index: int, value: float) -> bool:
        """One side's value of an episode; True when this made the race decided."""
        pos = self._position.get(index)
        if pos is None or pos < self.cs.t:
            return False
        self._values[side][pos] = float(value)
        was = self.winner
        while self.cs.t in self._values["A"] and self.cs.t in self._values["B"]:
            t = self.cs.t
            d = self._values["B"].pop(t) - self._values["A"].pop(t)
            self._sum, self._sq = self._sum + d, self._sq + d * d
            lo, hi = self.cs.update((d + 1.0) / 2.0)
            if self.winner is None:
                self.winner = self._decide(2 * lo - 1, 2 * hi - 1)
                self.decided_at = self.cs.t if self.winner else None
        return self.winner is not None and was is None

    def _decide(self, lo: float, hi: float) -> str | None:
        if lo > 0:
            return "B"
        if hi < 0:
            return "A"
        if self.min_diff is not None and -self.min_diff <= lo and hi <= self.min_diff:
            return "neither"
        return None

    def state(self) -> RaceState:
        n = self.cs.t
        lo, hi = self.cs.interval
        diff = self._sum / n if n else None
        fixed = None
        if n >= 2 and diff:
            var = (self._sq - n * diff * diff) / (n - 1)
            if var > 0:
                fixed = math.ceil(((Z_975 + Z_80) * math.sqrt(var) / abs(diff)) ** 2)
        return RaceState(n=n, diff=diff, interval=(2 * lo - 1, 2 * hi - 1),
                         winner=self.winner, fixed_n=fixed)
