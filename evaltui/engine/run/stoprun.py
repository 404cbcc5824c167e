"""RunStop: a run's dealing order and its stop rule, between the runner and the executor.

With ``eval.order_seed`` (drawn at check time when ``eval.stop_when`` is set) the run
deals its selection in the seeded, task-stratified order of
:func:`~evaltui.engine.stats.order.dealing_order`, cut to ``eval.max_episodes``; a resume
computes the same order and deals what is left of it. With a stop rule, each recorded
outcome goes to a :class:`~evaltui.engine.stats.stopwatch.StopWatch`; once the rule is
met the executor deals nothing more (the episodes in flight finish and count) and the
summary's ``stopped`` says so. docs/statistics.md has the why.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from evaltui.contract.records import EpisodeRow
from evaltui.contract.spec import EvalSection
from evaltui.contract.summarynotes import StoppedNote
from evaltui.engine.episode.metrics import row_values
from evaltui.engine.executor.protocol import EpisodeResult
from evaltui.engine.stats.order import dealing_order
from evaltui.engine.stats.stopwatch import METHOD, StopWatch, check_rule


class RunStop:
    """The order a run deals and, with a rule, when it stops dealing."""

    def __init__(self, ev: EvalSection, selected: Sequence[int],
                 episodes: Sequence[Mapping[str, Any]]) -> None:
        order = list(selected)
        if ev.order_seed is not None:
            order = dealing_order(selected, episodes, ev.order_seed)
        self.order = order[: ev.max_episodes] if ev.max_episodes else order
        self.watch = (StopWatch(check_rule(ev.stop_when), self.order, len(selected))
                      if ev.stop_when else None)
        self.stop_dealing: Callable[[], None] | None = None
        """The executor's, once it runs."""
        self.past_stop = ev.past_stop
        self._told_broken = False

    def preload(self, kept: Iterable[EpisodeRow]) -> StoppedNote | None:
        """Rows kept from an earlier attempt at the run (resume), before any is dealt;
        the ``stopped`` note if they meet the rule already."""
        for row in kept:
            self._add(row, final=True)
        return self.note()

    @property
    def met(self) -> bool:
        return self.watch is not None and self.watch.met

    def todo(self, done: set[int]) -> list[int]:
        """What is left to deal: nothing once the rule is met (unless ``past_stop``), else
        the order's rest."""
        return [] if self.met and not self.past_stop else \
            [i for i in self.order if i not in done]

    def on_result(self, result: EpisodeResult, row: EpisodeRow) -> StoppedNote | None:
        """A recorded attempt (on the recorder thread): stops the dealing when it makes
        the rule met; the ``stopped`` note from then on."""
        met = self._add(row, final=not result.will_retry)
        if met and not self.past_stop and self.stop_dealing is not None:
            self.stop_dealing()
        return self.note()

    def note(self, *, closing: bool = False) -> StoppedNote | None:
        """summary.json's ``stopped``: None until the rule is met."""
        if self.watch is None:
            return None
        if closing:
            self.watch.close()
        if not self.watch.met:
            return None
        state = self.watch.state()
        return StoppedNote(rule=state.rule, n=state.n, metric=state.metric,
                           interval=state.interval, method=METHOD, full_n=state.full_n,
                           met_at=state.met_at, decision=state.decision)

    def _add(self, row: EpisodeRow, *, final: bool) -> bool:
        if self.watch is None:
            return False
        values = row_values({"status": row.status, "metrics": row.metrics})
        if not values:
            return False  # cancelled: not scored, resume runs it again
        met = self.watch.add(row.episode_index, values, final=final)
        if self.watch.broken and not self._told_broken:
            self._told_broken = True
            print(f"evaltui: stop rule off: {self.watch.broken}", file=sys.stderr, flush=True)
        return met


def continue_past_stop(spec: dict[str, Any], done: int, more: int | None) -> dict[str, Any]:
    """The spec of ``resume --more [N]`` of a stopped run that ran ``done`` episodes:
    dealing goes on past its met rule, N more episodes of the order (None: to the end of
    the split, whatever ``max_episodes`` was)."""
    ev = dict(spec.get("eval") or {})
    ev["past_stop"] = True
    ev["max_episodes"] = None if more is None else done + more
    return {**spec, "eval": ev}
