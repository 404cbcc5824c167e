"""Messages posted by the TUI's workers and watcher threads to its screens.

The frequent ones (a queue poll, a run-dir change, index progress) carry the latest
state or only a "look again" signal, so ``can_replace`` lets a burst coalesce into
one update: the UI never falls behind a fast run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from textual.message import Message

from evaltui.runview.frames import FrameRef
from evaltui.runview.replay import Firing
from evaltui.tui.backend import QueueSnapshot

if TYPE_CHECKING:
    from evaltui.gpu.holders import GpuHolder
    from evaltui.results.compare import Comparison


class Latest(Message):
    """A message that a newer one of its class replaces, so that a burst coalesces."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, type(self))


@dataclass
class QueuePolled(Latest):
    """A fresh snapshot of the backend (handler: ``on_queue_polled``)."""

    snapshot: QueueSnapshot
    holders: dict[int, list[GpuHolder] | None] = field(default_factory=dict)
    """Per local GPU, the processes holding its memory and whose they are."""


class BackendChanged(Latest):
    """The backend reported a run state change: poll now (handler:
    ``on_backend_changed``; coalesces)."""


@dataclass
class BackendFailed(Message):
    """The backend could not be reached or refused a call (handler: ``on_backend_failed``)."""

    action: str
    error: str


@dataclass
class ActionDone(Message):
    """A backend call (submit, cancel, resume, priority, lock) finished.

    Handler: ``on_action_done``.
    """

    action: str
    run_id: str | None
    detail: str


class RunChanged(Latest):
    """The run dir being shown changed; drain its RunModel (handler: ``on_run_changed``)."""


@dataclass
class LogIndexed(Latest):
    """More of an episode's log.jsonl is indexed (handler: ``on_log_indexed``)."""

    lines: int
    complete: bool
    first_step: int
    last_step: int
    error_steps: frozenset[int]


@dataclass
class StepLoaded(Latest):
    """The records and frame of one replay step were read (handler: ``on_step_loaded``)."""

    step: int
    firings: list[Firing]
    total: int
    frame: FrameRef | None


@dataclass
class CompareDone(Message):
    """Two runs were read and compared, or could not be (handler: ``on_compare_done``).

    ``result`` is a :class:`~evaltui.results.compare.Comparison`; ``error`` says why
    there is none; ``mismatch`` is set when only differing episode sets stood in the way
    (the screen then offers to intersect). ``rows`` maps episode_id to its row in A
    (for the flipped episodes' instructions).
    """

    result: Comparison | None
    headers: tuple[str, str]
    error: str | None = None
    mismatch: bool = False
    rows: dict[str, dict[str, object]] | None = None
