"""A count metric's CI is clipped at 0 (issue 35, item 13): ``cliff_falls`` over 20
episodes with 1 fall printed [-0.0489, 0.5489]; a metric that can be negative is not."""

from __future__ import annotations

from evaltui.engine.episode.metrics import aggregate, metric_range


def rows(name: str, values: list[float]) -> list[dict]:
    return [{"status": "ok", "metrics": {"success": 1.0, name: v}} for v in values]


def test_a_count_metric_is_clipped_at_zero() -> None:
    agg = aggregate(rows("cliff_falls", [0.0] * 19 + [1.0]))
    lo, hi = agg.ci95["cliff_falls"]
    assert lo == 0.0 and 0.05 < hi < 0.2
    assert metric_range("cliff_falls", [0.0, 1.0, 3.0]) == (0.0, float("inf"))


def test_a_metric_that_can_be_negative_is_not_clipped() -> None:
    agg = aggregate(rows("reward", [-1.0, 0.5, 2.0, -0.25]))
    lo, _ = agg.ci95["reward"]
    assert lo < -1.0
    assert metric_range("reward", [0.5, 1.5]) == (float("-inf"), float("inf"))
