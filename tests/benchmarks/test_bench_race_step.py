"""The race on success: STEP vs the betting CS of the difference vs a fixed-n design of the
same power, on seeded Bernoulli pairs with known rates.

Run: ``pytest -m bench -s tests/benchmarks/test_bench_race_step.py`` (needs the ``step``
extra; synthesizes STEP's n_max=100, alpha=0.025 table once, ~6 s). Printed side by side
from one run (docs/statistics.md, docs/performance.md); nothing here asserts a time. The
fixed n is the two-proportion z design (Fleiss, no continuity correction) whose power at
5 % two-sided equals STEP's power measured here (capped at 99.9 %).
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from evaltui.engine.stats.paired import PairedRace
from evaltui.engine.stats.step import StepDecider
from evaltui.engine.stats.steppolicy import load_policy

N_MAX, RACES = 100, 500
RATES = ((0.6, 0.6), (0.9, 0.4), (0.8, 0.5), (0.7, 0.5))


def fixed_n(p_a: float, p_b: float, power: float) -> int | None:
    from scipy.stats import norm  # the test extra; only for the quantile of the power

    if p_a == p_b:
        return None
    p_bar = (p_a + p_b) / 2
    root = (norm.ppf(0.975) * math.sqrt(2 * p_bar * (1 - p_bar))
            + norm.ppf(min(power, 0.999)) * math.sqrt(p_a * (1 - p_a) + p_b * (1 - p_b)))
    return math.ceil((root / (p_a - p_b)) ** 2)


@pytest.mark.bench
def test_step_vs_cs_vs_fixed_n() -> None:
    pytest.importorskip("sequentialized_barnard_tests")
    table = load_policy(N_MAX, 0.025)
    rng = np.random.default_rng(0)
    print(f"\n{'A / B':10} {'STEP A/B':>13} {'STEP n':>7} {'CS A/B':>13} {'CS n':>6} "
          f"{'fixed n':>8} {'us/pair':>8}")
    for p_a, p_b in RATES:
        out: dict[str, list[tuple[str | None, int]]] = {"step": [], "cs": []}
        spent = 0.0
        for k in range(RACES):
            a = (rng.random(N_MAX) < p_a).astype(float)
            b = (rng.random(N_MAX) < p_b).astype(float)
            for method in out:
                race = PairedRace(list(range(N_MAX)),
                                  step=StepDecider(table, k) if method == "step" else None)
                t0 = time.process_time()
                for i in range(N_MAX):
                    race.add("A", i, a[i])
                    race.add("B", i, b[i])
                    if race.winner:
                        break
                if method == "step":
                    spent += (time.process_time() - t0) / (race.state().n or 1)
                out[method].append((race.winner, race.decided_at or N_MAX))
        shown = {}
        for method, results in out.items():
            calls = [w for w, _ in results]
            shown[method] = (f"{calls.count('A') / RACES:5.1%}/{calls.count('B') / RACES:5.1%}",
                             np.mean([n for _, n in results]))
        step_power = sum(w == ("A" if p_a > p_b else "B") for w, _ in out["step"]) / RACES
        fixed = fixed_n(p_a, p_b, step_power)
        print(f"{p_a:.1f} / {p_b:.1f}  {shown['step'][0]:>13} {shown['step'][1]:7.1f} "
              f"{shown['cs'][0]:>13} {shown['cs'][1]:6.1f} {fixed if fixed else '-':>8} "
              f"{spent / RACES * 1e6:8.1f}")
