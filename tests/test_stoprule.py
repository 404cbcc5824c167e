"""eval.stop_when's grammar: what each clause decides, and one-line errors."""

from __future__ import annotations

import pytest

from evaltui.contract.stoprule import parse_rule


@pytest.mark.parametrize(("rule", "interval", "answer"), [
    ("success>=0.8", (0.8, 0.9), True), ("success>=0.8", (0.7, 0.79), False),
    ("success>=0.8", (0.75, 0.85), None), ("success>0.8", (0.8, 0.9), None),
    ("success<0.5", (0.3, 0.49), True), ("success<0.5", (0.5, 0.6), False),
    ("success<=0.5", (0.3, 0.5), True), ("success<=0.5", (0.5, 0.6), None),
])
def test_a_threshold_clause_answers_once_the_interval_is_on_one_side(rule, interval, answer):
    clause = parse_rule(rule).clauses[0]
    assert clause.answer(*interval) == answer
    assert clause.met(*interval) == (answer is not None)


def test_or_and_and_combine_clauses() -> None:
    either = parse_rule("success>=0.8 or success:width<=0.1")
    both = parse_rule("success>=0.8 and success:width<=0.1")
    assert either.met(0.85, 0.99) and not both.met(0.85, 0.99)
    assert either.met(0.70, 0.79) and both.met(0.70, 0.79)
    assert not either.met(0.70, 0.90)
    assert either.decision(0.85, 0.99) == "success>=0.8: yes"


@pytest.mark.parametrize(("rule", "says"), [
    ("", "empty rule"), ("success=>0.8", "not a stop rule clause"),
    ("success:width<=0", "width must be in (0, 1]"), ("success>=1", "strictly between"),
    ("success>=0.8 or spl<0.5", "one metric per rule"),
    ("success>=0.8 or success<0.9 and success:width<=0.1", "either 'or' or 'and'"),
])
def test_bad_rules_say_what_is_wrong_in_one_line(rule: str, says: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_rule(rule)
    assert says in str(err.value) and "\n" not in str(err.value)
