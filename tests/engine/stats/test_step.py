"""STEP's decisions in evaltui equal the authors' ``sequentialized_barnard_tests`` on the
same sequences: the same winner after the same number of pairs, randomized bins included
(both draw from ``numpy.random.default_rng(seed)`` in the same order)."""

from __future__ import annotations

import numpy as np
import pytest

from evaltui.engine.stats.step import StepDecider
from evaltui.engine.stats.steppolicy import StepUnavailable, cache_path, load_policy

sbt = pytest.importorskip("sequentialized_barnard_tests")

RATES = [(0.5, 0.5), (0.3, 0.7), (0.7, 0.45), (0.85, 0.85), (0.2, 0.35), (0.6, 0.9)]


def reference(n_max: int, table=None):
    """The package's mirrored STEP test (A = source 0, B = source 1) at alpha 0.05 with
    its shipped table, or given ``table`` (one it does not ship: the same one as ours)."""
    ref = sbt.MirroredStepTest(sbt.Hypothesis.P0LessThanP1, 200 if table else n_max, 0.05)
    if table is not None:
        ref.policy, ref.n_max = table, n_max
    return ref


def run_both(table, ref, a: np.ndarray, b: np.ndarray, seed: int, our_seed: int | None = None):
    """Both tests on one sequence, each stopped at its first decision: (winner, pairs)."""
    ours = StepDecider(table, seed if our_seed is None else our_seed)
    ref.random_seed = seed
    ref.reset()
    theirs = None
    for t, (x, y) in enumerate(zip(a, b, strict=True), start=1):
        ours.add(x, y)
        decision = ref.step(int(x), int(y)).decision
        if decision != sbt.Decision.FailToDecide and theirs is None:
            theirs = ("B" if decision == sbt.Decision.AcceptAlternative else "A", t)
        if theirs is not None:
            break
    return (ours.winner, ours.decided_at), theirs or (None, None)


@pytest.mark.parametrize("n_max", [200, 500])
def test_decisions_equal_the_package_on_its_shipped_policies(n_max: int) -> None:
    from evaltui.engine.stats.steppolicy import read_table, shipped_path

    path = shipped_path(n_max, 0.05)
    assert path is not None
    table = read_table(path, n_max)
    ref = reference(n_max)
    rng = np.random.default_rng(n_max)
    seen = {"A": 0, "B": 0, None: 0}
    other_seed_differs = 0
    for k, (pa, pb) in enumerate(RATES * 12):
        a = (rng.random(n_max) < pa).astype(int)
        b = (rng.random(n_max) < pb).astype(int)
        ours, theirs = run_both(table, ref, a, b, seed=k)
        assert ours == theirs, (k, pa, pb)
        seen[ours[0]] += 1
        other_seed_differs += run_both(table, ref, a, b, seed=k, our_seed=k + 1000)[0] != ours
    assert min(seen.values()) > 0  # every outcome occurred: A, B and undecided
    # The randomized bins were reached: another seed changes some decisions, so the
    # equality above holds the uniform draws to the package's too.
    assert other_seed_differs > 0


def test_a_synthesized_policy_is_cached_and_decides_as_the_package(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EVALTUI_STATE_DIR", str(tmp_path))
    n_max, alpha = 30, 0.025
    with pytest.raises(StepUnavailable, match="n_max=30, alpha=0.025"):
        load_policy(n_max, alpha, synthesize=False)
    told = []
    table = load_policy(n_max, alpha, on_synthesis=lambda *a: told.append(a))
    assert told and cache_path(n_max, alpha).is_file()
    again = load_policy(n_max, alpha, on_synthesis=lambda *a: told.append(a))
    assert len(told) == 1  # the second came from the cache
    assert all(np.array_equal(x, y) for r, s in zip(table, again, strict=True)
               for x, y in zip(r, s, strict=True))
    ref = reference(n_max, table)
    rng = np.random.default_rng(3)
    decided = 0
    for k in range(150):
        pa, pb = RATES[k % len(RATES)]
        a = (rng.random(n_max) < pa).astype(int)
        b = (rng.random(n_max) < pb).astype(int)
        ours, theirs = run_both(table, ref, a, b, seed=k)
        assert ours == theirs, k
        decided += ours[0] is not None
    assert decided > 0
    # The race's level: between equal rates, STEP at 2.5 % each way calls a winner with
    # probability at most 5 %, computed exactly over the (x, y) states (docs/statistics.md).
    worst = max(sum(exact_calls(table, p)) for p in np.linspace(0.05, 0.95, 19))
    print(f"STEP n_max={n_max}, alpha 0.025 each way: worst P(any call | equal rates) = "
          f"{worst:.4f}")
    assert all(max(exact_calls(table, p)) <= alpha + 1e-6 for p in np.linspace(0.05, 0.95, 19))
    assert worst <= 2 * alpha + 1e-6


def exact_calls(table, p: float) -> tuple[float, float]:
    """P(STEP calls A), P(STEP calls B) when both rates are ``p``: the states' masses
    pushed through the table pair by pair (the rule of
    evaltui.engine.stats.step's module doc), not by sampling."""
    n_max = len(table) - 1
    mass = np.zeros((n_max + 1, n_max + 1))
    mass[0, 0] = 1.0
    called = [0.0, 0.0]
    for t in range(1, n_max + 1):
        nxt = np.zeros_like(mass)
        for da, db in ((0, 0), (1, 0), (0, 1), (1, 1)):
            w = (p if da else 1 - p) * (p if db else 1 - p)
            nxt[da:, db:] += w * mass[: n_max + 1 - da, : n_max + 1 - db]
        for x in range(t + 1):
            for y in range(t + 1):
                if x == y or nxt[x, y] == 0:
                    continue
                low, high, side = (x, y, 1) if y > x else (y, x, 0)
                row = table[t][low]
                crit, bins = int(row[0]), len(row) - 1
                r = 0.0 if high <= crit else 1.0 if high > crit + bins else row[high - crit]
                called[side] += nxt[x, y] * r
                nxt[x, y] *= 1 - r
        mass = nxt
    return called[0], called[1]


def test_fewer_than_ten_pairs_have_no_step_policy() -> None:
    with pytest.raises(StepUnavailable, match="at least 10 pairs"):
        load_policy(9, 0.025)


def test_non_binary_outcomes_are_refused() -> None:
    table = [[np.array([0.0])]] + [[np.array([float(t)])] * (t + 1) for t in range(1, 5)]
    with pytest.raises(ValueError, match="binary"):
        StepDecider(table, 0).add(0.5, 1)


def test_the_cache_is_arrays_not_a_pickle_and_a_damaged_one_is_refused(tmp_path) -> None:
    """evaltui's own cache is an .npz read with allow_pickle=False: a table written and read
    back is the same table; a file that is not one is a StepUnavailable, not a crash."""
    from evaltui.engine.stats.steppolicy import read_cache, read_table, shipped_path, write_cache

    table = read_table(shipped_path(200, 0.05), 200)
    path = tmp_path / "t.npz"
    write_cache(table, path)
    with np.load(path, allow_pickle=False) as data:
        assert set(data.files) == {"flat", "lengths"}
    again = read_cache(path, 200)
    assert all(np.array_equal(x, y) for r, s in zip(table, again, strict=True)
               for x, y in zip(r, s, strict=True))
    with pytest.raises(StepUnavailable, match="not a STEP policy for n_max=30"):
        read_cache(path, 30)
    path.write_bytes(b"\x80\x04garbage")
    with pytest.raises(StepUnavailable, match="not a STEP policy"):
        read_cache(path, 200)
