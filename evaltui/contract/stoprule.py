"""StopRule: ``eval.stop_when`` parsed (DESIGN §13 "Stopping rules") -- the contract's part.

A rule is one clause or several joined by `` or `` (stop when any is met) or `` and ``
(stop when all are), all on one metric:

- ``METRIC:width<=W``: the metric's 95 % confidence sequence is at most W wide;
- ``METRIC>=T`` (also ``>``, ``<=``, ``<``): the question "is the mean >= T?" is decided,
  i.e. the interval lies wholly on one side of T; the answer is recorded.

Which metrics are bounded (a betting CS needs [0, 1]) is the engine's to check
(:func:`evaltui.engine.stats.stopwatch.check_rule`); this module checks the syntax only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CLAUSE = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_]*)\s*(?:"
    r":\s*width\s*<=\s*(?P<width>[-+0-9.eE]+)"
    r"|(?P<op>>=|<=|>|<)\s*(?P<threshold>[-+0-9.eE]+))\s*$")


@dataclass(frozen=True)
class Clause:
    """One condition of a rule: a width bound (``width``) or a threshold question."""

    metric: str
    width: float | None = None
    op: str | None = None
    threshold: float | None = None

    def __str__(self) -> str:
        if self.width is not None:
            return f"{self.metric}:width<={self.width:g}"
        return f"{self.metric}{self.op}{self.threshold:g}"

    def met(self, lo: float, hi: float) -> bool:
        """Whether the interval [lo, hi] meets this clause."""
        if self.width is not None:
            return hi - lo <= self.width
        return self.answer(lo, hi) is not None

    def answer(self, lo: float, hi: float) -> bool | None:
        """The threshold question's answer from [lo, hi]; None while undecided."""
        assert self.op is not None and self.threshold is not None
        t = self.threshold
        above = {">=": lo >= t, ">": lo > t, "<=": lo > t, "<": lo >= t}[self.op]
        below = {">=": hi < t, ">": hi <= t, "<=": hi <= t, "<": hi < t}[self.op]
        if not (above or below):
            return None
        return above if self.op in (">=", ">") else below


@dataclass(frozen=True)
class StopRule:
    """A parsed ``eval.stop_when``: its clauses, how they combine, and its text."""

    clauses: tuple[Clause, ...]
    combine: str  # "or" | "and"
    text: str

    @property
    def metric(self) -> str:
        return self.clauses[0].metric

    def met(self, lo: float, hi: float) -> bool:
        hits = [c.met(lo, hi) for c in self.clauses]
        return all(hits) if self.combine == "and" else any(hits)

    def decision(self, lo: float, hi: float) -> str | None:
        """What the threshold clauses say of [lo, hi] ("success>=0.8: yes"), if any."""
        parts = []
        for c in self.clauses:
            if c.width is None and (a := c.answer(lo, hi)) is not None:
                parts.append(f"{c}: {'yes' if a else 'no'}")
        return "; ".join(parts) or None


def parse_rule(text: str) -> StopRule:
    """The rule ``text`` says; ValueError with a one-line reason if it says none."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty rule (e.g. 'success:width<=0.1' or 'success>=0.8')")
    words = re.split(r"\s+(or|and)\s+", text.strip())
    joins = set(words[1::2])
    if len(joins) > 1:
        raise ValueError(f"{text!r}: use either 'or' or 'and' between clauses, not both")
    clauses = tuple(_clause(part, text) for part in words[0::2])
    metrics = {c.metric for c in clauses}
    if len(metrics) > 1:
        raise ValueError(f"{text!r}: one metric per rule, got {', '.join(sorted(metrics))}")
    return StopRule(clauses, joins.pop() if joins else "or", text.strip())


def _clause(part: str, text: str) -> Clause:
    match = _CLAUSE.match(part)
    if match is None:
        raise ValueError(f"{part.strip()!r} is not a stop rule clause: write METRIC:width<=W "
                         "or METRIC>=T (>, <=, <), e.g. 'success:width<=0.1', "
                         "'success>=0.8', joined by 'or'/'and'")
    metric = match["metric"]
    try:
        value = float(match["width"] if match["width"] is not None else match["threshold"])
    except ValueError:
        raise ValueError(f"{part.strip()!r}: not a number") from None
    if match["width"] is not None:
        if not 0 < value <= 1:
            raise ValueError(f"{part.strip()!r}: the width must be in (0, 1]")
        return Clause(metric, width=value)
    if not 0 < value < 1:
        raise ValueError(f"{part.strip()!r}: the threshold must be strictly between 0 and 1")
    return Clause(metric, op=match["op"], threshold=value)
