"""Episode metrics and run aggregation (DESIGN §9), checked against hand-computed values."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaltui.engine.episode.metrics import (
    aggregate,
    dtw,
    episode_metrics,
    failure_metrics,
    ndtw,
    path_length,
    spl,
    t_quantile_975,
)
from evaltui.engine.episode.student_t import (
    central_probability,
)
from evaltui.engine.nodes import Trajectory

LINE = [(0.0, 0.0), (1.0, 0.0), (2.0, 0.0)]


def naive_dtw(q, r) -> float:
    """Textbook DTW with a Python double loop, to check the vectorised one against."""
    n, m = len(q), len(r)
    d = [[math.inf] * (m + 1) for _ in range(n + 1)]
    d[0][0] = 0.0
    for i in range(n):
        for j in range(m):
            c = math.dist(q[i], r[j])
            d[i + 1][j + 1] = c + min(d[i][j + 1], d[i + 1][j], d[i][j])
    return d[n][m]


# --- path length -------------------------------------------------------------------


def test_path_length_sums_step_lengths() -> None:
    assert path_length(LINE) == pytest.approx(2.0)
    # 3-4-5 step then a unit step back: 5 + 1.
    assert path_length([(0, 0), (3, 4), (3, 3)]) == pytest.approx(6.0)


def test_path_length_of_a_single_point_is_zero() -> None:
    assert path_length([(4, 2)]) == 0.0


# --- DTW / nDTW --------------------------------------------------------------------


def test_identical_paths_have_zero_dtw_and_ndtw_one() -> None:
    assert dtw(LINE, LINE) == 0.0
    assert ndtw(LINE, LINE, success_distance=1.0) == 1.0


def test_dtw_hand_computed_perpendicular_paths() -> None:
    # Q along x, R along y from the same origin; c[i][j] = sqrt(i^2 + j^2):
    #   c = [[0, 1, 2], [1, √2, √5], [2, √5, √8]]
    #   D row 0 = [0, 1, 3]
    #   D row 1 = [1, √2 + 0, √5 + min(3, √2, 1)] = [1, √2, √5 + 1]
    #   D row 2 = [3, √5 + min(√2, 3, 1), √8 + min(√5+1, √5+1, √2)] = [3, √5 + 1, 3√2]
    q = LINE
    r = [(0, 0), (0, 1), (0, 2)]
    assert dtw(q, r) == pytest.approx(3 * math.sqrt(2))
    # |R| = 3, d_th = 1.
    assert ndtw(q, r, 1.0) == pytest.approx(math.exp(-math.sqrt(2)))


def test_dtw_warps_many_query_points_onto_few_reference_points() -> None:
    # R = two endpoints; best alignment: (0,0)->R0 0, (1,0)->R0 1, (2,0)->R1 1, (3,0)->R1 0.
    q = [(0, 0), (1, 0), (2, 0), (3, 0)]
    r = [(0, 0), (3, 0)]
    assert dtw(q, r) == pytest.approx(2.0)
    assert ndtw(q, r, success_distance=2.0) == pytest.approx(math.exp(-2.0 / (2 * 2.0)))


def test_repeated_query_points_matched_to_the_same_point_cost_nothing() -> None:
    q = [(0, 0), (0, 0), (1, 0), (1, 0), (1, 0), (2, 0)]
    assert dtw(q, LINE) == 0.0
    assert ndtw(q, LINE, 1.0) == 1.0


def test_agent_that_never_moves_is_scored_against_the_reference() -> None:
    # The single start point is matched to every reference point: 0 + 1 + 2 = 3.
    q = [(0, 0)]
    assert dtw(q, LINE) == pytest.approx(3.0)
    assert ndtw(q, LINE, 1.0) == pytest.approx(math.exp(-3.0 / 3))


def test_reference_of_one_point() -> None:
    # Every query point is matched to the goal (2,0): 2 + 1 + 0 = 3, and |R| = 1.
    assert dtw(LINE, [(2, 0)]) == pytest.approx(3.0)
    assert ndtw(LINE, [(2, 0)], 1.0) == pytest.approx(math.exp(-3.0))


def test_dtw_rejects_bad_paths() -> None:
    with pytest.raises(ValueError, match="no points"):
        dtw([], LINE)
    with pytest.raises(ValueError, match="coordinates"):
        dtw([(0, 0, 0)], LINE)
    with pytest.raises(ValueError, match="success_distance"):
        ndtw(LINE, LINE, 0.0)


@given(
    q=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=1, max_size=12),
    r=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=1, max_size=12),
    d_th=st.floats(0.5, 5.0),
)
def test_dtw_properties(q, r, d_th) -> None:
    # Integer grid cells as on BabyAI: any mismatch costs >= 1, so exp() cannot round to 1.
    d = dtw(q, r)
    assert d == pytest.approx(naive_dtw(q, r), rel=1e-12, abs=1e-9)
    assert dtw(r, q) == pytest.approx(d, rel=1e-12, abs=1e-9)
    n = ndtw(q, r, d_th)
    assert 0.0 < n <= 1.0
    assert (n == 1.0) == (d == 0.0)


@pytest.mark.bench
def test_dtw_500x500_is_fast() -> None:
    rng = np.random.default_rng(0)
    q, r = rng.uniform(0, 20, (500, 2)), rng.uniform(0, 20, (500, 2))
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        dtw(q, r)
        best = min(best, time.perf_counter() - start)
    print(f"dtw 500x500: {best * 1000:.1f} ms")
    assert best < 0.05


# --- SPL ---------------------------------------------------------------------------


def test_spl_is_one_for_an_optimal_successful_path() -> None:
    assert spl(True, 4.0, 4.0) == 1.0


def test_spl_below_one_when_the_path_is_longer() -> None:
    assert spl(True, 4.0, 5.0) == pytest.approx(0.8)


def test_spl_caps_at_one_when_the_path_is_shorter_than_the_geodesic() -> None:
    assert spl(1.0, 4.0, 3.0) == 1.0


def test_spl_is_zero_without_success() -> None:
    assert spl(False, 4.0, 4.0) == 0.0
    assert spl(False, 4.0, 0.0) == 0.0  # never moved


def test_spl_with_zero_geodesic_distance() -> None:
    # Started on the goal and stayed: the 0/0 case is defined as S.
    assert spl(True, 0.0, 0.0) == 1.0
    assert spl(False, 0.0, 0.0) == 0.0
    # Started on the goal but wandered off and back: S * 0 / 2 = 0 despite success.
    assert spl(True, 0.0, 2.0) == 0.0


# --- episode_metrics ---------------------------------------------------------------


def test_episode_metrics_of_a_detour() -> None:
    # Goal at (2,0), d = 2; the agent goes up, across and down: path length 4.
    traj = Trajectory(
        positions=[(0, 0), (0, 1), (1, 1), (2, 1), (2, 0)],
        success=True,
        nav_error=0.0,
        extra={"steps": 7},
    )
    m = episode_metrics(traj, LINE, geodesic_distance=2.0, success_distance=1.0)
    # DTW: (0,0)-R0 0, (0,1)-R0 1, (1,1)-R1 1, (2,1)-R2 1, (2,0)-R2 0 = 3; |R| = 3.
    n = math.exp(-3.0 / 3)
    assert m == pytest.approx(
        {
            "success": 1.0,
            "spl": 0.5,
            "ndtw": n,
            "sdtw": n,
            "path_length": 4.0,
            "nav_error": 0.0,
            "steps": 7.0,
        }
    )


def test_episode_metrics_of_an_agent_that_never_moves() -> None:
    traj = Trajectory(positions=[(0, 0)], success=False, nav_error=2.0)
    m = episode_metrics(traj, LINE, geodesic_distance=2.0)
    assert m["path_length"] == 0.0
    assert m["spl"] == 0.0
    assert m["sdtw"] == 0.0
    assert m["ndtw"] == pytest.approx(math.exp(-1.0))
    assert m["nav_error"] == 2.0
    assert set(m) == {"success", "spl", "ndtw", "sdtw", "path_length", "nav_error"}


def test_episode_metrics_rejects_empty_paths() -> None:
    with pytest.raises(ValueError, match="trajectory has no positions"):
        episode_metrics(Trajectory([], False, 1.0), LINE, 2.0)
    with pytest.raises(ValueError, match="reference path has no points"):
        episode_metrics(Trajectory([(0, 0)], False, 1.0), [], 2.0)


def test_episode_metrics_rejects_extra_that_shadows_a_builtin() -> None:
    traj = Trajectory([(0, 0)], True, 0.0, extra={"spl": 1.0})
    with pytest.raises(ValueError, match="spl"):
        episode_metrics(traj, [(0, 0)], 0.0)


def test_a_failed_episode_scores_zero_wherever_failure_has_a_value() -> None:
    """DESIGN §12: a partial path that followed the reference keeps no nDTW of 1.0."""
    traj = Trajectory([(0, 0), (1, 0), (2, 0)], True, 0.0, extra={"steps": 2})
    m = episode_metrics(traj, LINE, 2.0, 1.0, failed=True)  # reached the goal, then crashed
    assert m == {"success": 0.0, "spl": 0.0, "ndtw": 0.0, "sdtw": 0.0, "steps": 2.0}


def test_missing_reference_data_leaves_out_only_the_metrics_that_need_it() -> None:
    traj = Trajectory([(0, 0), (1, 0)], False, 1.0)
    assert set(episode_metrics(traj, None, 2.0)) == {"success", "spl", "path_length",
                                                      "nav_error"}
    assert set(episode_metrics(traj, LINE, None)) == {"success", "ndtw", "sdtw",
                                                      "path_length", "nav_error"}
    assert failure_metrics(has_reference=True, has_geodesic=False) == {"success": 0.0,
                                                                       "ndtw": 0.0,
                                                                       "sdtw": 0.0}


# --- aggregation -------------------------------------------------------------------


def test_t_quantile_spot_checks() -> None:
    # Published values (e.g. NIST/SEMATECH e-Handbook table of t critical values).
    assert t_quantile_975(1) == pytest.approx(12.706204736174698, abs=1e-12)
    assert t_quantile_975(2) == pytest.approx(4.302652729749464, abs=1e-12)
    assert t_quantile_975(30) == pytest.approx(2.0422724563012373, abs=1e-12)
    assert t_quantile_975(10**9) == pytest.approx(1.959963986912325, abs=1e-14)


def test_t_quantile_agrees_with_scipy_for_n_2_to_10000() -> None:
    """Issue 9: the CI multiplier is exact, not a rounded table (n = df + 1)."""
    from scipy import stats  # the reference implementation (a test dependency)

    df = np.arange(1, 10_000)
    reference = stats.t.ppf(0.975, df)
    ours = np.array([t_quantile_975(int(d)) for d in df])
    diff = np.abs(ours - reference)
    assert diff.max() < 1e-12, f"largest difference {diff.max():.3g} at df={df[diff.argmax()]}"


def test_central_probability_matches_closed_forms() -> None:
    # df = 1 (Cauchy): P(|T| <= t) = 2 atan(t) / pi; df = 2: t / sqrt(2 + t^2).
    for t in (0.1, 1.0, 3.7):
        assert central_probability(t, 1) == pytest.approx(2 * math.atan(t) / math.pi, rel=1e-15)
        assert central_probability(t, 2) == pytest.approx(t / math.sqrt(2 + t * t), rel=1e-15)


def test_aggregate_ci_for_a_known_sample() -> None:
    # [-0.25,0.75,0.75,0.75]: mean 0.5, s = 0.5, half-width = t(3) * 0.5 / sqrt(4).
    # (A metric name with no range, and not a count -- whole numbers >= 0 are one, whose
    # interval is clipped at 0 -- so the interval is not clipped.)
    rows = [{"status": "ok", "metrics": {"score": v}} for v in (-0.25, 0.75, 0.75, 0.75)]
    agg = aggregate(rows)
    assert agg.means == {"score": 0.5} and agg.n == {"score": 4}
    lo, hi = agg.ci95["score"]
    half = 3.1824463052837078 * 0.5 / 2  # t_{0.975, 3}
    assert lo == pytest.approx(0.5 - half, abs=1e-14)
    assert hi == pytest.approx(0.5 + half, abs=1e-14)


def test_aggregate_counts_errors_and_timeouts_as_failures() -> None:
    rows = [
        {"status": "ok", "metrics": {"success": 1.0, "spl": 0.8, "ndtw": 0.9, "sdtw": 0.9}},
        # an error row that claims success: the error rule zeroes it anyway
        {"status": "error", "metrics": {"success": 1.0, "spl": 0.5, "ndtw": 0.4, "sdtw": 0.4}},
        {"status": "timeout", "metrics": {}},
        {"status": "cancelled", "metrics": {"success": 1.0}},
        {"status": "ok", "metrics": {"success": 0.0, "spl": 0.0, "ndtw": 0.2, "sdtw": 0.0}},
    ]
    agg = aggregate(rows)
    assert agg.means["success"] == pytest.approx(1 / 4)
    assert agg.n == {"success": 4, "spl": 3, "ndtw": 3, "sdtw": 3}
    assert agg.means["spl"] == pytest.approx(0.8 / 3)
    assert agg.means["ndtw"] == pytest.approx((0.9 + 0.0 + 0.2) / 3)  # a failure is 0
    ok = aggregate(rows, ok_only=True)
    assert ok.means["success"] == 0.5 and ok.n["success"] == 2


def test_aggregate_single_episode_has_no_ci() -> None:
    agg = aggregate([{"status": "ok", "metrics": {"spl": 0.4}}])
    assert agg.means == {"spl": 0.4}
    assert agg.ci95 == {"spl": None}


def test_aggregate_without_scored_rows_is_empty() -> None:
    empty = aggregate([])
    assert (empty.means, empty.ci95, empty.n) == ({}, {}, {})
    assert aggregate([{"status": "cancelled", "metrics": {"spl": 1.0}}]).means == {}
    assert aggregate([{"status": "error", "metrics": {"spl": 1.0}}]).means == {
        "success": 0.0, "spl": 0.0}


def test_aggregate_identical_values_give_a_zero_width_ci() -> None:
    agg = aggregate([{"status": "ok", "metrics": {"spl": 0.5}}] * 3)
    assert agg.means == {"spl": 0.5}
    assert agg.ci95 == {"spl": [0.5, 0.5]}


def test_aggregate_averages_each_metric_over_rows_that_have_a_finite_value() -> None:
    rows = [
        {"status": "ok", "metrics": {"success": 1.0, "steps": 10.0}},
        {"status": "ok", "metrics": {"success": 0.0}},
        {"status": "ok", "metrics": {"success": 1.0, "steps": float("nan")}},
        {"status": "ok", "metrics": {"success": float("inf"), "steps": 20.0}},
    ]
    agg = aggregate(rows)
    assert agg.means == pytest.approx({"success": 2 / 3, "steps": 15.0})
    assert agg.n == {"success": 3, "steps": 2}


def test_aggregate_clips_ci_to_the_metric_range() -> None:
    # 28 successes of 30: the t interval's upper end is 1.03, which no SR can be.
    rows = [{"status": "ok", "metrics": {"success": float(i >= 2), "nav_error": float(i < 2),
                                         "custom": float(i >= 2)}} for i in range(30)]
    agg = aggregate(rows)
    assert agg.ci95["success"][1] == 1.0 and agg.ci95["success"][0] < agg.means["success"]
    assert agg.ci95["nav_error"][0] == 0.0
    assert agg.ci95["custom"][1] > 1.0  # unknown metrics are not clipped


def test_aggregate_leaves_failures_out_only_of_metrics_without_a_failure_value() -> None:
    """3 of 6 timed out: nDTW and nav error are not the ok episodes' 1.0 and 0.0 (issue 24)."""
    ok = {"success": 1.0, "spl": 1.0, "ndtw": 1.0, "sdtw": 1.0, "path_length": 4.0,
          "nav_error": 0.0}
    rows = [{"status": "ok", "metrics": dict(ok)} for _ in range(3)]
    # a row as older runs stored it: partial path length and nav error, sdtw but no ndtw
    rows += [{"status": "timeout", "metrics": {"success": 0.0, "spl": 0.0, "sdtw": 0.0,
                                               "path_length": 9.0, "nav_error": 5.0}}]
    rows += [{"status": "error", "metrics": failure_metrics(has_reference=True,
                                                            has_geodesic=True)}] * 2
    agg = aggregate(rows)
    assert agg.means["success"] == agg.means["ndtw"] == agg.means["sdtw"] == 0.5
    assert agg.means["spl"] == 0.5
    assert agg.n == {"success": 6, "spl": 6, "ndtw": 6, "sdtw": 6, "path_length": 3,
                     "nav_error": 3}
    assert agg.means["path_length"] == 4.0 and agg.means["nav_error"] == 0.0
    assert aggregate(rows, ok_only=True).means["ndtw"] == 1.0
