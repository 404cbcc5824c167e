"""The set table's statistics against independent computations (statsmodels, scipy)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from evaltui.sets.stats import baseline_diffs, holm


def rows(successes: list[int], prefix: str = "ep") -> list[dict]:
    return [{"episode_id": f"{prefix}{i}", "episode_index": i, "status": "ok",
             "metrics": {"success": float(s), "spl": 0.5 * s + 0.01 * i}}
            for i, s in enumerate(successes)]


def test_holm_matches_statsmodels() -> None:
    rng = np.random.default_rng(7)
    for m in (1, 2, 5, 13):
        p = list(rng.uniform(0, 0.2, size=m)) + [1.0, 0.03, 0.03][: max(0, 3 - m)]
        expected = multipletests(p, method="holm")[1]
        assert holm(p) == pytest.approx(list(expected), abs=1e-12)


def test_baseline_diffs_match_statsmodels_and_a_plain_bootstrap() -> None:
    rng = np.random.default_rng(3)
    n = 40
    base = rng.integers(0, 2, size=n).tolist()
    members = {f"m{k}": rows(np.where(rng.random(n) < 0.25, 1 - np.array(base),
                                      base).tolist()) for k in range(4)}
    diffs, why = baseline_diffs(rows(base), members)
    assert not why and set(diffs) == set(members)
    raw_p = []
    for key, member_rows in members.items():
        a = np.array(base, dtype=float)
        b = np.array([r["metrics"]["success"] for r in member_rows])
        table = [[int(np.sum((a == 1) & (b == 1))), int(np.sum((a == 1) & (b == 0)))],
                 [int(np.sum((a == 0) & (b == 1))), int(np.sum((a == 0) & (b == 0)))]]
        expected_p = mcnemar(table, exact=True).pvalue
        d = diffs[key]
        assert d.mcnemar_p == pytest.approx(expected_p, rel=1e-12)
        raw_p.append(expected_p)
        # The paired bootstrap, written out as documented: a fresh generator of seed 0,
        # one draw of n pair indices per resample, percentiles 2.5/97.5 of the means.
        x = b - a
        gen = np.random.default_rng(0)
        means = [x[gen.integers(0, n, size=n)].mean() for _ in range(10_000)]
        lo, hi = np.percentile(means, [2.5, 97.5])
        assert d.metrics["success"].ci95 == pytest.approx((lo, hi), abs=1e-12)
        assert d.metrics["success"].diff == pytest.approx(x.mean())
        # And close to scipy's own percentile bootstrap (another generator).
        ref = scipy_stats.bootstrap((x,), np.mean, n_resamples=10_000, method="percentile",
                                    random_state=1).confidence_interval
        assert d.metrics["success"].ci95[0] == pytest.approx(ref.low, abs=0.03)
        assert d.metrics["success"].ci95[1] == pytest.approx(ref.high, abs=0.03)
    adjusted = multipletests(raw_p, method="holm")[1]
    assert [diffs[k].mcnemar_p_holm for k in members] == pytest.approx(list(adjusted))


def test_members_without_shared_episodes_get_a_reason() -> None:
    diffs, why = baseline_diffs(rows([1, 0, 1]), {"other": rows([1, 1], prefix="x")})
    assert not diffs and "no comparable episode in common" in why["other"]
