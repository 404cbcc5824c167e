"""The set table's statistics: paired differences to the baseline, and Holm's correction.

A member is compared with the baseline over the episodes both ran (matched by
``episode_id``), with :func:`evaltui.results.compare.compare_rows`: the paired bootstrap
95% CI of each metric's difference and the exact McNemar p on success. The McNemar
p-values of all the members are then adjusted together with Holm's step-down method,
which holds the family-wise error rate at any dependence between the tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaltui.results.compare import CompareError, Comparison, MetricDiff, compare_rows


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: the i-th smallest (from 0) of m becomes
    max over j <= i of min(1, (m - j) p_(j))."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class BaselineDiff:
    """One member against the baseline."""

    n_pairs: int
    metrics: dict[str, MetricDiff]
    mcnemar_p: float | None
    """Exact McNemar p on success; None when either does not report success."""
    mcnemar_p_holm: float | None = None
    """``mcnemar_p`` after Holm's correction across the members compared."""

    def to_json(self) -> dict[str, Any]:
        return {"n_pairs": self.n_pairs,
                "metrics": {name: {"diff": d.diff, "ci95": list(d.ci95) if d.ci95 else None,
                                   "n": d.n} for name, d in self.metrics.items()},
                "mcnemar_p": self.mcnemar_p, "mcnemar_p_holm": self.mcnemar_p_holm}


def baseline_diffs(baseline_rows: Sequence[Mapping[str, Any]],
                   member_rows: Mapping[str, Sequence[Mapping[str, Any]]], *,
                   resamples: int = 10_000, seed: int = 0
                   ) -> tuple[dict[str, BaselineDiff], dict[str, str]]:
    """Each member's comparison with the baseline (by member key), and why a member could
    not be compared (no shared episode, no rows), Holm-corrected across the members."""
    diffs: dict[str, BaselineDiff] = {}
    why: dict[str, str] = {}
    for key, rows in member_rows.items():
        try:
            comparison = compare_rows(baseline_rows, rows, intersect=True,
                                      resamples=resamples, seed=seed)
        except CompareError as exc:
            why[key] = str(exc)
            continue
        diffs[key] = _diff(comparison)
    tested = [k for k, d in diffs.items() if d.mcnemar_p is not None]
    adjusted = holm([diffs[k].mcnemar_p or 0.0 for k in tested])
    for key, p in zip(tested, adjusted, strict=True):
        d = diffs[key]
        diffs[key] = BaselineDiff(d.n_pairs, d.metrics, d.mcnemar_p, p)
    return diffs, why


def _diff(comparison: Comparison) -> BaselineDiff:
    test = comparison.mcnemar
    return BaselineDiff(comparison.n_pairs, {m.name: m for m in comparison.metrics},
                        test.p_value if test is not None else None)
