"""Sets that race (``race:`` in a set file): successive elimination over rounds.

Every member deals the same split in the same seeded, task-stratified order
(``eval.order_seed``, :func:`~evaltui.engine.stats.order.dealing_order`), ``round``
episodes at a time: a member's run is submitted with ``eval.max_episodes = round`` and,
after each round, resumed ``more`` episodes further along its order (the ``resume --more``
of a run cut by its cap, :mod:`evaltui.scheduler.runs.resumemore`), so a round is the next
chunk of the same order for every surviving member and rows are never run twice.

After a round (every surviving member's run done), each member's metric values, in the
order, feed a without-replacement betting confidence sequence for its mean over the split
(:class:`~evaltui.engine.stats.betting.BettingCS`, the same computation as ``--stop-when``)
at level ``alpha / M`` for M members (Bonferroni over the members). A member whose upper
bound lies below the best lower bound of the others is eliminated: it is fed no more.

Why this is right: each sequence covers its member's split mean at every n with
probability >= 1 - alpha/M, so all M do at once with probability >= 1 - alpha (a union
bound; no independence needed, the members share their episodes). On that event, a member
with hi_i < lo_j has mean_i <= hi_i < lo_j <= mean_j: it is not the best. So the best
member (every member tied for best) survives the whole race with probability >= 1 - alpha,
whenever the rounds are looked at and however the race ends. The race ends when one member
is left or the split is exhausted (the sequences then close to the exact split means).

``race.target: policy`` uses the with-replacement sequence instead: each member's expected
value on the distribution the split samples (the claim is about the policies, not this
split's realized outcomes; as ``evaltui race A B``). The same argument holds; the
sequences are wider and do not close at the end of the split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaltui.contract.records import SPEC_FILENAME
from evaltui.contract.setspec import (
    MemberState,
    RaceOptions,
    RaceStanding,
    SetFileError,
    SetMemberRecord,
)
from evaltui.engine.episode.metrics import METRIC_RANGES, row_values
from evaltui.engine.graph.datasets import DatasetError
from evaltui.engine.stats.betting import BettingCS
from evaltui.results.runrows import RunDirError, load_run
from evaltui.results.verifystop import dealt_order
from evaltui.rundir.jsonfiles import read_json
from evaltui.sets.targets import SetTarget, TargetError


def check_race_metric(race: RaceOptions) -> None:
    """SetFileError unless the raced metric is one a betting CS applies to ([0, 1])."""
    if METRIC_RANGES.get(race.metric) != (0.0, 1.0):
        bounded = sorted(k for k, v in METRIC_RANGES.items() if v == (0.0, 1.0))
        raise SetFileError("race.metric", f"{race.metric!r} is not a metric bounded in "
                           f"[0, 1] (a race needs one of {', '.join(bounded)})")


@dataclass(frozen=True)
class Standing:
    """One member after a round: the values of its order's prefix and their interval."""

    key: str
    n: int
    interval: tuple[float, float]
    cap: int
    """Its run's ``eval.max_episodes``: where its order is cut now."""


def standings(values: Mapping[str, Sequence[float]], caps: Mapping[str, int],
              population: int | None, member_alpha: float) -> dict[str, Standing]:
    """Each member's betting CS at ``member_alpha`` (without replacement over a split of
    ``population``; with replacement for None)."""
    out = {}
    for key, xs in values.items():
        cs = BettingCS(member_alpha, population=population)
        for x in xs:
            cs.update(float(x))
        out[key] = Standing(key, len(xs), cs.interval, caps[key])
    return out


def eliminated(table: Mapping[str, Standing]) -> set[str]:
    """The members whose upper bound is below the best lower bound of another member."""
    out = set()
    for key, s in table.items():
        others = [o.interval[0] for k, o in table.items() if k != key]
        if others and s.interval[1] < max(others):
            out.add(key)
    return out


class SetRace:
    """The race of one set, stepped by :class:`~evaltui.sets.runner.SetRunner`."""

    def __init__(self, race: RaceOptions) -> None:
        self.race = race
        self.standing: RaceStanding | None = None

    def step(self, members: list[SetMemberRecord], target: SetTarget,
             given_up: Callable[[SetMemberRecord], bool],
             note: Callable[[SetMemberRecord, str], None]) -> bool:
        """After a round (every racing member's run done, or given up on): eliminate and
        feed the survivors the next round. True if it changed set.json's record."""
        racing = [m for m in members if m.eliminated_at is None and not given_up(m)]
        if not racing or any(m.state is not MemberState.DONE for m in racing):
            return False
        if self.standing is not None and self.standing.decided:
            return False
        read = {m.key: _member_values(m, self.race.metric) for m in racing}
        if any(r is None for r in read.values()):
            for m in racing:
                if read[m.key] is None:
                    note(m, "race: its run's rows or order cannot be read")
            return False
        full_n = max(r[2] for r in read.values() if r is not None)
        member_alpha = self.race.alpha / len(members)
        table = standings({k: r[0] for k, r in read.items() if r is not None},
                          {k: r[1] for k, r in read.items() if r is not None},
                          full_n if self.race.target == "split" else None, member_alpha)
        out = eliminated(table)
        for m in racing:
            m.race_interval = [round(v, 6) for v in table[m.key].interval]
            if m.key in out:
                m.eliminated_at = table[m.key].n
        survivors = [m for m in racing if m.key not in out]
        n = min(table[m.key].n for m in survivors)
        decided = len(survivors) <= 1 or n >= full_n
        self.standing = RaceStanding(metric=self.race.metric, target=self.race.target,
                                     alpha=self.race.alpha,
                                     member_alpha=member_alpha, n=n, full_n=full_n,
                                     survivors=[m.key for m in survivors], decided=decided)
        if not decided:
            reach = min(full_n, max(table[m.key].cap for m in survivors) + self.race.round)
            for m in survivors:
                self._feed(m, reach - table[m.key].cap, target, note)
        return True

    @staticmethod
    def _feed(m: SetMemberRecord, more: int, target: SetTarget,
              note: Callable[[SetMemberRecord, str], None]) -> None:
        assert m.run_id is not None
        try:
            target.resume(m.run_id, max(more, 1))
        except TargetError as exc:
            note(m, f"race: next round not queued: {exc}")
            return
        m.state = MemberState.QUEUED


def _member_values(m: SetMemberRecord, metric: str
                   ) -> tuple[list[float], int, int] | None:
    """A member's values in its order's prefix, its cap, and the split's size; None if
    its run dir, rows or dataset cannot be read."""
    if m.run_dir is None:
        return None
    run_dir = Path(m.run_dir)
    try:
        spec = read_json(run_dir / SPEC_FILENAME)
        ev = dict(spec["eval"])
        cap = int(ev.pop("max_episodes") or 0)
        order = dealt_order({**spec, "eval": ev})  # uncut: the whole split in order
        rows = {int(r["episode_index"]): r for r in load_run(run_dir).rows
                if "episode_index" in r}
    except (OSError, ValueError, KeyError, TypeError, DatasetError, RunDirError):
        return None
    xs = []
    for index in order:
        value = row_values(rows[index]).get(metric) if index in rows else None
        if value is None:
            break
        xs.append(value)
    return xs, cap or len(order), len(order)
