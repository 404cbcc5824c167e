"""RunTotals: a running run's aggregates, kept up to date row by row.

The running summary.json is rewritten about once a second; computing its means and
intervals from every row each time made a long run's cost per episode grow with its
length. These totals (a count per status, and per metric the count, sum and sum of
squares, over all scored rows and over ok rows) cost the same at episode 50,000 as at
episode 1. A replaced row (a re-run of the same episode) is taken out first. The final
summary is computed from the rows themselves (``metrics.aggregate``), as ever.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.metrics import Aggregate, mean_ci_of_sums, row_values

FAILED = frozenset({EpisodeStatus.ERROR, EpisodeStatus.TIMEOUT})
SCORED = FAILED | {EpisodeStatus.OK}


class _Sums:
    """Per metric: [n, sum, sum of squares]."""

    def __init__(self) -> None:
        self.by_name: dict[str, list[float]] = {}

    def change(self, values: Mapping[str, float], sign: int) -> None:
        for name, x in values.items():
            acc = self.by_name.setdefault(name, [0, 0.0, 0.0])
            acc[0] += sign
            acc[1] += sign * x
            acc[2] += sign * x * x
            if acc[0] == 0:
                del self.by_name[name]

    def aggregate(self) -> Aggregate:
        means, cis, n = {}, {}, {}
        for name, (count, total, total_sq) in sorted(self.by_name.items()):
            means[name], cis[name] = mean_ci_of_sums(name, int(count), total, total_sq)
            n[name] = int(count)
        return Aggregate(means=means, ci95=cis, n=n)


class RunTotals:
    """Counts and metric sums of the rows added (see the module docstring)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._overall = _Sums()
        self._ok_only = _Sums()
        self.first_error: Mapping[str, Any] | None = None
        """The lowest-index error or timeout row."""
        self._first_error_stale = False

    def add(self, row: Mapping[str, Any]) -> None:
        self._change(row, +1)
        if row["status"] in FAILED and (self.first_error is None or int(
                row["episode_index"]) < int(self.first_error["episode_index"])):
            self.first_error = row

    def remove(self, row: Mapping[str, Any]) -> None:
        self._change(row, -1)
        if self.first_error is not None and \
                row["episode_index"] == self.first_error["episode_index"]:
            self.first_error, self._first_error_stale = None, True

    def first_failed(self, rows: Callable[[], Iterable[Mapping[str, Any]]]
                     ) -> Mapping[str, Any] | None:
        """:attr:`first_error`; ``rows`` (every current row) is read only after the row
        that was it has been replaced."""
        if self._first_error_stale:
            failed = [r for r in rows() if r["status"] in FAILED]
            self.first_error = min(failed, key=lambda r: int(r["episode_index"]),
                                   default=None)
            self._first_error_stale = False
        return self.first_error

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    @property
    def errors(self) -> int:
        return sum(self.counts[s] for s in FAILED)

    @property
    def scored(self) -> int:
        return sum(self.counts[s] for s in SCORED)

    def aggregate(self, *, ok_only: bool = False) -> Aggregate:
        return (self._ok_only if ok_only else self._overall).aggregate()

    def _change(self, row: Mapping[str, Any], sign: int) -> None:
        self.counts[row["status"]] += sign
        if not self.counts[row["status"]]:
            del self.counts[row["status"]]
        values = row_values(row)
        self._overall.change(values, sign)
        if row["status"] == EpisodeStatus.OK:
            self._ok_only.change(values, sign)
