"""``BabyAIBotPolicy``: minigrid's BabyAI expert bot as an inline policy nodeset.

The bot plans on the simulator's true state, so it reads the ``sim`` loop port (the
unwrapped env, which only an in-process nodeset can receive). With ``noise > 0`` some
actions are replaced by random moves, and the bot is told which action was actually
taken so it can re-plan from there -- the standard way to make a noisy expert.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from evaltui.engine.nodes import NodeSet, node

from .minigrid_import import BabyAIBot

# Random actions: the three moves and `done` (6). A random `done` is the noisy agent
# stopping early, the typical failure of instruction-following agents (as in VLN), so
# noise costs success rate and not only path length. pickup/drop/toggle would change the
# level rather than add noise.
RANDOM_ACTIONS: tuple[int, ...] = (0, 1, 2, 6)


class BabyAIBotPolicy(NodeSet):
    """The BabyAI expert; ``noise`` is the probability of a random move instead.

    Args:
        noise: probability, in [0, 1], of replacing the bot's action by a uniformly
            random action among left/right/forward/done.
        seed: seeds the noise RNG together with each episode's seed, so results do not
            depend on which worker ran which episode.
    """

    # The bounds are checked at spec check (engine.paramtypes), before a run dir exists.
    def __init__(self, noise: Annotated[float, Field(ge=0, le=1)] = 0.0,
                 seed: Annotated[int, Field(ge=0)] = 0) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be in [0, 1], got {noise!r}")
        self.noise = float(noise)
        self.seed = int(seed)
        self._rng = np.random.default_rng([self.seed, 0])
        self._bot: Any = None
        self._sim: Any = None
        self._suggested: int | None = None
        self._taken: int | None = None

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        """Forget the previous episode; the bot itself is built at the first ``act``."""
        self._rng = np.random.default_rng([self.seed, int(episode["seed"])])
        self._bot = None
        self._sim = None
        self._suggested = None
        self._taken = None

    @node(inputs=("sim",), outputs=("action",))
    def act(self, sim: Any) -> dict[str, Any]:
        """Ask the bot for the next action (possibly replaced by a random move)."""
        if self._bot is None or sim is not self._sim:
            # Built lazily: the bot parses the mission of the env as reset for this episode.
            self._bot = self._fresh_bot(sim)
            self._sim = sim
            self._suggested = self._taken = None
        # Tell the bot only about a deviation; None means "your suggestion was taken".
        deviated = self._taken if self._taken != self._suggested else None
        if deviated is not None and not self._bot.stack:
            # The bot's plan was already empty (it had said `done`, and noise replaced
            # it): an empty-stack bot answers `done` forever, whatever happened since,
            # which would score the bot's bookkeeping rather than the noise. Re-plan
            # from the actual state with a fresh bot that keeps what was seen.
            self._bot = self._fresh_bot(sim, self._bot)
            deviated = None
        suggested = int(self._bot.replan(deviated))
        action = suggested
        # Draw every step, even at noise 0, so the RNG stream does not depend on noise.
        if self._rng.random() < self.noise:
            action = RANDOM_ACTIONS[int(self._rng.integers(len(RANDOM_ACTIONS)))]
        self._suggested, self._taken = suggested, action
        return {"action": action}

    @staticmethod
    def _fresh_bot(sim: Any, previous: Any = None) -> Any:
        bot = BabyAIBot(sim)
        if previous is not None:
            bot.vis_mask = previous.vis_mask  # the map explored so far
        return bot
