"""BettingCS: an anytime-valid confidence sequence for the mean of a [0, 1] metric.

The hedged capital process of Waudby-Smith & Ramdas, "Estimating means of bounded random
variables by betting" (JRSS-B 2024; arXiv 2010.09686), Thm 3 with the predictable plug-in
bets of its Sec 5, and its without-replacement form (Sec 6) for a finite split of ``N``
episodes. For each candidate mean ``m`` on a grid, after episodes ``x_1 .. x_t``:

    mu_hat_t    = (1/2 + sum_{i<=t} x_i) / (t + 1)
    sigma2_hat_t = (1/4 + sum_{i<=t} (x_i - mu_hat_i)^2) / (t + 1)
    lambda_t    = sqrt(2 log(2/alpha) / (sigma2_hat_{t-1} t log(1 + t)))
    m_t         = m                                  (with replacement)
                = (N m - sum_{i<t} x_i) / (N - t + 1)  (without: the mean left, under m)
    K+_t(m)     = prod_{i<=t} (1 + min(lambda_i, c / m_i) (x_i - m_i))
    K-_t(m)     = prod_{i<=t} (1 - min(lambda_i, c / (1 - m_i)) (x_i - m_i))
    K_t(m)      = max(theta K+_t(m), (1 - theta) K-_t(m))

with c = 1/2 and theta = 1/2. ``m`` is in the (1 - alpha) sequence while K_t(m) < 1/alpha
and, without replacement, while m_t stays in [0, 1] (else no split of mean m could have
produced the episodes seen). By Ville's inequality the true mean is in every one of the
sets at once with probability >= 1 - alpha, so the interval may be read after every
episode and a run stopped on it.

Where this departs from the paper, by design (docs/statistics.md, with coverage shown by
simulation in the tests): the candidate means are a grid of ``grid + 1`` points and the
interval is the span of the grid points still in the set, widened by one grid step (as
the authors' ``confseq`` does); a candidate once out stays out (the running intersection,
valid because the sets hold at all times at once); without replacement the interval is
also cut to what the episodes seen allow (the split mean is at least sum/N and at most
(sum + N - t)/N), so it closes to the exact split mean when the split is exhausted.

An update costs a few numpy operations on the grid (docs/performance.md: microseconds).
"""

from __future__ import annotations

import math

import numpy as np

TRUNCATION = 0.5
"""c: the bet on candidate m is at most c/m (c/(1-m)), so the capital never reaches 0."""
THETA = 0.5
"""The weight of the upward bet in the hedge max(theta K+, (1 - theta) K-)."""
_ROUNDING = 1e-9
GRID = 1000
"""Grid steps over [0, 1] (1,001 candidate means): intervals are exact to 0.001."""


