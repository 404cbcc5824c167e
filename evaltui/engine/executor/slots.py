"""The slot interface: what an executor tells the dealing core about its workers.

An executor is K *slots*, each one worker at a time, somewhere (a forked process here, a
Ray actor on a cluster node, a Slurm job next). The dealing core
(:class:`~evaltui.engine.executor.dealing.SlotExecutor`) owns each slot's episode state
-- :class:`Slot`: is its worker ready, which episode it runs, which one is dealt ahead,
the watch on that episode's log -- and everything decided from it: what to deal where,
retries, the start-failure limit, cancel and its grace period, hung steps. The executor
only moves workers and messages, and reports what happened as the events below.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaltui.engine.episode.loop import EpisodeOutcome
from evaltui.engine.executor.watchdog import LogWatch


@dataclass
class Slot:
    """One of the executor's K slots, as the dealing core sees it. Executors subclass it
    to hold their worker (a process, an actor) next to this state."""

    worker_id: int
    """0..K-1: the slot, and a row's ``worker_id``."""
    ready: bool = False
    """Its worker is up and may be dealt an episode."""
    index: int | None = None
    """The episode the worker runs (or, dealt ahead, starts as soon as it reads it)."""
    ahead: int | None = None
    """An episode dealt ahead: queued in the worker behind ``index``, not started."""
    dealt_at: float = 0.0
    watch: LogWatch | None = None
    node: str | None = None
    """The machine its worker runs on, for the rows (set by an executor that spreads
    workers over several; None on the local pool)."""


@dataclass(frozen=True)
class Ready:
    """The slot's worker started and can take episodes."""

    slot: Slot


@dataclass(frozen=True)
class StartFailed:
    """The slot's worker could not start (the executor has cleaned it up)."""

    slot: Slot
    error: str
    node_lost: bool = False
    """Its machine left: not counted against the start-failure limit, just started again."""


@dataclass(frozen=True)
class Finished:
    """The worker ended the episode ``index`` (any status) and is still there."""

    slot: Slot
    index: int
    outcome: EpisodeOutcome


@dataclass(frozen=True)
class Died:
    """The slot's worker is gone (the executor has cleaned it up).

    The episode's error reads ``worker died ({how}) while running this episode (worker
    N{where})``."""

    slot: Slot
    how: str
    where: str = ""
    node_lost: bool = False
    """Its machine left: the episode gets extra retries (``node_loss_retries``)."""


@dataclass(frozen=True)
class Skipped:
    """The worker stopped before starting ``index``, dealt to it: it goes back uncounted."""

    slot: Slot
    index: int


SlotEvent = Ready | StartFailed | Finished | Died | Skipped
