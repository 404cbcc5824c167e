"""How a stopped run's interval is said, in every table: ``show``, ``eval``, the exports.

A stopped run has two intervals for its rule's metric and they are not the same thing:
the 95 % *confidence sequence* (betting, without replacement) is valid although the run
looked at it after every episode and stopped on it; the Student-t *confidence interval*
of the summary is valid for a fixed n only, so after a stop on it it is too narrow
(docs/statistics.md). Both are shown, each under its own name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CS_TITLE = "95% CS"
"""The column of the confidence sequence."""
T_TITLE = "95% CI (t)"
"""The Student-t column's title beside it."""


def stopped_of(summary: Mapping[str, Any]) -> Mapping[str, Any] | None:
    stopped = summary.get("stopped")
    return stopped if isinstance(stopped, Mapping) else None


def stop_line(summary: Mapping[str, Any], digits: int = 3) -> str | None:
    """One line: where the run stopped, by which rule, and the confidence sequence there."""
    stopped = stopped_of(summary)
    if stopped is None:
        return None
    lo, hi = stopped.get("interval") or (None, None)
    met = stopped.get("met_at")
    decision = stopped.get("decision")
    return (f"stopped at n={stopped.get('n')} of {stopped.get('full_n')} by "
            f"'{stopped.get('rule')}'" + (f" (met at n={met})" if met is not None else "")
            + (f", {decision}" if decision else "")
            + f"; {stopped.get('metric')} {CS_TITLE} [{lo:.{digits}f}, {hi:.{digits}f}]: "
            "confidence sequence (betting, without replacement), valid at the stop; "
            f"{T_TITLE}: Student-t, valid for a fixed n only")
