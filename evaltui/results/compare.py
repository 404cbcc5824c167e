"""Paired comparison of two runs over the same episodes (pure logic, no I/O).

Episodes are matched by ``episode_id``. Per metric: the mean of A and of B, the mean
difference B - A with a paired bootstrap 95% CI (percentile method), and the number of
pairs. On success: an exact McNemar test and the episodes that flipped.

Which rows count: status ok, error and timeout (failures count, as the run's own
aggregates do, DESIGN §12: an error/timeout row scores 0 on ``success``, ``spl``, ``ndtw``
and ``sdtw``, whatever it stored, and is left out of ``path_length`` and ``nav_error``);
``cancelled`` rows are not comparable, like missing episodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

COMPARABLE_STATUSES = frozenset({"ok", "error", "timeout"})
FAILED_STATUSES = frozenset({"error", "timeout"})
ZERO_ON_FAILURE = ("success", "spl", "ndtw", "sdtw")
"""Metrics an errored or timed-out episode scores 0 on even when its row omits them."""
NO_FAILURE_VALUE = ("path_length", "nav_error")
"""Metrics an errored or timed-out episode has no value for (left out of their pairs)."""
METRIC_ORDER = ("success", "spl", "ndtw", "sdtw", "path_length", "nav_error")
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
_EXAMPLES = 5
_DRAW_ELEMENTS = 1 << 20  # indices drawn at once by the bootstrap (8 MiB)


class CompareError(ValueError):
    """The two runs cannot be compared as asked (bad input)."""


class EpisodeSetMismatch(CompareError):
    """The runs' comparable episode sets differ and the caller did not ask to intersect."""

    def __init__(self, *, only_a: Sequence[str], only_b: Sequence[str], shared: int) -> None:
        self.only_a, self.only_b, self.shared = list(only_a), list(only_b), shared
        parts = [f"{len(ids)} only in {side}{_examples(ids)}"
                 for side, ids in (("A", self.only_a), ("B", self.only_b)) if ids]
        super().__init__(f"episode sets differ: {', '.join(parts)}; {shared} shared")


@dataclass(frozen=True)
class MetricDiff:
    """One metric over the episode pairs that report it in both runs."""

    name: str
    n: int
    mean_a: float
    mean_b: float
    diff: float
    """mean(B - A) over the pairs."""
    ci95: tuple[float, float] | None
    """Paired bootstrap percentile 95% CI of ``diff``; None with fewer than 2 pairs."""


@dataclass(frozen=True)
class Flip:
    """An episode whose success differs between the runs."""

    episode_id: str
    index_a: int | None
    index_b: int | None


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on success: b = A success & B fail, c = A fail & B success."""

    b: int
    c: int
    n: int
    p_value: float


@dataclass(frozen=True)
class Comparison:
    """Run B against run A."""

    n_pairs: int
    metrics: list[MetricDiff]
    mcnemar: McNemar | None
    """None when neither run reports success."""
    lost: list[Flip]
    """A success -> B failure."""
    gained: list[Flip]
    """A failure -> B success."""
    resamples: int
    seed: int
    dropped_a: list[str] = field(default_factory=list)
    """With intersect: comparable episode ids only A has (left out)."""
    dropped_b: list[str] = field(default_factory=list)


def comparable_rows(rows: Iterable[Mapping[str, Any]], *, label: str) -> dict[str, Mapping]:
    """The comparable rows of one run by episode_id (duplicate or missing ids: CompareError)."""
    by_id: dict[str, Mapping[str, Any]] = {}
    seen: set[str] = set()
    for row in rows:
        episode_id = row.get("episode_id")
        if not isinstance(episode_id, str) or not episode_id:
            raise CompareError(f"run {label}: episode {row.get('episode_index')} has no "
                               "episode_id to match on")
        if episode_id in seen:
            raise CompareError(f"run {label}: episode_id {episode_id} appears more than once")
        seen.add(episode_id)
        if row.get("status") in COMPARABLE_STATUSES:
            by_id[episode_id] = row
    return by_id


def run_values(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Each comparable row's finite metric values by episode_id, failure zeros filled in.

    An error/timeout row scores success 0, and spl/ndtw/sdtw 0 when the run reports them
    at all (the contract writes those zeros only when the dataset row allows the metric);
    its path length and nav error, if an older writer left them, are dropped.
    """
    values = {eid: _finite_metrics(row) for eid, row in rows.items()}
    reported = set().union(*values.values()) if values else set()
    for eid, row in rows.items():
        if row.get("status") in FAILED_STATUSES:
            values[eid]["success"] = 0.0  # the contract's rule, whatever a writer left
            for name in ZERO_ON_FAILURE[1:]:
                if name in reported:
                    values[eid][name] = 0.0
            for name in NO_FAILURE_VALUE:
                values[eid].pop(name, None)
    return values