class BettingCS:
    """The hedged-capital confidence sequence of one metric's mean; feed it ``update(x)``.

    ``population`` is the split size N for sampling without replacement (the episodes are
    dealt in a uniformly random order of the split), None for an infinite population.
    ``batch`` runs that many independent sequences side by side (``update_many``), for
    simulations; the state arrays are then (batch, grid + 1).
    """

    def __init__(self, alpha: float = 0.05, population: int | None = None, *,
                 grid: int = GRID, batch: int = 1) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        if population is not None and population < 1:
            raise ValueError(f"population must be >= 1, got {population}")
        self.alpha = alpha
        self.population = population
        self.grid = grid
        self.m = np.arange(grid + 1) / grid
        """The candidate means."""
        self.log_kp = np.zeros((batch, grid + 1))
        """log K+_t(m) over the grid."""
        self.log_kn = np.zeros((batch, grid + 1))
        """log K-_t(m) over the grid."""
        self.alive = np.ones((batch, grid + 1), dtype=bool)
        """Candidates still in the sequence (never back once out)."""
        self.t = 0
        self.totals = np.zeros(batch)
        self._sq = np.zeros(batch)  # sum of (x_i - mu_hat_i)^2
        self._log_threshold = math.log(1.0 / alpha)
        self._log_z = 2.0 * math.log(2.0 / alpha)
        self.lo, self.hi = np.zeros(batch), np.ones(batch)

    # ---- the capital process ------------------------------------------------------------
    def bets(self) -> np.ndarray:
        """lambda_{t+1}: the bet size for the next episode, from the episodes so far."""
        t = self.t + 1
        sigma2 = (0.25 + self._sq) / t  # sigma2_hat_{t-1}
        return np.sqrt(self._log_z / (sigma2 * t * math.log1p(t)))

    def remaining_means(self) -> np.ndarray:
        """m_{t+1} for every candidate: the mean of what the next episode is drawn from."""
        if self.population is None:
            return self.m[None, :]
        left = self.population - self.t
        return (self.population * self.m[None, :] - self.totals[:, None]) / left

    def update(self, x: float) -> tuple[float, float]:
        """One more episode's value (in [0, 1]); the interval after it."""
        self.update_many(np.array([x], dtype=float))
        return self.interval

    def update_many(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One more value for each sequence of the batch; the intervals after them."""
        xs = np.asarray(xs, dtype=float)
        if xs.shape != self.totals.shape:
            raise ValueError(f"expected {self.totals.shape[0]} values, got {xs.shape}")
        if np.any((xs < 0.0) | (xs > 1.0)) or not np.all(np.isfinite(xs)):
            raise ValueError(f"a betting CS needs values in [0, 1], got {xs[:5].tolist()}")
        if self.population is not None and self.t >= self.population:
            raise ValueError(f"all {self.population} episodes of the split are in already")
        lam = self.bets()[:, None]
        mt = self.remaining_means()
        if self.population is not None:
            # Out of [0, 1] (beyond a rounding error: 1 + 1e-15 after many updates is 1),
            # no split of mean m could have given the episodes seen: m is out for good.
            self.alive &= (mt > -_ROUNDING) & (mt < 1.0 + _ROUNDING)
            mt = np.clip(mt, 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_p = np.minimum(lam, TRUNCATION / mt)
            lam_n = np.minimum(lam, TRUNCATION / (1.0 - mt))
            d = xs[:, None] - mt
            self.log_kp += np.log1p(lam_p * d)
            self.log_kn += np.log1p(-lam_n * d)
        self.alive &= self.log_capital() < self._log_threshold
        self.t += 1
        mu_hat = (0.5 + self.totals + xs) / (self.t + 1)
        self._sq += (xs - mu_hat) ** 2
        self.totals += xs
        self._bounds()
        return self.lo, self.hi

    def log_capital(self) -> np.ndarray:
        """log K_t(m) over the grid (the hedged capital; meaningful where ``alive``)."""
        with np.errstate(invalid="ignore"):
            return np.maximum(math.log(THETA) + self.log_kp,
                              math.log(1 - THETA) + self.log_kn)

    # ---- the interval -------------------------------------------------------------------
    @property
    def interval(self) -> tuple[float, float]:
        """The (1 - alpha) interval for the mean now ([0, 1] before any episode)."""
        return float(self.lo[0]), float(self.hi[0])

    @property
    def total(self) -> float:
        return float(self.totals[0])

    @property
    def mean(self) -> float | None:
        return self.total / self.t if self.t else None

    def _bounds(self) -> None:
        lo_l, hi_l = np.zeros_like(self.lo), np.ones_like(self.hi)
        if self.population is not None:  # what the split could still be, at its extremes
            lo_l = self.totals / self.population
            hi_l = (self.totals + self.population - self.t) / self.population
        any_alive = self.alive.any(axis=1)
        first = np.argmax(self.alive, axis=1)
        last = self.grid - np.argmax(self.alive[:, ::-1], axis=1)
        step = 1.0 / self.grid
        # Every candidate out (a miss of the 1 - alpha event, or a true mean in the grid's
        # gap): the last interval stays, cut to what the split allows.
        lo = np.where(any_alive, self.m[first] - step, self.lo)
        hi = np.where(any_alive, self.m[last] + step, self.hi)
        lo, hi = np.maximum(lo, lo_l), np.minimum(hi, hi_l)
        # Crossed: only the certain bounds are left, the nearer of them.
        crossed = lo > hi
        point = np.clip(np.where(lo > hi_l, hi_l, lo_l), lo_l, hi_l)
        self.lo = np.where(crossed, point, lo)
        self.hi = np.where(crossed, point, hi)


def betting_interval(values: list[float] | np.ndarray, alpha: float = 0.05,
                     population: int | None = None, *, grid: int = GRID) -> tuple[float, float]:
    """The interval after feeding ``values`` in order (what ``evaltui verify`` recomputes)."""
    cs = BettingCS(alpha, population, grid=grid)
    for x in values:
        cs.update(float(x))
    return cs.interval
