"""What every env's replay reads and says: the logged steps of an episode's env step node,
and the first step where the replay disagrees with them.

:mod:`.replaycheck` (which picks the replay for a run's env, and replays BabyAI) and
:mod:`.mwreplay` (Meta-World) both compare through these.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.results.verify import VerifyInputError
from evaltui.rundir.logread import iter_log
from evaltui.rundir.safeopen import LeavesRoot, open_inside


@dataclass(frozen=True)
class Divergence:
    """The first step at which the replay disagrees with the episode's records."""

    episode: str
    step: int
    what: str


@dataclass(frozen=True)
class LoggedStep:
    """One fire of the env step node: the action it took and what the env answered."""

    step: int
    action: Any
    reward: Any
    done: Any


def logged_steps(log_path: Path, step_node: str) -> Iterator[LoggedStep]:
    """The fires of ``step_node`` in log order (``log_path``: ``RUN/episodes/epNNNN/log.jsonl``,
    opened without following a symlink out of RUN)."""
    try:
        run = log_path.parents[2]
        log = open_inside(run, log_path.relative_to(run))
    except LeavesRoot:
        raise VerifyInputError(f"{log_path} is a symlink that leaves the run dir; not read"
                               ) from None
    with log:
        for _offset, rec in iter_log(log):
            if rec.get("event") == "fire" and rec.get("node") == step_node:
                inputs, outputs = rec.get("inputs") or {}, rec.get("outputs") or {}
                yield LoggedStep(int(rec.get("step", -1)), inputs.get("action"),
                                 outputs.get("reward"), outputs.get("done"))


def same_reward(logged: Any, replayed: float, tolerance: float) -> bool:
    if isinstance(logged, bool) or not isinstance(logged, int | float):
        return False
    return logged == replayed or abs(float(logged) - replayed) <= tolerance or (
        math.isnan(logged) and math.isnan(replayed))
