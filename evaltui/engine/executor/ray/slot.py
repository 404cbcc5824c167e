"""One worker slot of the Ray executor: its actor, the episode it runs, and the pulls that
bring that episode's log and frames to the run dir while it runs.

The actor writes into node-local scratch; the run process asks for the bytes since the
offsets it holds (``read_since``) and appends them through an
:class:`~evaltui.engine.executor.ray.sink.EpisodeSink`. A pull is tagged with the episode and
attempt, and one whose offsets no longer match the sink's is dropped, so a retried
attempt never mixes with an earlier one.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltui.engine.executor.ray.sink import EpisodeSink
from evaltui.engine.executor.slots import Slot


@dataclass
class RaySlot(Slot):
    """A slot's actor, its setup, and the pulls of the episode it runs (``index``)."""

    actor: Any = None
    setup_ref: Any = None
    info: dict[str, Any] | None = None
    started_at: float = 0.0
    attempt: int = 0
    run_ref: Any = None
    sink: EpisodeSink | None = None
    pull_ref: Any = None
    pull_offsets: dict[str, int] | None = None
    pull_sent: float = 0.0

    def deal(self, index: int, attempt: int, episode: dict[str, Any], log: Path) -> None:
        """Start ``episode`` on this slot's (ready) actor."""
        self.attempt = attempt
        self.sink = EpisodeSink(log.parent)
        self.run_ref = self.actor.run_episode.remote(index, attempt, episode)
        self.pull_sent = time.monotonic()  # the first pull is due a slice later

    def pull_if_due(self, now: float, every_sec: float) -> None:
        """Ask the actor for new bytes unless a pull is in flight or one went out lately."""
        if self.pull_ref is None and now - self.pull_sent >= every_sec:
            assert self.sink is not None
            self.pull_offsets = dict(self.sink.offsets)
            self.pull_ref = self.actor.read_since.remote(self.index, self.attempt,
                                                         self.pull_offsets)
            self.pull_sent = now

    def on_pull(self) -> None:
        """Apply the answered pull, unless the sink moved on since it was asked."""
        # optional: ray (the ray extra)
        import ray

        ref, self.pull_ref = self.pull_ref, None
        try:
            chunks = ray.get(ref)
        except ray.exceptions.RayError:
            return  # the actor died: its run ref says so
        if chunks and self.sink is not None and self.pull_offsets == self.sink.offsets:
            self.sink.append(chunks)

    def pull_rest(self) -> None:
        """Everything the ended episode wrote that is not here yet, then its assets."""
        # optional: ray (the ray extra)
        import ray

        assert self.sink is not None
        if self.pull_ref is not None:
            self.on_pull()  # in flight: apply it before asking for the rest
        while True:
            chunks = ray.get(self.actor.read_since.remote(self.index, self.attempt,
                                                          dict(self.sink.offsets)), timeout=60)
            if not chunks:
                break
            self.sink.append(chunks)
        assets = ray.get(self.actor.assets.remote(self.index, self.attempt), timeout=60)
        if assets:
            self.sink.write_assets(assets)


def death_cause(exc: BaseException) -> str:
    """The one line of a Ray actor-death error that says why the worker died."""
    text = str(exc)
    found = re.search(r"(?:Worker exit detail|exit_detail): ?([^\n]+)", text)
    cause = found.group(1) if found else text.strip().splitlines()[0] if text.strip() else ""
    return cause.strip()[:300] or type(exc).__name__


def remote_error(exc: BaseException) -> str:
    """A remote call's error as text (the remote traceback Ray carries)."""
    return str(exc).strip() or type(exc).__name__
