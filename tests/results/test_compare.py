"""Paired comparison: pairing, failure zeros, McNemar and the bootstrap, recomputed here."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import resultruns as rr

from evaltui.results.compare import (
    CompareError,
    EpisodeSetMismatch,
    bootstrap_ci,
    compare_rows,
    mcnemar_exact,
)


def _expected_columns() -> dict[str, tuple[list[float], list[float]]]:
    """Per metric, the (A, B) values of the pairs that have it, written out by hand."""
    sdtw_a = [s * n for s, n in zip(rr.SUCCESS_A[:11], rr.NDTW_A[:11], strict=True)] + [0.0]
    sdtw_b = [s * n for s, n in zip(rr.SUCCESS_B, rr.NDTW_B, strict=True)]
    sdtw_b[10] = 0.0  # timed out: scores 0 although it has an nDTW
    nav_a = [0.0 if s else 2.0 for s in rr.SUCCESS_A]
    nav_b = [0.0 if s else 1.0 for s in rr.SUCCESS_B]
    keep_nav = [i for i in range(12) if i not in (10, 11)]  # B 10 and A 11 have none
    # DESIGN §12: nDTW has a failure value (0); path length has none, so the failed
    # episodes (A 11 error, B 10 timeout) leave its pairs.
    ndtw_b = list(rr.NDTW_B)
    ndtw_b[10] = 0.0  # timed out: scores 0 although it stored an nDTW
    return {
        "success": ([float(x) for x in rr.SUCCESS_A], [float(x) for x in rr.SUCCESS_B]),
        "spl": (rr.SPL_A, rr.SPL_B),  # A 11 (error) and B 10 (timeout) are 0 in the lists
        "ndtw": ([*rr.NDTW_A[:11], 0.0], ndtw_b),
        "sdtw": (sdtw_a, sdtw_b),
        "path_length": ([rr.PATH_A[i] for i in keep_nav], [rr.PATH_B[i] for i in keep_nav]),
        "nav_error": ([nav_a[i] for i in keep_nav], [nav_b[i] for i in keep_nav]),
    }


def _reference_ci(diffs: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    """The bootstrap as its definition reads: one draw of n indices per resample."""
    rng = np.random.default_rng(seed)
    means = [diffs[rng.integers(0, len(diffs), size=len(diffs))].mean()
             for _ in range(resamples)]
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def test_means_n_and_bootstrap_match_an_independent_computation() -> None:
    result = compare_rows(rr.rows_a(), rr.rows_b(), resamples=2000, seed=7)
    expected = _expected_columns()
    assert result.n_pairs == 12  # the cancelled episode 12 is not comparable
    assert [m.name for m in result.metrics] == list(expected)  # only_a is A's alone
    for m in result.metrics:
        a, b = (np.array(x, dtype=float) for x in expected[m.name])
        assert m.n == len(a), m.name
        assert m.mean_a == pytest.approx(a.mean(), abs=1e-12), m.name
        assert m.mean_b == pytest.approx(b.mean(), abs=1e-12), m.name
        assert m.diff == pytest.approx((b - a).mean(), abs=1e-12), m.name
        lo, hi = _reference_ci(b - a, 2000, 7)
        assert m.ci95 == pytest.approx((lo, hi), abs=1e-12), m.name
    assert result.resamples == 2000 and result.seed == 7
    success = result.metrics[0]
    assert success.mean_a == pytest.approx(3 / 12) and success.mean_b == pytest.approx(9 / 12)


def test_flips_and_mcnemar_of_the_fixture() -> None:
    result = compare_rows(rr.rows_a(), rr.rows_b(), resamples=10)
    assert [f.episode_id for f in result.gained] == [rr.episode_id(i) for i in range(7)]
    assert [(f.episode_id, f.index_a, f.index_b) for f in result.lost] == \
        [(rr.episode_id(7), 7, 7)]
    assert result.mcnemar is not None
    assert (result.mcnemar.b, result.mcnemar.c, result.mcnemar.n) == (1, 7, 12)
    assert result.mcnemar.p_value == 0.0703125  # 2 * (1 + 8) / 2**8, by hand


def _enumerated_p(b: int, c: int) -> float:
    """Two-sided exact p by listing every outcome of n fair coins: P(min(X, n-X) <= m)."""
    n, m = b + c, min(b, c)
    if n == 0:
        return 1.0
    hits = sum(1 for flips in itertools.product((0, 1), repeat=n)
               if min(sum(flips), n - sum(flips)) <= m)
    return hits / 2**n


@pytest.mark.parametrize("b, c", [(b, c) for b in range(9) for c in range(9)])
def test_mcnemar_matches_enumeration(b: int, c: int) -> None:
    assert mcnemar_exact(b=b, c=c) == pytest.approx(_enumerated_p(b, c), abs=1e-15)


def test_mcnemar_edge_cases() -> None:
    assert mcnemar_exact(b=1, c=7) == 0.0703125
    assert mcnemar_exact(b=7, c=1) == 0.0703125
    assert mcnemar_exact(b=0, c=0) == 1.0
    assert mcnemar_exact(b=5, c=5) == 1.0
    # Large counts stay exact: 2 * P(X <= 400), X ~ Binom(1000, 1/2) = 2.7e-10.
    assert mcnemar_exact(b=400, c=600) == pytest.approx(
        2 * sum(math.comb(1000, k) for k in range(401)) / 2**1000, rel=1e-12)
    with pytest.raises(ValueError):
        mcnemar_exact(b=-1, c=2)


def test_bootstrap_blocks_equal_one_draw_per_resample() -> None:
    # n = 4099 makes the drawing blocks hold an odd count of indices: the 32-bit halves
    # the generator buffers must carry over from one block to the next.
    diffs = np.random.default_rng(3).normal(size=4099)
    assert bootstrap_ci(diffs, resamples=600, seed=11) == _reference_ci(diffs, 600, 11)
    assert bootstrap_ci([0.5], resamples=100) is None
    assert bootstrap_ci([1.0, 1.0, 1.0], resamples=50) == (1.0, 1.0)


def test_seed_changes_the_ci_but_not_the_means() -> None:
    one = compare_rows(rr.rows_a(), rr.rows_b(), resamples=500, seed=0)
    two = compare_rows(rr.rows_a(), rr.rows_b(), resamples=500, seed=1)
    assert [m.diff for m in one.metrics] == [m.diff for m in two.metrics]
    assert one.metrics[1].ci95 != two.metrics[1].ci95
    again = compare_rows(rr.rows_a(), rr.rows_b(), resamples=500, seed=0)
    assert again == one


def test_mismatched_episode_sets_are_an_error_unless_intersected() -> None:
    rows_b = rr.rows_b()
    rows_b[3]["status"] = "cancelled"  # not comparable: as if missing from B
    rows_b.append(rr.episode_row(20, "ok", {"success": 1.0}))
    with pytest.raises(EpisodeSetMismatch) as info:
        compare_rows(rr.rows_a(), rows_b, resamples=10)
    assert str(info.value) == ("episode sets differ: 1 only in A (GoToLocal-0003), 1 only in "
                               "B (GoToLocal-0020); 11 shared")
    result = compare_rows(rr.rows_a(), rows_b, intersect=True, resamples=10)
    assert result.n_pairs == 11
    assert (result.dropped_a, result.dropped_b) == (["GoToLocal-0003"], ["GoToLocal-0020"])
    assert result.mcnemar is not None and (result.mcnemar.b, result.mcnemar.c) == (1, 6)


def test_mismatch_message_shows_a_few_ids() -> None:
    with pytest.raises(EpisodeSetMismatch, match=r"^episode sets differ: 7 only in A "
                       r"\(GoToLocal-0005, GoToLocal-0006, GoToLocal-0007, GoToLocal-0008, "
                       r"GoToLocal-0009, \.\.\.\); 5 shared$"):
        compare_rows(rr.rows_a(), rr.rows_b()[:5], resamples=10)


def test_duplicate_or_missing_episode_ids_are_errors() -> None:
    rows = rr.rows_a()
    rows[4]["episode_id"] = rows[2]["episode_id"]
    with pytest.raises(CompareError, match="run A: episode_id GoToLocal-0002 appears more"):
        compare_rows(rows, rr.rows_b(), resamples=10)
    rows = rr.rows_b()
    del rows[0]["episode_id"]
    with pytest.raises(CompareError, match="run B: episode 0 has no episode_id"):
        compare_rows(rr.rows_a(), rows, resamples=10)
    with pytest.raises(CompareError, match="no comparable episode in common"):
        compare_rows(rr.rows_a()[:2], rr.rows_b()[5:], intersect=True, resamples=10)


def test_spl_is_not_invented_for_a_run_that_never_reports_it() -> None:
    a = [rr.episode_row(0, "ok", {"success": 1.0}), rr.episode_row(1, "error", {})]
    b = [rr.episode_row(0, "ok", {"success": 0.0}), rr.episode_row(1, "ok", {"success": 1.0})]
    result = compare_rows(a, b, resamples=10)
    assert [(m.name, m.n, m.mean_a, m.mean_b) for m in result.metrics] == \
        [("success", 2, 0.5, 0.5)]
