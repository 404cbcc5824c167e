"""The betting confidence sequence equals the paper's capital process, and covers.

The reference below is written from Waudby-Smith & Ramdas (JRSS-B 2024) -- Thm 3's hedged
capital, Sec 5's predictable plug-in bets, Sec 6's without-replacement mean -- one
candidate mean at a time in plain Python floats, not from evaltui's code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaltui.engine.stats.betting import BettingCS, betting_interval


def paper_capital(xs: list[float], m: float, alpha: float, n_pop: int | None,
                  c: float = 0.5, theta: float = 0.5) -> list[float]:
    """K_t(m) for t = 1..len(xs), straight from the paper's equations."""
    out = []
    kp = kn = 1.0
    s = 0.0  # sum of x_1..x_{t-1}
    sq = 0.0  # sum of (x_i - mu_hat_i)^2, i < t
    for t, x in enumerate(xs, start=1):
        sigma2_prev = (0.25 + sq) / t  # sigma_hat^2_{t-1} = (1/4 + sum_{i<=t-1}) / t
        lam = math.sqrt(2 * math.log(2 / alpha) / (sigma2_prev * t * math.log(1 + t)))
        mt = m if n_pop is None else (n_pop * m - s) / (n_pop - t + 1)
        lam_p = min(lam, c / mt) if mt > 0 else lam
        lam_n = min(lam, c / (1 - mt)) if mt < 1 else lam
        kp *= 1 + lam_p * (x - mt)
        kn *= 1 - lam_n * (x - mt)
        out.append(max(theta * kp, (1 - theta) * kn))
        s += x
        mu_hat = (0.5 + s) / (t + 1)
        sq += (x - mu_hat) ** 2
    return out


@pytest.mark.parametrize("n_pop", [None, 150])
@pytest.mark.parametrize("kind", ["bernoulli", "partial"])
def test_capital_equals_the_papers_equations(n_pop: int | None, kind: str) -> None:
    rng = np.random.default_rng(7)
    n = 150
    xs = (rng.random(n) < 0.65).astype(float) if kind == "bernoulli" else rng.beta(2, 3, n)
    cs = BettingCS(0.05, n_pop, grid=200)
    logs = []
    for x in xs:
        cs.update(float(x))
        logs.append(cs.log_capital()[0].copy())
    checked = 0
    for j in range(0, 201, 7):
        m = j / 200
        ref = paper_capital([float(x) for x in xs], m, 0.05, n_pop)
        s = 0.0
        for t in range(n):
            mt = m if n_pop is None else (n_pop * m - s) / (n_pop - t)
            s += float(xs[t])
            if not 0 <= mt <= 1:
                break  # this m is impossible from here on: out of the sequence
            assert math.exp(logs[t][j]) == pytest.approx(ref[t], rel=1e-9, abs=1e-12), (m, t)
            checked += 1
    assert checked > 2000


def test_sequence_is_the_set_where_capital_is_below_one_over_alpha() -> None:
    rng = np.random.default_rng(3)
    xs = rng.beta(5, 2, 300)
    cs = BettingCS(0.05, None, grid=400)
    out = np.zeros(401, dtype=bool)
    for x in xs:
        cs.update(float(x))
        out |= cs.log_capital()[0] >= math.log(20)
        assert np.array_equal(cs.alive[0], ~out)
    lo, hi = cs.interval
    inside = cs.m[cs.alive[0]]
    assert lo == pytest.approx(max(inside.min() - 1 / 400, 0))
    assert hi == pytest.approx(min(inside.max() + 1 / 400, 1))
    assert lo < xs.mean() < hi


def test_without_replacement_closes_to_the_split_mean() -> None:
    rng = np.random.default_rng(11)
    split = rng.beta(2, 2, 97)
    cs = BettingCS(0.05, len(split))
    widths = []
    for x in rng.permutation(split):
        lo, hi = cs.update(float(x))
        widths.append(hi - lo)
    assert cs.interval[0] == pytest.approx(split.mean(), abs=1e-12)
    assert cs.interval[1] == pytest.approx(split.mean(), abs=1e-12)
    assert all(a >= b - 1e-12 for a, b in zip(widths, widths[1:], strict=False))
    with pytest.raises(ValueError, match="all 97 episodes"):
        cs.update(0.5)


def test_without_replacement_is_narrower_than_with() -> None:
    rng = np.random.default_rng(5)
    split = (rng.random(200) < 0.5).astype(float)
    order = rng.permutation(split)[:150]
    wor = betting_interval(order, population=200)
    wr = betting_interval(order)
    assert wor[1] - wor[0] < wr[1] - wr[0]


def test_values_outside_the_unit_interval_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        BettingCS().update(1.5)
