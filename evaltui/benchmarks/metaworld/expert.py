"""``MetaWorldExpert``: Meta-World's scripted policy of each task, optionally noisy.

The expert of the episode's task (``metaworld.policies.ENV_POLICY_MAP``) reads the
goal-observable ``obs`` and returns a 4-float action. With ``noise > 0`` a Gaussian of
that standard deviation is added to each action dimension and the result clipped to
[-1, 1] (the env's action box) -- the usual noisy expert of imitation-learning papers.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from evaltui.engine.nodes import NodeSet, node

from .mw_import import make_expert


class MetaWorldExpert(NodeSet):
    """The scripted expert of the current episode's task.

    Args:
        noise: standard deviation of the Gaussian added to every action dimension.
        seed: seeds the noise together with the episode's task and seed, so results do
            not depend on which worker ran which episode.
    """

    def __init__(self, noise: Annotated[float, Field(ge=0, le=10)] = 0.0,
                 seed: Annotated[int, Field(ge=0)] = 0) -> None:
        self.noise = float(noise)
        self.seed = int(seed)
        self._policy: Any = None
        self._rng = np.random.default_rng(self.seed)

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        """Take the expert of the episode's task and reseed the noise for it."""
        task = str(episode["task"])
        self._policy = make_expert(task)
        self._rng = np.random.default_rng(
            [self.seed, int(episode["seed"]), zlib.crc32(task.encode())])

    @node(inputs=("obs",), outputs=("action",))
    def act(self, obs: Any) -> dict[str, Any]:
        """The expert's action for ``obs`` (plus noise, clipped to [-1, 1])."""
        if self._policy is None:
            raise RuntimeError("act() called before begin_episode()")
        action = np.asarray(self._policy.get_action(obs))  # float32, as the env expects
        if self.noise:
            action = np.clip(action + self._rng.normal(0.0, self.noise, action.shape), -1, 1)
        return {"action": action}
