"""Episode metrics and their aggregation over a run (DESIGN §9).

Per episode: success, SPL, nDTW, SDTW, path length and navigation error, computed from
the env's :class:`~evaltui.engine.nodes.Trajectory`. Per run: the mean of each metric
over ``ok`` episodes with a Student-t 95% confidence interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from evaltui.engine.nodes import Trajectory
from evaltui.states import EpisodeStatus

Points = Sequence[Sequence[float]]

# t_{0.975, df} for df = 1..30 (two-sided 95%), rounded to 6 decimals (abs error <= 5e-7).
_T975_TABLE = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582,
    2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
    2.200985, 2.178813, 2.160369, 2.144787, 2.131450,
    2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
    2.079614, 2.073873, 2.068658, 2.063899, 2.059539,
    2.055529, 2.051831, 2.048407, 2.045230, 2.042272,
)  # fmt: skip
_Z975 = 1.959963984540054


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
    reference_path: Points,
    geodesic_distance: float,
    success_distance: float = 1.0,
) -> dict[str, float]:
    """All metrics of one finished episode, plus the env's own ``trajectory.extra`` entries."""
    if len(trajectory.positions) == 0:
        raise ValueError("trajectory has no positions; the env must report at least the start")
    if len(reference_path) == 0:
        raise ValueError("reference path has no points")
    success = 1.0 if trajectory.success else 0.0
    length = path_length(trajectory.positions)
    n = ndtw(trajectory.positions, reference_path, success_distance)
    metrics = {
        "success": success,
        "spl": spl(success, geodesic_distance, length),
        "ndtw": n,
        "sdtw": success * n,
        "path_length": length,
        "nav_error": float(trajectory.nav_error),
    }
    clash = sorted(set(trajectory.extra) & set(metrics))
    if clash:
        # Silently letting either side win would report a number the user did not mean.
        raise ValueError(f"trajectory.extra redefines built-in metrics {clash}; rename them")
    metrics.update({k: float(v) for k, v in trajectory.extra.items()})
    return metrics


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (95% two-sided CI).

    Exact table (6 decimals) for df <= 30; above, the Cornish-Fisher expansion around the
    normal quantile to 1/df^4 (Abramowitz & Stegun 26.7.5), abs error < 3e-8 for df > 30.
    """
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if df <= len(_T975_TABLE):
        return _T975_TABLE[df - 1]
    z = _Z975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _finite_float(value: object) -> float | None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# The range each built-in metric lives in: a t interval around a mean near a bound can
# cross it (an SR of 0.93 over 30 episodes gives hi = 1.03), which is not a value the
# metric can take, so the interval is clipped to the range.
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "success": (0.0, 1.0), "spl": (0.0, 1.0), "ndtw": (0.0, 1.0), "sdtw": (0.0, 1.0),
    "path_length": (0.0, math.inf), "nav_error": (0.0, math.inf), "steps": (0.0, math.inf),
}


def aggregate(
    rows: Iterable[Mapping],
) -> tuple[dict[str, float], dict[str, list[float] | None]]:
    """Run-level metrics: (mean, 95% CI [lo, hi]) per metric over the ``ok`` episode rows.

    Each metric is averaged over the ok rows that report a finite value for it; a metric
    with a single value has CI None, one with no values is left out. CIs of the metrics in
    METRIC_RANGES are clipped to their range.
    """
    values: dict[str, list[float]] = {}
    for row in rows:
        if row.get("status") != EpisodeStatus.OK:
            continue
        for name, raw in (row.get("metrics") or {}).items():
            x = _finite_float(raw)
            if x is not None:
                values.setdefault(name, []).append(x)
    means: dict[str, float] = {}
    cis: dict[str, list[float] | None] = {}
    for name, xs in values.items():
        arr = np.asarray(xs)
        mean = float(arr.mean())
        means[name] = mean
        if len(arr) < 2:
            cis[name] = None
            continue
        half = t_quantile_975(len(arr) - 1) * float(arr.std(ddof=1)) / math.sqrt(len(arr))
        low, high = METRIC_RANGES.get(name, (-math.inf, math.inf))
        cis[name] = [max(mean - half, low), min(mean + half, high)]
    return means, cis
