"""StopBand: a running run's confidence sequence, recomputed from its rows as they land.

The run screen draws the band of a run with a stop rule (``eval.stop_when``) narrowing as
episodes finish. It is the run's own computation, not a look-alike: the order is drawn
again from spec.json exactly as ``evaltui verify`` draws it
(:func:`~evaltui.results.verifystop.dealt_order`), and the rows' values go, in that order,
into the engine's :class:`~evaltui.engine.stats.stopwatch.StopWatch` (the same prefix rule
and betting CS the run process feeds). What the band cannot know is an attempt that will
be retried: the run skips it until its last attempt, the band takes the row it reads; the
run's own word, summary.json ``stopped``, is shown once it is there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evaltui.contract.records import SPEC_FILENAME
from evaltui.engine.episode.metrics import row_values
from evaltui.engine.graph.datasets import DatasetError
from evaltui.engine.stats.stopwatch import StopState, StopWatch, check_rule
from evaltui.results.verifystop import dealt_order
from evaltui.rundir.jsonfiles import read_json


class StopBand:
    """The confidence sequence of one run's stop rule, fed the run's rows."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        ev = dict(spec.get("eval") or {})
        self.rule = check_rule(str(ev.get("stop_when")))
        cap = ev.pop("max_episodes", None)
        full = dealt_order({**spec, "eval": ev})  # the whole split: the sequence's N
        self.order = full[:cap] if cap else full
        self.watch = StopWatch(self.rule, self.order, len(full), keep_history=True)

    @classmethod
    def of_run(cls, run_dir: Path) -> StopBand | None:
        """The band of the run in ``run_dir``; None without a rule (or a readable spec)."""
        try:
            spec = read_json(Path(run_dir) / SPEC_FILENAME)
            if not isinstance(spec, dict) or not (spec.get("eval") or {}).get("stop_when"):
                return None
            return cls(spec)
        except (OSError, ValueError, TypeError, DatasetError):
            return None

    def add(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Rows as the run dir has them (new or rewritten, any order)."""
        for row in rows:
            index, values = row.get("episode_index"), row_values(row)
            if isinstance(index, int) and values:  # cancelled: not scored (resume runs it)
                self.watch.add(index, values)

    @property
    def history(self) -> list[tuple[int, float, float, float]]:
        """(n, mean, lo, hi) after every episode of the order so far."""
        return self.watch.history or []

    def state(self) -> StopState:
        return self.watch.state()

    @property
    def target_width(self) -> float | None:
        """The rule's width bound (the narrowest if several), None without one."""
        widths = [c.width for c in self.rule.clauses if c.width is not None]
        return min(widths) if widths else None
