"""Run and episode states: the string values are the ones on disk and on the wire."""

from __future__ import annotations

from enum import IntEnum, StrEnum


class RunState(StrEnum):
    """Lifecycle of one eval run, as a status read reports it (DESIGN §3)."""

    QUEUED = "queued"
    """Submitted and waiting for admission; no process yet."""
    STARTING = "starting"
    """Admitted and spawned; the run subprocess has not written summary.json yet."""
    RUNNING = "running"
    """The run subprocess is alive and writing its run dir."""
    DONE = "done"
    """``_DONE`` present and summary status ``done``."""
    FAILED = "failed"
    """The run subprocess exited non-zero, or summary says failed."""
    CANCELLED = "cancelled"
    """A cancel was requested and the process is gone."""
    ABORTED = "aborted"
    """No ``_DONE``, no cancel request, and the process is dead (crash, SIGKILL, reboot)."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_RUN_STATES


TERMINAL_RUN_STATES = frozenset(
    {RunState.DONE, RunState.FAILED, RunState.CANCELLED, RunState.ABORTED}
)


class SummaryStatus(StrEnum):
    """The ``status`` field of summary.json, written by the run subprocess itself."""

    RUNNING = "running"
    """Episodes are still being run."""
    DONE = "done"
    """Every selected episode finished (whatever each episode's own status)."""
    FAILED = "failed"
    """The run could not go on (e.g. the graph could not load)."""
    CANCELLED = "cancelled"
    """SIGTERM arrived; the state on disk is consistent up to that point."""


class EpisodeStatus(StrEnum):
    """How one episode ended (episode.json ``status``)."""

    OK = "ok"
    """The episode ran to its end (success or not); its metrics count."""
    ERROR = "error"
    """A node raised (or a worker died); the traceback is in ``error`` and the log."""
    TIMEOUT = "timeout"
    """A step took longer than ``per_step_budget_sec``."""
    CANCELLED = "cancelled"
    """The run was cancelled while this episode was in flight."""


class AdmitState(StrEnum):
    """Where an admit entry (a command ``evaltui run`` queued) is."""

    WAITING = "waiting"
    """Queued; ``waiting_reason`` says why it is not admitted yet."""
    ADMITTED = "admitted"
    """A reservation is held for it; its command may run."""
    RELEASED = "released"
    """Done: released by its holder, or its holder exited (``release_reason``)."""


class RunExit(IntEnum):
    """Exit codes of the run subprocess (``python -m evaltui.engine.main``); a status read
    of a run whose summary is unreadable tells done, failed and cancelled apart by them."""

    OK = 0
    """Every selected episode finished (whatever each episode's own status)."""
    FAILED = 1
    """The run could not go on (summary status ``failed``)."""
    REFUSED = 2
    """The spec was refused before anything ran (``evaltui eval`` exits 2 too)."""
    CANCELLED = 3
    """SIGTERM arrived and the run stopped cleanly (summary status ``cancelled``)."""
    DISK_FULL = 4
    """Its writes found no room for longer than ``EVALTUI_DISK_FULL_WAIT_SEC`` (``failed``,
    "disk full: PATH" where that could still be written)."""
    INTERRUPTED = 130
    """Interrupted (Ctrl-C) before the run got going."""
