"""Coverage of a stopped run's interval, by simulation: the betting CS vs a peeked t.

Each of ``runs`` sequential runs deals a split of known mean in a random order and stops
the first time its interval meets the rule (else at the end of the split); the run
"misses" if the interval at its stop leaves out the split's mean. The betting CS is
evaltui's own (:class:`BettingCS`, all runs side by side); the naive interval is the
Student-t one the summary shows for a fixed n, peeked at after every episode from n = 5.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from evaltui.contract.stoprule import parse_rule
from evaltui.engine.episode.student_t import t_quantile_975
from evaltui.engine.stats.betting import BettingCS
from evaltui.engine.stats.order import dealing_order

MIN_N = 5
"""The naive interval is looked at from this n on (at n = 2 it can be [1, 1])."""


def shuffled(split: np.ndarray, runs: int, rng: np.random.Generator) -> np.ndarray:
    """``runs`` uniformly random orders of ``split``: (runs, N)."""
    return np.stack([rng.permutation(split) for _ in range(runs)])


def stratified(split: np.ndarray, tasks: list[str], runs: int, seed: int) -> np.ndarray:
    """``runs`` task-stratified dealing orders of ``split`` (evaltui's own)."""
    rows = [{"task": t} for t in tasks]
    idx = list(range(len(split)))
    return np.stack([split[dealing_order(idx, rows, seed + r)] for r in range(runs)])


def cs_paths(orders: np.ndarray, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """lo, hi of the without-replacement betting CS after each episode: (N, runs)."""
    runs, n = orders.shape
    cs = BettingCS(0.05, population=n, grid=grid, batch=runs)
    los, his = np.empty((n, runs)), np.empty((n, runs))
    for t in range(n):
        los[t], his[t] = cs.update_many(orders[:, t])
    return los, his


def t_paths(orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lo, hi of the Student-t 95 % interval after each episode (NaN below MIN_N)."""
    runs, n = orders.shape
    k = np.arange(1, n + 1)[:, None]
    csum = np.cumsum(orders.T, axis=0)
    csq = np.cumsum(orders.T ** 2, axis=0)
    mean = csum / k
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.maximum(csq - k * mean ** 2, 0.0) / (k - 1)
    q = np.array([t_quantile_975(i - 1) if i >= 2 else math.inf for i in range(1, n + 1)])
    half = q[:, None] * np.sqrt(var) / np.sqrt(k)
    lo, hi = np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1)
    lo[: MIN_N - 1], hi[: MIN_N - 1] = np.nan, np.nan
    return lo, hi


def miss_rate(los: np.ndarray, his: np.ndarray, rule_text: str, truth: float
              ) -> tuple[float, float]:
    """Share of runs whose interval at the stop leaves out ``truth``; mean n at the stop.
    The rule is asked episode by episode of the runs not stopped yet only: a run's
    intervals after its stop cannot change where it stopped."""
    rule = parse_rule(rule_text)
    n, runs = los.shape
    stop = np.full(runs, n - 1)
    going = np.ones(runs, dtype=bool)
    for t in range(n):
        cols = np.flatnonzero(going & ~np.isnan(los[t]))
        if cols.size:
            stopped = cols[_met(rule.met, los[t, cols], his[t, cols])]
            stop[stopped] = t
            going[stopped] = False
    lo, hi = los[stop, np.arange(runs)], his[stop, np.arange(runs)]
    miss = (lo > truth + 1e-12) | (hi < truth - 1e-12)
    return float(miss.mean()), float(stop.mean() + 1)


def _met(test: Callable[[float, float], bool], los: np.ndarray, his: np.ndarray
         ) -> np.ndarray:
    """``test`` on each (lo, hi) of two 1-D arrays, evaluated once per distinct pair.
    A pair is one complex number (lo + hi j): numpy's unique of those is many times
    faster than of the rows of a 2-D array (``axis=0`` sorts a structured view)."""
    pairs = np.round(los, 12) + 1j * np.round(his, 12)
    uniq, inverse = np.unique(pairs, return_inverse=True)
    hits = np.array([test(float(p.real), float(p.imag)) for p in uniq.tolist()], dtype=bool)
    return hits[inverse.ravel()]
