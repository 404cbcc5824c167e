"""Episode metrics and their aggregation over a run (DESIGN §9).

Per episode: success, SPL, nDTW, SDTW, path length and navigation error, computed from
the env's :class:`~evaltui.engine.nodes.Trajectory`. Per run: the mean of each metric
over every scored episode (errors and timeouts count as failures: 0 in success, SPL,
nDTW and SDTW; left out of path length and nav error) with an exact Student-t 95%
confidence interval and the number of episodes behind it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evaltui.contract.states import EpisodeStatus
from evaltui.engine.episode.student_t import t_quantile_975
from evaltui.engine.nodes import Trajectory

Points = Sequence[Sequence[float]]

def _as_points(points: Points, what: str) -> np.ndarray:
    """``points`` as an (n, k) float array, or a ValueError naming ``what``."""
    arr = np.asarray(points, dtype=float)
    if arr.size == 0:
        raise ValueError(f"{what} has no points")
    if arr.ndim != 2:
        raise ValueError(f"{what} must be a sequence of points (n x k), got shape {arr.shape}")
    return arr


def path_length(positions: Points) -> float:
    """Length of a path: the sum of the Euclidean lengths of its steps (0 for one point)."""
    pts = _as_points(positions, "path")
    return float(np.linalg.norm(np.diff(pts, axis=0), axis=1).sum())


def dtw(query: Points, reference: Points) -> float:
    """Exact dynamic-time-warping cost between two paths (sum of matched Euclidean distances).

    Classic O(n*m) programme D[i,j] = c[i,j] + min(D[i-1,j], D[i,j-1], D[i-1,j-1]).
    """
    q = _as_points(query, "query path")
    r = _as_points(reference, "reference path")
    if q.shape[1] != r.shape[1]:
        raise ValueError(f"query points have {q.shape[1]} coordinates, reference {r.shape[1]}")
    cost = np.linalg.norm(q[:, None, :] - r[None, :, :], axis=2)
    # Within a row, D[i,j] depends on D[i,j-1], which defeats plain vectorisation. Unrolled,
    # D[i,j] = min_{k<=j} (a[k] + c[i,k+1] + ... + c[i,j]) with a[k] = c[i,k] + min(D[i-1,k],
    # D[i-1,k-1]): a cumulative sum plus a running minimum, both numpy primitives.
    row = np.cumsum(cost[0])
    for i in range(1, len(q)):
        c = cost[i]
        a = c + np.minimum(row, np.concatenate(([np.inf], row[:-1])))
        csum = np.cumsum(c)
        row = csum + np.minimum.accumulate(a - csum)
    # The subtraction can leave a rounding residue of a few ulps below zero on a perfect match.
    return max(float(row[-1]), 0.0)


def ndtw(query: Points, reference: Points, success_distance: float) -> float:
    """Normalised DTW in (0, 1]: exp(-DTW(Q, R) / (|R| * d_th)); 1 means Q follows R exactly."""
    if not success_distance > 0:
        raise ValueError(f"success_distance must be > 0, got {success_distance}")
    n_ref = len(_as_points(reference, "reference path"))
    return math.exp(-dtw(query, reference) / (n_ref * success_distance))


def spl(success: bool | float, geodesic_distance: float, path_len: float) -> float:
    """Success weighted by path length: S * d / max(d, path_len).

    When d == 0 and path_len == 0 (started at the goal and did not move) the result is S.
    """
    if geodesic_distance < 0 or path_len < 0:
        raise ValueError(f"distances must be >= 0, got d={geodesic_distance}, len={path_len}")
    s = float(success)
    longest = max(geodesic_distance, path_len)
    if longest == 0:
        return s
    return s * geodesic_distance / longest


def episode_metrics(
    trajectory: Trajectory,
    reference_path: Points | None,
    geodesic_distance: float | None,
    success_distance: float = 1.0,
    *,
    failed: bool = False,
) -> dict[str, float]:
    """All metrics of one episode, plus the env's own ``trajectory.extra`` entries.

    SPL needs the geodesic distance and nDTW/SDTW the reference path; a metric whose
    reference data is missing is left out (the run's ``metrics_n`` then shows it).
    ``failed`` (an ``error`` or ``timeout`` episode) is a failure in every metric that has
    a failure value (:data:`FAILURE_ZERO`: 0, whatever its partial trajectory scored) and
    has no path length or nav error (:data:`NO_FAILURE_VALUE`: a partial path's length
    says nothing about the policy); the env's extra entries are kept.
    """
    if len(trajectory.positions) == 0:
        raise ValueError("trajectory has no positions; the env must report at least the start")
    success = 0.0 if failed or not trajectory.success else 1.0
    length = path_length(trajectory.positions)
    metrics = {"success": success}
    if geodesic_distance is not None:
        metrics["spl"] = spl(success, float(geodesic_distance), length)
    if reference_path is not None:
        if len(reference_path) == 0:
            raise ValueError("reference path has no points")
        n = ndtw(trajectory.positions, reference_path, success_distance)
        metrics["ndtw"] = n
        metrics["sdtw"] = success * n
    metrics["path_length"] = length
    metrics["nav_error"] = float(trajectory.nav_error)
    if failed:
        metrics.update({k: 0.0 for k in FAILURE_ZERO if k in metrics})
        for name in NO_FAILURE_VALUE:
            del metrics[name]
    clash = sorted(set(trajectory.extra) & {*metrics, *FAILURE_ZERO, *NO_FAILURE_VALUE})
    if clash:
        # Silently letting either side win would report a number the user did not mean.
        raise ValueError(f"trajectory.extra redefines built-in metrics {clash}; rename them")
    metrics.update({k: float(v) for k, v in trajectory.extra.items()})
    return metrics


def failure_metrics(*, has_reference: bool, has_geodesic: bool) -> dict[str, float]:
    """The metrics of a failed episode that has no trajectory (e.g. its worker died)."""
    metrics = {"success": 0.0}
    if has_geodesic:
        metrics["spl"] = 0.0
    if has_reference:
        metrics["ndtw"] = 0.0
        metrics["sdtw"] = 0.0
    return metrics


def _finite_float(value: object) -> float | None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# The range each built-in metric lives in: a t interval around a mean near a bound can
# cross it (an SR of 0.93 over 30 episodes gives hi = 1.03), which is not a value the
# metric can take, so the interval is clipped to the range.
PATH_METRICS = ("spl", "ndtw", "sdtw")
"""The rates that need a reference path or a geodesic distance (a benchmark without paths,
as Meta-World, has none of them)."""
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "success": (0.0, 1.0), "spl": (0.0, 1.0), "ndtw": (0.0, 1.0), "sdtw": (0.0, 1.0),
    "path_length": (0.0, math.inf), "nav_error": (0.0, math.inf), "steps": (0.0, math.inf),
    "steps_to_success": (0.0, math.inf),
}


# An episode that ended in error or timeout is a failure, whatever its partial
# trajectory (DESIGN §12, amending §11): the metrics that have a failure value are 0 for
# it, so "over all episodes" is what the mean is over; path length and nav error have no
# failure value and leave it out (their n, shown beside them, is then the ok count).
FAILURE_ZERO = ("success", "spl", "ndtw", "sdtw")
NO_FAILURE_VALUE = ("path_length", "nav_error")
SCORED = frozenset({EpisodeStatus.OK, EpisodeStatus.ERROR, EpisodeStatus.TIMEOUT})


@dataclass(frozen=True)
class Aggregate:
    """Run-level metrics: mean, clipped 95% CI (None below 2 values) and n per metric."""

    means: dict[str, float]
    ci95: dict[str, list[float] | None]
    n: dict[str, int]


def row_values(row: Mapping) -> dict[str, float]:
    """The finite metric values one episode row contributes (failures zeroed)."""
    status = row.get("status")
    if status not in SCORED:
        return {}
    values: dict[str, float] = {}
    for name, raw in (row.get("metrics") or {}).items():
        x = _finite_float(raw)
        if x is not None:
            values[name] = x
    if status != EpisodeStatus.OK:
        values["success"] = 0.0  # always: a crash is never a success
        if "sdtw" in values:
            # Rows written before nDTW had a failure value carry sdtw but no ndtw: the
            # episode had a reference path, so its nDTW is a failure too.
            values.setdefault("ndtw", 0.0)
        for name in FAILURE_ZERO[1:]:
            if name in values:
                values[name] = 0.0
        for name in NO_FAILURE_VALUE:
            values.pop(name, None)
    return values


def mean_ci(name: str, xs: Sequence[float]) -> tuple[float, list[float] | None]:
    """Mean and the Student-t 95% CI of one metric's values, clipped to its range."""
    arr = np.asarray(xs, dtype=float)
    mean = float(arr.mean())
    if len(arr) < 2:
        return mean, None
    half = t_quantile_975(len(arr) - 1) * float(arr.std(ddof=1)) / math.sqrt(len(arr))
    low, high = metric_range(name, xs)
    return mean, [max(mean - half, low), min(mean + half, high)]


def mean_ci_of_sums(name: str, n: int, total: float, total_sq: float
                    ) -> tuple[float, list[float] | None]:
    """:func:`mean_ci` from a metric's running count, sum and sum of squares (a running
    run's snapshot, kept without its values; equal to it up to rounding)."""
    mean = total / n
    if n < 2:
        return mean, None
    var = max(0.0, (total_sq - total * mean) / (n - 1))
    half = t_quantile_975(n - 1) * math.sqrt(var) / math.sqrt(n)
    low, high = METRIC_RANGES.get(name, (-math.inf, math.inf))
    return mean, [max(mean - half, low), min(mean + half, high)]
def metric_range(name: str, xs: Sequence[float]) -> tuple[float, float]:
    """The range ``name``'s CI is clipped to: a built-in's own; an env's metric whose every
    value is a whole number >= 0 is a count, [0, inf) (``cliff_falls`` printed
    [-0.0489, 0.5489]); any other is not clipped (docs/statistics.md)."""
    if name in METRIC_RANGES:
        return METRIC_RANGES[name]
    if len(xs) and all(x >= 0 and float(x).is_integer() for x in xs):
        return 0.0, math.inf
    return -math.inf, math.inf


def aggregate(rows: Iterable[Mapping], *, ok_only: bool = False) -> Aggregate:
    """Mean, 95% CI and n of each metric over a run's episode rows.

    By default over every scored episode (``ok``, ``error``, ``timeout``), errors and
    timeouts counting as failures (:data:`FAILURE_ZERO`); ``ok_only`` restricts it to
    ``ok`` rows, for diagnosis. ``cancelled`` rows never count: resume re-runs them. Each
    metric is averaged over the rows that have a finite value for it, so a dataset row
    without a reference path leaves nDTW's n one short, and ``n`` says so.
    """
    values: dict[str, list[float]] = {}
    for row in rows:
        if ok_only and row.get("status") != EpisodeStatus.OK:
            continue
        for name, x in row_values(row).items():
            values.setdefault(name, []).append(x)
    means: dict[str, float] = {}
    cis: dict[str, list[float] | None] = {}
    for name, xs in values.items():
        means[name], cis[name] = mean_ci(name, xs)
    return Aggregate(means=means, ci95=cis, n={k: len(v) for k, v in values.items()})
