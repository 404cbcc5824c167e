"""QueueScreen: the scheduler at a glance (k9s for eval runs).

A thread worker polls the backend every ``poll_interval`` seconds, and at once when
the backend reports a state change; each poll is one QueuePolled message carrying the
whole snapshot (a newer one replaces an unhandled older one). Every backend call the
keys trigger (cancel, resume, priority, lock) runs in a thread worker too, so a slow
ledger lock or an unreachable server never freezes the UI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input

from evaltui.states import RunState
from evaltui.tui.backend import Backend, BackendError, QueueSnapshot, RunInfo, readable_dir
from evaltui.tui.messages import ActionDone, BackendChanged, BackendFailed, QueuePolled
from evaltui.tui.screens.confirm import ConfirmScreen
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.meters import ResourceMeters
from evaltui.tui.widgets.queue_lines import RunDetail, RunsCaption, SchedulerHeader
from evaltui.tui.widgets.runs_table import RunsTable

LOCK_TTL_SEC = 300.0
"""The interactive lock lapses by itself if the UI dies; while it lives it is refreshed."""
PRIORITY_SETTLE_SEC = 0.3


class QueueScreen(Screen[None]):
    """Scheduler header, resource meters and the table of runs."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_run", "Open"),
        Binding("s", "submit", "Submit"),
        Binding("c", "cancel_run", "Cancel"),
        Binding("plus", "priority(1)", "Priority +"),
        Binding("minus", "priority(-1)", "Priority -"),
        Binding("slash", "filter", "Filter"),
        Binding("R", "resume", "Resume"),
        Binding("l", "lock", "Lock"),
        Binding("q", "app.quit", "Quit"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, backend: Backend, *, poll_interval: float = 1.0) -> None:
        super().__init__()
        self.backend = backend
        self.poll_interval = poll_interval
        self.snapshot: QueueSnapshot | None = None
        self.poll_error: str | None = None
        self._lock_refresh: Timer | None = None
        self._asked_priority: dict[str, int] = {}
        self._priority_timers: dict[str, Timer] = {}

    def compose(self) -> ComposeResult:
        yield SchedulerHeader(id="queue-header")
        with Vertical(id="resources", classes="box"):
            yield ResourceMeters()
        yield RunsCaption(id="runs-caption")
        yield RunsTable(id="runs")
        yield RunDetail(id="run-detail")
        yield Input(placeholder="filter runs: id, graph, dataset, state or reason", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#resources").border_title = "resources"
        self.query_one("#filter").display = False
        self.backend.subscribe(self._backend_changed)
        self._show_header()
        self.poll()
        self.set_interval(self.poll_interval, self.poll)

    def _backend_changed(self) -> None:
        """Called on a scheduler thread: hand over to the UI as a coalescing message."""
        self.post_message(BackendChanged())

    # --- polling -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def poll(self) -> None:
        """Take a snapshot of the backend (thread) and post it."""
        try:
            snapshot = self.backend.snapshot()
        except BackendError as exc:  # its message is written for the user already
            self.post_message(BackendFailed("poll", str(exc)))
            return
        except Exception as exc:  # unreachable server, broken ledger: say so, keep going
            self.post_message(BackendFailed("poll", f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(QueuePolled(snapshot))

    def on_backend_changed(self, _: BackendChanged) -> None:
        self.poll()

    def on_queue_polled(self, message: QueuePolled) -> None:
        self.snapshot = message.snapshot
        seen = {r.run_id: r.priority for r in message.snapshot.runs}
        self._asked_priority = {k: v for k, v in self._asked_priority.items()
                                if seen.get(k, v) != v}
        self.poll_error = None
        self.query_one(ResourceMeters).resources = message.snapshot.resources
        self.query_one(RunsTable).update_runs(message.snapshot.runs, self.app.now())  # type: ignore[attr-defined]
        self._show_header()
        self._show_caption()
        self._show_detail()

    def on_backend_failed(self, message: BackendFailed) -> None:
        if message.action == "poll":
            self.poll_error = message.error
            self._show_header()
        else:
            self.notify(f"{message.action} failed: {message.error}", severity="error",
                        timeout=6)

    def on_action_done(self, message: ActionDone) -> None:
        self.notify(message.detail, timeout=4)
        self.poll()

    # --- display -------------------------------------------------------------------------

    def _show_header(self) -> None:
        snap = self.snapshot
        self.query_one(SchedulerHeader).show(snap.scheduler if snap else None,
                                             self.backend.label, self.poll_error)

    def _show_caption(self) -> None:
        table = self.query_one(RunsTable)
        runs = self.snapshot.runs if self.snapshot else ()
        self.query_one(RunsCaption).show(runs, table.shown, table.text_filter)

    def _show_detail(self) -> None:
        self.query_one(RunDetail).show(self.query_one(RunsTable).selected)

    @on(DataTable.RowHighlighted, "#runs")
    def _highlighted(self) -> None:
        self._show_detail()

    # --- actions -------------------------------------------------------------------------

    def _selected(self) -> RunInfo | None:
        run = self.query_one(RunsTable).selected
        if run is None:
            self.notify("no run selected", severity="warning", timeout=2)
        elif run.kind == "admit":
            # Not a run: it has no run dir, and it leaves the queue when its command does.
            self.notify(f"{run.run_id} is `evaltui run {run.graph}` waiting for admission; "
                        "stop that command to take it out of the queue", timeout=6)
            return None
        return run

    def action_open_run(self) -> None:
        run = self._selected()
        if run is None:
            return
        if run.run_dir is None or not readable_dir(run.run_dir):
            # Attached to a backend on another machine (or another user's outputs): the
            # run screen reads the run dir from disk, so there is nothing it could show.
            where = f" {run.run_dir}" if run.run_dir is not None else ""
            self.notify(f"run {run.run_id}: its directory{where} is not readable on this "
                        f"machine, so its episodes cannot be shown here", severity="warning",
                        timeout=8)
            return
        self.app.open_run(run.run_dir, run.episodes_total)  # type: ignore[attr-defined]

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_run()

    def action_submit(self) -> None:
        def submitted(run_id: str | None) -> None:
            if run_id:
                self.notify(f"submitted run {run_id}", timeout=4)
                self.poll()
        self.app.push_screen(SubmitScreen(self.backend), submitted)

    def action_cancel_run(self) -> None:
        run = self._selected()
        if run is None:
            return
        if run.state.terminal:
            self.notify(f"run {run.run_id} is {run.state.value} already", timeout=3)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._call("cancel", run.run_id, self.backend.cancel, run.run_id)
        what = "running" if run.state is not RunState.QUEUED else "queued"
        self.app.push_screen(ConfirmScreen(
            f"Cancel run {run.run_id}?",
            f"{run.graph} on {run.dataset}/{run.split} is {what} "
            f"({run.episodes_finished}/{run.episodes_total} episodes). A running run gets "
            "SIGTERM; finished episodes are kept.", yes="Cancel run"), confirmed)

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
        self.post_message(ActionDone(action, run_id, f"{action} {subject}{state}"))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(RunsTable).set_filter(event.value)
        self._show_caption()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one(RunsTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.query_one(RunsTable).focus()

    def on_unmount(self) -> None:
        self._stop_lock_refresh()
