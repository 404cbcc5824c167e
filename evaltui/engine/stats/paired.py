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
With ``step`` (a :class:`~evaltui.engine.stats.step.StepDecider`, for a binary metric)
the race is decided by STEP instead (Snyder et al., RSS 2025): each pair goes to both, the
winner is STEP's, and the CS only reports the difference's interval (valid at STEP's stop
too: a CS holds at every stopping time). docs/statistics.md says which to use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evaltui.engine.episode.student_t import Z975 as Z_975
from evaltui.engine.stats.betting import BettingCS
from evaltui.engine.stats.step import StepDecider

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
    """Episodes per side a fixed-n design of 80 % power at 5 % (two-sided) would need for
    the difference seen, None while undefined (no difference or no spread yet): a paired
    t design with the differences' spread, or with STEP the two-proportion z design of
    the success rates seen (STEP, like Barnard's test, compares two Bernoulli rates)."""
    method: str = "cs"
    """"step" when STEP decides, "cs" when the betting CS does."""


class PairedRace:
    """The paired-difference sequence over ``order`` (the recorded dealing order)."""

    def __init__(self, order: list[int], alpha: float = 0.05, *,
                 population: int | None = None, min_diff: float | None = None,
                 step: StepDecider | None = None) -> None:
        self.cs = BettingCS(alpha, population=population)
        self.min_diff = min_diff
        self.step = step
        self._wins = [0.0, 0.0]
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
            a, b = self._values["A"].pop(t), self._values["B"].pop(t)
            d = b - a
            self._sum, self._sq = self._sum + d, self._sq + d * d
            self._wins[0] += a
            self._wins[1] += b
            lo, hi = self.cs.update((d + 1.0) / 2.0)
            if self.winner is None and self.step is not None:
                self.winner = self.step.add(a, b) or self._futile(2 * lo - 1, 2 * hi - 1)
                self.decided_at = self.cs.t if self.winner else None
            elif self.winner is None:
                self.winner = self._decide(2 * lo - 1, 2 * hi - 1)
                self.decided_at = self.cs.t if self.winner else None
        return self.winner is not None and was is None

    def _decide(self, lo: float, hi: float) -> str | None:
        if lo > 0:
            return "B"
        if hi < 0:
            return "A"
        return self._futile(lo, hi)

    def _futile(self, lo: float, hi: float) -> str | None:
        if self.min_diff is not None and -self.min_diff <= lo and hi <= self.min_diff:
            return "neither"
        return None

    def state(self) -> RaceState:
        n = self.cs.t
        lo, hi = self.cs.interval
        diff = self._sum / n if n else None
        fixed = None
        if self.step is not None and n and diff:
            fixed = two_proportion_n(self._wins[0] / n, self._wins[1] / n)
        elif n >= 2 and diff:
            var = (self._sq - n * diff * diff) / (n - 1)
            if var > 0:
                fixed = math.ceil(((Z_975 + Z_80) * math.sqrt(var) / abs(diff)) ** 2)
        return RaceState(n=n, diff=diff, interval=(2 * lo - 1, 2 * hi - 1),
                         winner=self.winner, fixed_n=fixed,
                         method="cs" if self.step is None else "step")


def two_proportion_n(p_a: float, p_b: float) -> int | None:
    """Episodes per side for a two-sided 5 % two-proportion z test of 80 % power at
    success rates p_a and p_b (the normal-approximation formula of Fleiss, *Statistical
    Methods for Rates and Proportions*, ch. 4, without continuity correction); None when
    they are equal."""
    if p_a == p_b:
        return None
    p_bar = (p_a + p_b) / 2
    root = (Z_975 * math.sqrt(2 * p_bar * (1 - p_bar))
            + Z_80 * math.sqrt(p_a * (1 - p_a) + p_b * (1 - p_b)))
    return math.ceil((root / (p_a - p_b)) ** 2)
