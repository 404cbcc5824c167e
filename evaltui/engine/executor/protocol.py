"""The seam between the runner and whatever runs its episodes (DESIGN §11 "Executor").

:class:`BatchEvalRunner` deals the run's episodes to an :class:`EpisodeExecutor` and
records each :class:`EpisodeResult` it hands back. Two exist, both on the one dealing
core (:class:`~evaltui.engine.executor.dealing.SlotExecutor`):
:class:`~evaltui.engine.executor.local.pool.EnvWorkerPool` (K worker subprocesses on this
machine, the default) and :class:`~evaltui.engine.executor.ray.executor.RayExecutor` (K
Ray actors spread over a cluster, ``eval.executor = "ray"``). Both run each episode
through the same :class:`~evaltui.engine.episode.session.WorkerSession`, so their rows
agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from evaltui.engine.episode.loop import EpisodeOutcome


@dataclass(frozen=True)
class EpisodeResult:
    """One finished attempt at an episode, as the run records it (attempts: 1 = first)."""

    index: int
    outcome: EpisodeOutcome
    worker_id: int
    attempts: int
    node: str | None = None
    """The machine the attempt ran on (the slot's ``node``), for a row's ``node``."""
    will_retry: bool = False
    """The attempt ended ``error`` and the episode is queued again (its row is not final)."""


class EpisodeExecutor(Protocol):
    """Starts its workers on ``__enter__``, stops and reaps them on ``__exit__``."""

    def __enter__(self) -> EpisodeExecutor: ...

    def __exit__(self, *exc: object) -> None: ...

    def run(self, indices: Iterable[int], on_result: Callable[[EpisodeResult], None],
            attempts_before: Mapping[int, int] | None = None) -> None:
        """Run every index once (plus retries), calling ``on_result`` for every attempt
        as it finishes, in the order they finished, one at a time; returns when all are
        recorded or, once the run's stop event is set, when the cancel has ended."""
        ...

    def stop_dealing(self) -> None:
        """Deal nothing more: the episodes running finish and are recorded, then ``run``
        returns (a stop rule was met; docs/statistics.md)."""
        ...
