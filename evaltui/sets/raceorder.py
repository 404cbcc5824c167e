"""What a racing set (``race:``) puts in each member's spec: one order, the first round.

Every member gets the same ``eval.order_seed`` (the file's ``race.seed``, else one drawn
from the set's name, so every ``set run`` of the set deals one order) and
``eval.max_episodes = race.round``; :mod:`evaltui.sets.racing` feeds the rounds after it.
Light (no numpy): the expansion imports it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from evaltui.contract.setspec import RaceOptions


def race_seed(race: RaceOptions, set_name: str) -> int:
    """The dealing order's seed of a racing set."""
    if race.seed is not None:
        return race.seed
    return int.from_bytes(hashlib.sha256(set_name.encode()).digest()[:4], "big") % 2**31


def race_eval_fields(race: RaceOptions, set_name: str) -> dict[str, Any]:
    """The ``eval`` fields of every member of a racing set."""
    return {"order_seed": race_seed(race, set_name), "max_episodes": race.round}
