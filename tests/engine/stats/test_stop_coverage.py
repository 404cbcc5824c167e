"""A run stopped by a rule on the betting CS misses the split mean in <= 5 % of runs; a
Student-t interval peeked at after every episode, with the same rule, misses more.

2,000 seeded runs per split; the figures are printed (``pytest -s``) and in
docs/statistics.md. The grid is 100 steps here, 1,000 in a run: a coarser grid only
widens the interval (by its step), so coverage here is the harder case for the rule.
"""

from __future__ import annotations

import numpy as np
import pytest
from coverage_sim import cs_paths, miss_rate, shuffled, stratified, t_paths

RUNS = 2000
N = 120
RULES = ("success:width<=0.2", "success>=0.7", "success<0.66",
         "success>=0.7 or success:width<=0.25")


def _splits() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(2026)
    bern = np.zeros(N)
    bern[:84] = 1.0  # exactly 0.7
    partial = np.clip(rng.beta(3.5, 1.5, N), 0, 1)  # partial credit, mean ~0.7
    tasks = [f"t{i % 4}" for i in range(N)]
    by_task = np.array([[1.0, 0.9, 0.6, 0.3][i % 4] > rng.random() for i in range(N)],
                       dtype=float)
    return {
        "bernoulli": (bern, shuffled(bern, RUNS, rng)),
        "partial credit": (partial, shuffled(partial, RUNS, rng)),
        "bernoulli, 4 tasks, stratified": (by_task, stratified(by_task, tasks, RUNS, 99)),
    }


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, str], tuple[float, float, float, float]]:
    out = {}
    for name, (split, orders) in _splits().items():
        truth = float(split.mean())
        cs_lo, cs_hi = cs_paths(orders, grid=100)
        t_lo, t_hi = t_paths(orders)
        for rule in RULES:
            text = rule.replace("0.7", f"{round(truth, 3)}") if name != "bernoulli" else rule
            cs_miss, cs_n = miss_rate(cs_lo, cs_hi, text, truth)
            t_miss, t_n = miss_rate(t_lo, t_hi, text, truth)
            out[(name, text)] = (cs_miss, cs_n, t_miss, t_n)
    print(f"\n{'split':32} {'rule':38} {'CS miss':>8} {'CS n':>6} {'t miss':>8} {'t n':>6}")
    for (name, rule), (cm, cn, tm, tn) in out.items():
        print(f"{name:32} {rule:38} {cm:8.2%} {cn:6.1f} {tm:8.2%} {tn:6.1f}")
    return out


def test_the_betting_cs_misses_at_most_five_percent_at_the_stop(results) -> None:
    for key, (cs_miss, _n, _t, _tn) in results.items():
        assert cs_miss <= 0.05, key


def test_a_peeked_t_interval_misses_more(results) -> None:
    cs_total = sum(v[0] for v in results.values())
    t_total = sum(v[2] for v in results.values())
    assert t_total > 2 * cs_total
    # A threshold at the truth: the peeked t interval decides it wrongly far more often.
    for (name, rule), (cs_miss, _n, t_miss, _tn) in results.items():
        if rule.startswith("success>=") and " or " not in rule:
            assert t_miss > 0.05 > cs_miss, (name, rule)
