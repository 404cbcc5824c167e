"""``evaltui race --set SET MEMBER``: a set's member and its baseline, as the two runs of a race.

The member is named by axis values (``graph=noisy_bot``, ``step=300``) and must match
exactly one member; the baseline is the set file's ``baseline`` (or one given the same
way). Both specs are the members' own (:mod:`evaltui.sets.expansion`), so each side is the
run ``set run`` would make, less the set's scheduling tag (a race is not a set run). The
two must evaluate the same episodes, else their paired difference means nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from evaltui.contract.setspec import SetFileError
from evaltui.sets.expansion import Expansion, Member, one_member, show_axes

SAME_EPISODES = ("dataset", "split", "episode_count", "start_episode_index", "episode_indices")
"""The eval fields that select a run's episodes: the two sides must agree on each."""


def race_pair(expansion: Expansion, member: dict[str, Any],
              baseline: dict[str, Any] | None = None) -> tuple[Member, Member]:
    """(baseline, member) of the set (raises SetFileError naming the field at fault)."""
    base = (one_member(expansion.members, baseline, "--baseline") if baseline
            else expansion.baseline)
    if base is None:
        raise SetFileError("baseline", "the set file names no baseline; give --baseline "
                           "AXIS=VALUE,...")
    chosen = one_member(expansion.members, member, "MEMBER")
    if chosen.key == base.key:
        raise SetFileError("MEMBER", f"{show_axes(member)} is the baseline itself")
    for name in SAME_EPISODES:
        ours, theirs = chosen.spec["eval"].get(name), base.spec["eval"].get(name)
        if ours != theirs:
            raise SetFileError("MEMBER", f"{show_axes(chosen.axes)} and the baseline "
                               f"{show_axes(base.axes)} evaluate different episodes ({name}: "
                               f"{ours!r} vs {theirs!r})")
    return base, chosen


def race_spec(member: Member, *, order_seed: int, episodes: int | None,
              workers: int | None) -> dict[str, Any]:
    """The member's spec as one side of a race: the race's order, episodes and workers."""
    spec = copy.deepcopy(member.spec)
    ev = spec["eval"]
    ev["order_seed"] = order_seed
    if episodes is not None:
        ev["episode_count"] = episodes
    if workers is not None:
        ev["worker_count"] = workers
    scheduling = spec.get("scheduling") or {}
    scheduling.pop("set_id", None)
    return spec
