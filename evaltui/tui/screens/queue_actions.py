"""The queue screen's backend actions on the selected run and the scheduler: cancel,
priority, resume and the interactive lock.

Every call runs in a thread worker (a slow ledger lock or an unreachable server never
freezes the UI) and ends in a message: ActionDone (a toast that says what changed,
e.g. the new priority) or BackendFailed (an error toast).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work
from textual.timer import Timer

from evaltui.contract.states import RunState
from evaltui.contract.views import data_label
from evaltui.tui.messages import ActionDone, BackendFailed
from evaltui.tui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from evaltui.tui.backend import Backend, QueueSnapshot, RunInfo

LOCK_TTL_SEC = 300.0
"""The interactive lock lapses by itself if the UI dies; while it lives it is refreshed."""
PRIORITY_SETTLE_SEC = 0.3
"""A burst of +/- presses is sent as one call with the final value."""


class BackendActions:
    """Mixed into QueueScreen (a Textual Screen: notify, timers, workers, messages)."""

    backend: Backend
    snapshot: QueueSnapshot | None
    _asked_priority: dict[str, int]
    _priority_timers: dict[str, Timer]
    _lock_refresh: Timer | None

    if TYPE_CHECKING:  # provided by the Screen this is mixed into
        def _selected(self, serve: bool = False) -> RunInfo | None: ...
        def notify(self, message: str, **kwargs: Any) -> None: ...
        def set_timer(self, delay: float, callback: Callable[[], Any]) -> Timer: ...
        def set_interval(self, interval: float, callback: Callable[[], Any]) -> Timer: ...
        def post_message(self, message: Any) -> bool: ...
        @property
        def app(self) -> Any: ...

    def action_cancel_run(self) -> None:
        run = self._selected(serve=True)
        if run is None:
            return
        if run.state.terminal:
            self.notify(f"run {run.run_id} is {run.state.value} already", timeout=3)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._call("cancel", run.run_id, self.backend.cancel, run.run_id)

        if run.kind == "serve":  # `evaltui serve-policy`: released, it stops itself
            at = f" at {run.url}" if run.url else ""
            self.app.push_screen(ConfirmScreen(
                f"Stop serve-policy {run.run_id}?",
                f"{run.graph}{at} is {'waiting' if run.state is RunState.QUEUED else 'serving'}"
                f". Its reservation is released; the server stops within a second, as on "
                "SIGTERM.", yes="Stop it"), confirmed)
            return

        def detail() -> str:  # from the latest poll, while the dialog is open
            now = next((r for r in (self.snapshot.runs if self.snapshot else ())
                        if r.run_id == run.run_id), run)
            what = "queued" if now.state is RunState.QUEUED else now.state.value
            return (f"{now.graph} on {data_label(now.dataset, now.split)} is {what} "
                    f"({now.episodes_finished}/{now.episodes_total} episodes). A running "
                    "run gets SIGTERM; finished episodes are kept.")
        self.app.push_screen(ConfirmScreen(f"Cancel run {run.run_id}?", detail,
                                           yes="Cancel run"), confirmed)

    def action_priority(self, delta: int) -> None:
        run = self._selected()
        if run is None:
            return
        if run.state is not RunState.QUEUED:
            self.notify("only a queued run's priority can change", timeout=3)
            return
        # Presses build on the last priority asked for, not the last one polled, and a
        # burst of presses sends one call with the final value (so calls never race).
        current = self._asked_priority.get(run.run_id, run.priority)
        self._asked_priority[run.run_id] = max(-100, min(100, current + delta))
        pending = self._priority_timers.pop(run.run_id, None)
        if pending is not None:
            pending.stop()
        self._priority_timers[run.run_id] = self.set_timer(
            PRIORITY_SETTLE_SEC, lambda: self._send_priority(run.run_id))

    def _send_priority(self, run_id: str) -> None:
        self._priority_timers.pop(run_id, None)
        target = self._asked_priority.get(run_id)
        if target is not None:
            self._call("priority", run_id, self.backend.set_priority, run_id, target)

    def action_resume(self) -> None:
        run = self._selected()
        if run is not None:
            self._call("resume", run.run_id, self.backend.resume, run.run_id)

    def action_lock(self) -> None:
        snap = self.snapshot
        info = snap.scheduler if snap else None
        if info is not None and info.mode == "locked":
            if info.lock_owner != self.backend.owner:
                self.notify(f"the lock is held by {info.lock_owner}", severity="warning")
                return
            self._stop_lock_refresh()
            self._call("unlock", None, self.backend.unlock)
            return
        self._call("lock", None, self.backend.lock, LOCK_TTL_SEC)
        self._lock_refresh = self.set_interval(LOCK_TTL_SEC / 3, self._refresh_lock)

    def _refresh_lock(self) -> None:
        self._call("lock", None, self.backend.lock, LOCK_TTL_SEC, quiet=True)

    def _stop_lock_refresh(self) -> None:
        if self._lock_refresh is not None:
            self._lock_refresh.stop()
            self._lock_refresh = None

    @work(thread=True, group="actions", exit_on_error=False)
    def _call(self, action: str, run_id: str | None, fn: Callable[..., Any], *args: Any,
              quiet: bool = False) -> None:
        try:
            result = fn(*args)
        except Exception as exc:  # BackendError and friends: tell the user, keep running
            if action == "lock":
                self.app.call_from_thread(self._stop_lock_refresh)
            if action == "priority" and run_id is not None:
                self.app.call_from_thread(self._asked_priority.pop, run_id, None)
            self.post_message(BackendFailed(action, str(exc)))
            return
        if quiet:
            return
        subject = f"run {run_id}" if run_id else "scheduler"
        state = f": {result.value}" if isinstance(result, RunState) else ""
        if action == "priority":  # say the value it now has, not only that it changed
            state = f": now {args[-1]}"
        self.post_message(ActionDone(action, run_id, f"{action} {subject}{state}"))
