"""STEP's decision rule: is B's success rate above A's, or A's above B's, decided
sequentially over pairs of binary outcomes (Snyder et al., RSS 2025, arXiv 2503.10966).

STEP is a near-optimal sequential test for two Bernoulli rates. Its *policy* is a table
synthesized once per (n_max, alpha) by a sequence of linear programs
(:mod:`evaltui.engine.stats.steppolicy` gets one); this module is only the rule that
reads it, written here after the paper's test as its authors' ``sequentialized_barnard_tests``
(``MirroredStepTest.step``) applies it, so a race needs none of that package's code to
decide (a test holds the decisions equal to the package's on the same sequences).

The state after t pairs is (x, y) = (successes of A, successes of B). Where y > x the
test looks at ``policy[t][x]`` = [c, p_1 .. p_L]: y <= c continues, y > c + L rejects
"B is not better" (B wins), and in between it rejects with probability p_{y-c} (one
uniform draw from the test's generator; STEP is a randomized test). Where x > y the same
table read at ``policy[t][y]`` with x for y decides for A (the mirror). Equal counts
always continue; past n_max pairs nothing changes. With a policy of level alpha each
direction errs with probability at most alpha, so a race at 95 % reads the alpha/2 policy
(the package's ``inference_mode="ranking"``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

StepTable = Sequence[Sequence[np.ndarray]]
"""policy[t][x]: t in 0..n_max, x in 0..t; each [c, p_1, ..., p_L] (see the module doc)."""


class StepDecider:
    """One STEP test over pairs (a, b), a and b in {0, 1}; seeded like the package's."""

    def __init__(self, policy: StepTable, seed: int) -> None:
        self.policy = policy
        self.n_max = len(policy) - 1
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.t = 0
        self.a = self.b = 0
        self.winner: str | None = None
        """"A" or "B" once decided (the first rejection; later pairs do not change it)."""
        self.decided_at: int | None = None

    def add(self, a: float, b: float) -> str | None:
        """One pair; returns the winner once decided, else None."""
        if a not in (0, 1) or b not in (0, 1):
            raise ValueError(f"STEP takes binary outcomes, got ({a}, {b})")
        if self.winner is not None or self.t >= self.n_max:
            return self.winner
        self.t += 1
        self.a += int(a)
        self.b += int(b)
        if self.a == self.b:
            return None
        low, high, side = ((self.a, self.b, "B") if self.b > self.a
                           else (self.b, self.a, "A"))
        row = self.policy[self.t][low]
        crit, bins = int(row[0]), len(row) - 1
        if high <= crit:
            return None
        # Above every bin: reject outright; in a bin: reject with its probability.
        if high > crit + bins or self._rng.random() <= row[high - crit]:
            self.winner, self.decided_at = side, self.t
        return self.winner
