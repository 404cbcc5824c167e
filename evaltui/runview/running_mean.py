"""RunningMeans: how a run's metric means and their 95% CIs evolved, episode by episode.

Episodes are taken in the order they finished (``finished_at``, then index), scored as
the run's summary scores them (``engine.episode.metrics.row_values``: errors and timeouts are
failures, cancelled episodes do not count), so the last point of each series is the
summary's mean and CI. Only the points a plot asks for are computed, from cumulative
sums, so a plot of a 5,000-episode run costs a few small numpy passes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaltui.engine.episode.metrics import row_values
from evaltui.engine.episode.student_t import cornish_fisher_975, t_quantile_975


def t_975(df: int) -> float:
    """The Student-t 0.975 quantile: exact below 30 degrees of freedom (cached), the
    Cornish-Fisher series above (within 1e-7 there, far below a plot's resolution; the
    exact solver costs a millisecond a call and a plot asks for hundreds of dfs)."""
    return t_quantile_975(df) if df < 30 else cornish_fisher_975(df)


@dataclass(frozen=True)
class Series:
    """A metric's running mean after ``counts[i]`` episodes, with its 95% CI."""

    counts: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def __len__(self) -> int:
        return len(self.counts)


class RunningMeans:
    """Episode rows of one run, kept for plotting running means and a steps histogram."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[str, dict[str, float], int | None]] = {}
        self._ordered: list[tuple[str, dict[str, float], int | None]] | None = None
        self._sums: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        """Scored episodes."""
        return len(self._rows)

    def update(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Add or replace rows (a resumed episode replaces its earlier row)."""
        for row in rows:
            index = row.get("episode_index")
            if not isinstance(index, int):
                continue
            values = row_values(row)
            if not values:  # cancelled, unreadable: not scored
                self._rows.pop(index, None)
            else:
                steps = row.get("step_count")
                self._rows[index] = (f"{row.get('finished_at') or ''}\0{index:09d}", values,
                                     steps if isinstance(steps, int) else None)
        self._ordered = None
        self._sums.clear()

    def _order(self) -> list[tuple[str, dict[str, float], int | None]]:
        if self._ordered is None:
            self._ordered = sorted(self._rows.values(), key=lambda r: r[0])
        return self._ordered

    def steps(self) -> list[int]:
        """Step counts of the scored episodes."""
        return [r[2] for r in self._order() if r[2] is not None]

    def has(self, name: str) -> bool:
        """Some scored episode has a value of ``name`` (Meta-World's have no SPL)."""
        return any(name in values for _, values, _ in self._rows.values())

    def series(self, name: str, points: int) -> Series:
        """At most ``points`` evenly spaced points of ``name``'s running mean and CI
        (the last one after every episode so far); the CI is NaN below two values."""
        sums = self._sums.get(name)
        if sums is None:
            xs = np.array([r[1][name] for r in self._order() if name in r[1]], dtype=float)
            sums = self._sums[name] = (np.cumsum(xs), np.cumsum(xs * xs))
        total, squares = sums
        n = len(total)
        if n == 0 or points <= 0:
            empty = np.zeros(0)
            return Series(empty, empty, empty, empty)
        counts = np.unique(np.ceil(np.arange(1, min(points, n) + 1) * n /
                                   min(points, n)).astype(int))
        s, q = total[counts - 1], squares[counts - 1]
        mean = s / counts
        var = np.where(counts > 1, (q - s * s / counts) / np.maximum(counts - 1, 1), np.nan)
        t = np.array([t_975(int(k) - 1) if k > 1 else math.nan for k in counts])
        half = t * np.sqrt(np.maximum(var, 0.0) / counts)
        return Series(counts, mean, np.clip(mean - half, 0.0, 1.0),
                      np.clip(mean + half, 0.0, 1.0))
