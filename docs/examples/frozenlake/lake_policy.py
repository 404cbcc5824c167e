"""A policy for FrozenLake: follow the map's shortest path, with ``epsilon`` random moves.
The worked example of docs/own-env.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from lake_env import MOVES, cells_to_goal
from pydantic import Field

from evaltui.engine.nodes import NodeSet, node


class LakePlanner(NodeSet):
    """Greedy on the distance to the goal; with probability ``epsilon`` a random move.

    Args:
        epsilon: the probability of a uniformly random action instead, in [0, 1].
        seed: seeds the random moves together with each episode's seed.
    """

    def __init__(self, epsilon: Annotated[float, Field(ge=0, le=1)] = 0.0,
                 seed: Annotated[int, Field(ge=0)] = 0) -> None:
        self.epsilon = epsilon
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._dist: dict[tuple[int, int], int] = {}

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        """Per-episode state: the map's distances, and the RNG reseeded for this episode."""
        self._dist = cells_to_goal(episode["desc"])
        self._rng = np.random.default_rng([self.seed, int(episode.get("seed", 0))])

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        if self._rng.random() < self.epsilon:
            return {"action": int(self._rng.integers(4))}
        c, r = obs["cell"]
        best = min(MOVES, key=lambda a: self._dist.get((c + MOVES[a][0], r + MOVES[a][1]),
                                                        1 << 30))
        return {"action": best}
