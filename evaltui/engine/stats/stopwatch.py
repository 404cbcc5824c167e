"""StopWatch: a run's stop rule, fed each episode's outcome as it arrives.

The confidence sequence is fed in the *dealing order*, not the order episodes finish: a
failing episode often runs to its step budget while a success ends early, so the first
episodes to finish are not a random sample. An outcome that arrives ahead of an earlier
one waits until the prefix before it is complete; the sequence then takes the prefix one
episode at a time and the rule is checked after each. What the watch reports is always
the interval over a prefix of the order, the property that keeps the sequence valid.

Episodes in flight when the rule is met are finished and counted (the runner stops
dealing, it does not cancel): the sequence is valid at any stopping time, including "the
rule was met, then the episodes already running ended", and cancelling them would throw
away episodes already paid for. ``met_at`` keeps the n at which the rule was met, ``n``
the n of the interval reported.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaltui.contract.spec import EvalSection, SpecError
from evaltui.contract.stoprule import StopRule, parse_rule
from evaltui.engine.episode.metrics import METRIC_RANGES
from evaltui.engine.stats.betting import BettingCS

ALPHA = 0.05
"""The level of every confidence sequence a stop rule uses (95 %)."""
METHOD = "betting confidence sequence (hedged capital, without replacement), 95%"
"""summary.json ``stopped.method``: what the interval is."""


def check_rule(text: str) -> StopRule:
    """The rule, if its metric is one a betting CS applies to; ValueError why not."""
    rule = parse_rule(text)
    if METRIC_RANGES.get(rule.metric) != (0.0, 1.0):
        bounded = sorted(k for k, v in METRIC_RANGES.items() if v == (0.0, 1.0))
        raise ValueError(f"{rule.text!r}: {rule.metric!r} is not a metric bounded in [0, 1] "
                         f"(a stop rule needs one of {', '.join(bounded)})")
    return rule


def stop_fields(ev: EvalSection) -> dict[str, Any]:
    """The eval fields a stop rule resolves at check time: the rule checked (SpecError on
    ``eval.stop_when``) and an ``order_seed`` drawn if the rule has none, so that spec.json
    records the order the run deals."""
    if ev.stop_when is None:
        return {}
    try:
        check_rule(ev.stop_when)
    except ValueError as exc:
        raise SpecError("eval.stop_when", str(exc)) from None
    if ev.order_seed is not None:
        return {}
    return {"order_seed": secrets.randbelow(2**31)}


@dataclass(frozen=True)
class StopState:
    """Where the watch stands: the rule, the prefix behind the interval, the interval."""

    rule: str
    metric: str
    n: int
    interval: tuple[float, float]
    full_n: int
    met_at: int | None
    decision: str | None
    broken: str | None


class StopWatch:
    """The stop rule over ``order`` (the dealing order of the split of ``full_n``)."""

    def __init__(self, rule: StopRule, order: Sequence[int], full_n: int,
                 alpha: float = ALPHA, *, keep_history: bool = False) -> None:
        self.rule = rule
        self.full_n = full_n
        self.cs = BettingCS(alpha, population=full_n)
        self._position = {index: pos for pos, index in enumerate(order)}
        self._waiting: dict[int, float] = {}  # position -> value, beyond the prefix
        self._tentative: dict[int, float] = {}  # position -> value of a to-be-retried attempt
        self.met_at: int | None = None
        self.broken: str | None = None
        """Why the rule can no longer be judged (a value missing or out of [0, 1])."""
        self.history: list[tuple[int, float, float, float]] | None = \
            [] if keep_history else None
        """With ``keep_history`` (the TUI's band): (n, mean, lo, hi) after every episode."""

    @property
    def n(self) -> int:
        return self.cs.t

    @property
    def met(self) -> bool:
        return self.met_at is not None

    def add(self, index: int, values: Mapping[str, float], *, final: bool = True) -> bool:
        """An episode's scored values (``row_values``); ``final`` False for an attempt
        that will be retried. True when this outcome made the rule met."""
        pos = self._position.get(index)
        if pos is None or self.broken is not None or pos < self.cs.t:
            return False
        value = values.get(self.rule.metric)
        if value is None or not 0.0 <= value <= 1.0:
            self.broken = (f"episode {index} has {self.rule.metric} = {value}: the stop "
                           "rule needs a value in [0, 1] for every episode")
            return False
        if not final:
            self._tentative[pos] = value
            return False
        self._tentative.pop(pos, None)
        self._waiting[pos] = value
        return self._advance()

    def close(self) -> None:
        """The run ends: an attempt left waiting for a retry that never came counts."""
        for pos, value in self._tentative.items():
            self._waiting.setdefault(pos, value)
        self._tentative.clear()
        self._advance()

    def _advance(self) -> bool:
        was = self.met
        while self.cs.t in self._waiting and self.broken is None:
            lo, hi = self.cs.update(self._waiting.pop(self.cs.t))
            if self.history is not None:
                self.history.append((self.cs.t, self.cs.total / self.cs.t, lo, hi))
            if self.met_at is None and self.rule.met(lo, hi):
                self.met_at = self.cs.t
        return self.met and not was

    def state(self) -> StopState:
        lo, hi = self.cs.interval
        return StopState(rule=self.rule.text, metric=self.rule.metric, n=self.cs.t,
                         interval=(round(lo, 6), round(hi, 6)), full_n=self.full_n,
                         met_at=self.met_at, decision=self.rule.decision(lo, hi),
                         broken=self.broken)
