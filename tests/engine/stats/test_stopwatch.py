"""StopWatch: outcomes go into the sequence in dealing order, a retried attempt waits for
its retry, and a rule that cannot be judged says why."""

from __future__ import annotations

import pytest

from evaltui.contract.stoprule import parse_rule
from evaltui.engine.stats.betting import betting_interval
from evaltui.engine.stats.stopwatch import StopWatch, check_rule

ORDER = [7, 3, 9, 0, 5, 1, 8, 2, 6, 4]


def test_outcomes_are_taken_in_dealing_order_not_finishing_order() -> None:
    watch = StopWatch(parse_rule("success:width<=0.01"), ORDER, 10)
    values = {i: float(i % 2) for i in ORDER}
    for i in reversed(ORDER[1:]):  # everything but the first dealt finishes first
        watch.add(i, {"success": values[i]})
    assert watch.n == 0
    watch.add(ORDER[0], {"success": values[ORDER[0]]})
    assert watch.n == 10
    assert watch.cs.interval == betting_interval([values[i] for i in ORDER], population=10)


def test_an_attempt_to_be_retried_waits_and_counts_at_close() -> None:
    watch = StopWatch(parse_rule("success>=0.5"), ORDER, 10)
    watch.add(ORDER[0], {"success": 0.0}, final=False)
    watch.add(ORDER[1], {"success": 1.0})
    assert watch.n == 0
    watch.add(ORDER[0], {"success": 1.0})  # the retry succeeded: that value counts
    assert watch.n == 2 and watch.cs.total == 2.0
    watch.add(ORDER[2], {"success": 0.0}, final=False)  # its retry never came
    watch.close()
    assert watch.n == 3 and watch.cs.total == 2.0


def test_a_threshold_rule_records_its_answer() -> None:
    watch = StopWatch(parse_rule("success>=0.3"), list(range(100)), 100)
    met_now = [watch.add(i, {"success": 1.0}) for i in range(100)]
    assert met_now.count(True) == 1 and watch.met_at == met_now.index(True) + 1
    assert watch.state().decision == "success>=0.3: yes"


def test_a_missing_or_unbounded_value_turns_the_rule_off() -> None:
    watch = StopWatch(parse_rule("spl:width<=0.2"), ORDER, 10)
    watch.add(ORDER[0], {"success": 1.0})
    assert watch.broken is not None and "spl = None" in watch.broken
    assert not watch.add(ORDER[1], {"spl": 0.5}) and watch.n == 0


def test_only_metrics_bounded_in_the_unit_interval_take_a_rule() -> None:
    assert check_rule("sdtw>=0.4").metric == "sdtw"
    with pytest.raises(ValueError, match="not a metric bounded"):
        check_rule("nav_error<0.5")
