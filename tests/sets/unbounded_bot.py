"""A user's own policy that declares no bounds for ``noise``: a bad value passes the spec
check and fails when its workers start (the BabyAI expert's own runtime check) -- a set
member that fails at run time, for the retry and error-rate tests."""

from __future__ import annotations

from evaltui.benchmarks.babyai.bot import BabyAIBotPolicy


class UnboundedBot(BabyAIBotPolicy):
    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        super().__init__(noise=noise, seed=seed)
