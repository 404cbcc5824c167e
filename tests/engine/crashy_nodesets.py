"""A BabyAI expert that crashes on chosen episodes: for the errors-count-as-failures tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy
from evaltui.engine.nodes import node


class CrashyBot(BabyAIBotPolicy):
    """The expert, but ``act`` raises at step ``crash_step`` of the episodes in ``crash_on``."""

    def __init__(self, crash_on: list[str] | None = None, crash_step: int = 2,
                 noise: float = 0.0, seed: int = 0) -> None:
        super().__init__(noise=noise, seed=seed)
        self.crash_on = set(crash_on or [])
        self.crash_step = crash_step
        self._episode_id = ""
        self._steps = 0

    def begin_episode(self, episode: Mapping[str, Any]) -> None:
        super().begin_episode(episode)
        self._episode_id = str(episode["episode_id"])
        self._steps = 0

    @node(inputs=("sim",), outputs=("action",))
    def act(self, sim: Any) -> dict[str, Any]:
        self._steps += 1
        if self._episode_id in self.crash_on and self._steps >= self.crash_step:
            raise RuntimeError(f"policy crashed on {self._episode_id}")
        return super().act(sim)