def _finite_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    values: dict[str, float] = {}
    for name, raw in (row.get("metrics") or {}).items():
        if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
            values[str(name)] = float(raw)
    return values


def mcnemar_exact(*, b: int, c: int) -> float:
    """Two-sided exact McNemar p: min(1, 2 P(X <= min(b, c))), X ~ Binom(b + c, 1/2)."""
    if b < 0 or c < 0:
        raise ValueError(f"counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    # Exact integers throughout (C(n, k+1) = C(n, k) (n - k) / (k + 1)), one rounding at
    # the end: no underflow of 2**-n at large n, no cancellation.
    term = tail = 1
    for k in range(min(b, c)):
        term = term * (n - k) // (k + 1)
        tail += term
    return min(1.0, 2 * tail / 2**n)


def bootstrap_ci(diffs: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED) -> tuple[float, float] | None:
    """Percentile 95% CI of mean(diffs) over ``resamples`` resamples of the pairs.

    A fresh ``np.random.default_rng(seed)`` draws, for each resample in turn,
    ``integers(0, n, size=n)`` pair indices; the CI is ``np.percentile`` (linear) at
    2.5 and 97.5 of the resampled means. Each metric gets its own fresh generator, so a
    metric's CI does not depend on which other metrics were compared.
    """
    arr = np.asarray(diffs, dtype=float)
    n = len(arr)
    if n < 2:
        return None
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    # Blocks of whole resamples keep memory bounded at any n. A (k, n) draw yields the
    # same indices as k draws of n in a row (the generator keeps its own 32-bit buffer),
    # so the result is the per-resample definition above; a test holds it to that.
    block = max(1, _DRAW_ELEMENTS // n)
    for start in range(0, resamples, block):
        k = min(block, resamples - start)
        means[start : start + k] = arr[rng.integers(0, n, size=(k, n))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def compare_rows(rows_a: Iterable[Mapping[str, Any]], rows_b: Iterable[Mapping[str, Any]], *,
                 intersect: bool = False, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED) -> Comparison:
    """Compare run B's episode rows against run A's (see the module docstring)."""
    a = comparable_rows(rows_a, label="A")
    b = comparable_rows(rows_b, label="B")
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    shared = [eid for eid in a if eid in b]  # A's order: episode_index order when loaded
    if (only_a or only_b) and not intersect:
        raise EpisodeSetMismatch(only_a=only_a, only_b=only_b, shared=len(shared))
    if not shared:
        raise CompareError("the runs have no comparable episode in common")
    all_a, all_b = run_values(a), run_values(b)
    values_a = {eid: all_a[eid] for eid in shared}
    values_b = {eid: all_b[eid] for eid in shared}
    # Metrics both runs report.
    names = ordered_metrics(set().union(*values_a.values()) & set().union(*values_b.values()))
    metrics = []
    for name in names:
        pairs = [(values_a[e][name], values_b[e][name]) for e in shared
                 if name in values_a[e] and name in values_b[e]]
        if not pairs:
            continue
        xa, xb = np.array(pairs, dtype=float).T
        metrics.append(MetricDiff(
            name=name, n=len(pairs), mean_a=float(xa.mean()), mean_b=float(xb.mean()),
            diff=float((xb - xa).mean()),
            ci95=bootstrap_ci(xb - xa, resamples=resamples, seed=seed)))
    lost, gained, mcnemar = _flips(shared, a, b, values_a, values_b)
    return Comparison(n_pairs=len(shared), metrics=metrics, mcnemar=mcnemar, lost=lost,
                      gained=gained, resamples=resamples, seed=seed,
                      dropped_a=only_a, dropped_b=only_b)


def _flips(shared: list[str], a: Mapping[str, Mapping], b: Mapping[str, Mapping],
           values_a: Mapping[str, dict[str, float]], values_b: Mapping[str, dict[str, float]]
           ) -> tuple[list[Flip], list[Flip], McNemar | None]:
    both = [e for e in shared if "success" in values_a[e] and "success" in values_b[e]]
    if not both:
        return [], [], None
    lost: list[Flip] = []
    gained: list[Flip] = []
    for eid in both:
        sa, sb = values_a[eid]["success"] > 0, values_b[eid]["success"] > 0
        if sa != sb:
            flip = Flip(eid, _int(a[eid].get("episode_index")), _int(b[eid].get("episode_index")))
            (lost if sa else gained).append(flip)
    test = McNemar(b=len(lost), c=len(gained), n=len(both),
                   p_value=mcnemar_exact(b=len(lost), c=len(gained)))
    return lost, gained, test


def ordered_metrics(names: Iterable[str]) -> list[str]:
    """``names`` in the order tables show them: the standard ones first, then by name."""
    names = set(names)
    return [m for m in METRIC_ORDER if m in names] + sorted(names - set(METRIC_ORDER))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _examples(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_EXAMPLES])
    return f" ({shown}{', ...' if len(ids) > _EXAMPLES else ''})"
