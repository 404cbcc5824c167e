"""QueueScreen: the scheduler at a glance (k9s for eval runs).

A thread worker polls the backend every ``poll_interval`` seconds, and at once when
the backend reports a state change; each poll is one QueuePolled message carrying the
whole snapshot (a newer one replaces an unhandled older one). Every backend call the
keys trigger (cancel, resume, priority, lock) runs in a thread worker too, so a slow
ledger lock or an unreachable server never freezes the UI.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from evaltui.contract.states import RunState
from evaltui.gpu.holders import GpuHolder, gpu_holders
from evaltui.tui.backend import Backend, BackendError, QueueSnapshot, RunInfo, readable_dir
from evaltui.tui.messages import ActionDone, BackendChanged, BackendFailed, QueuePolled
from evaltui.tui.screens.compare import CompareScreen
from evaltui.tui.screens.queue_actions import BackendActions
from evaltui.tui.screens.submit import SubmitScreen
from evaltui.tui.widgets.keys_footer import KeysFooter
from evaltui.tui.widgets.meters import ResourceMeters
from evaltui.tui.widgets.queue_lines import (
    RunDetail,
    RunsCaption,
    SchedulerHeader,
    empty_message,
)
from evaltui.tui.widgets.runs_table import MARKS, RunsTable
from evaltui.tui.widgets.set_groups import SetGroups, sets_outputs


class QueueScreen(BackendActions, Screen[None]):
    """Scheduler header, resource meters and the table of runs."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_run", "Open"),
        Binding("s", "submit", "Submit"),
        Binding("c", "cancel_run", "Cancel"),
        Binding("plus", "priority(1)", "Priority", key_display="+/-"),
        Binding("minus", "priority(-1)", "Priority -", show=False),
        Binding("R", "resume", "Resume"),
        Binding("slash", "filter", "Filter"),
        Binding("o", "sort", "Sort"),
        Binding("m", "mark", "Mark"),
        Binding("x", "compare", "Compare"),
        Binding("l", "lock", "Lock", show=False),  # in help and the palette: 80 columns
        Binding("escape", "clear_filter", "Clear filter"),
        # Taken when the key's action does not apply (hidden from the footer then):
        # the key still answers, with why not.
        Binding("c", "refused('cancel_run')", show=False),
        Binding("plus", "refused('priority', 1)", show=False),
        Binding("minus", "refused('priority', -1)", show=False),
        Binding("R", "refused('resume')", show=False),
        Binding("m", "refused('mark')", show=False),
        Binding("x", "refused('compare')", show=False),
    ]
    CORE_KEYS: ClassVar[tuple[str, ...]] = (
        "select_cursor", "open_run", "submit", "clear_filter", "cancel_run", "resume",
        "filter", "mark", "compare", "priority(1)")
    """What the footer keeps at 80 columns, most important first (see KeysFooter)."""
    RUN_ACTIONS = frozenset({"cancel_run", "priority", "resume", "mark"})
    """Actions on the selected run: in the footer only when that run can take them."""

    def __init__(self, backend: Backend, *, poll_interval: float = 1.0) -> None:
        super().__init__()
        self.backend = backend
        self.poll_interval = poll_interval
        self.snapshot: QueueSnapshot | None = None
        self.poll_error: str | None = None
        self._lock_refresh: Timer | None = None
        self._asked_priority: dict[str, int] = {}
        self._priority_timers: dict[str, Timer] = {}
        self._last_good_poll: float | None = None
        self.submit_draft: dict[str, Any] = {}
        """What the submit form held when it was last closed (kept across Esc)."""

    def compose(self) -> ComposeResult:
        yield SchedulerHeader(id="queue-header")
        with Vertical(id="resources", classes="box"):
            yield ResourceMeters()
        yield RunsCaption(id="runs-caption")
        yield SetGroups(sets_outputs(self.backend), id="set-groups")
        yield RunsTable(id="runs")
        yield Static(id="runs-empty")
        yield RunDetail(id="run-detail")
        yield Input(placeholder="filter runs: id, graph, dataset, state or reason", id="filter")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#resources").border_title = "resources"
        self.query_one("#filter").display = False
        self.query_one("#runs-empty").display = False
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
        self.post_message(QueuePolled(snapshot, self._holders(snapshot)))

    @staticmethod
    def _holders(snapshot: QueueSnapshot) -> dict[int, list[GpuHolder] | None]:
        """Whose are the processes on this machine's GPUs (a Ray node's are not here)."""
        local = [g for g in snapshot.resources.gpus if g.node is None]
        if not any(g.processes for g in local):
            return {}
        live = [r.run_dir for r in snapshot.runs if r.run_dir is not None
                and r.state in (RunState.RUNNING, RunState.STARTING)]
        try:
            return gpu_holders(local, run_dirs=live)
        except OSError:  # an unreadable state dir: the meters still show, unattributed
            return {}

    def on_backend_changed(self, _: BackendChanged) -> None:
        self.poll()

    def on_queue_polled(self, message: QueuePolled) -> None:
        self.snapshot = message.snapshot
        seen = {r.run_id: r.priority for r in message.snapshot.runs}
        self._asked_priority = {k: v for k, v in self._asked_priority.items()
                                if seen.get(k, v) != v}
        self.poll_error = None
        self._last_good_poll = time.monotonic()
        meters = self.query_one(ResourceMeters)
        meters.holders = message.holders
        meters.resources = message.snapshot.resources
        self.query_one(RunsTable).update_runs(message.snapshot.runs, self.app.now())  # type: ignore[attr-defined]
        self.query_one(SetGroups).update_from(message.snapshot.runs)
        self._show_stale()
        self._show_header()
        self._show_caption()
        self._show_detail()

    def on_backend_failed(self, message: BackendFailed) -> None:
        if message.action == "poll":
            self.poll_error = message.error
            self._show_stale()
            self._show_header()
            self._show_caption()
        else:
            self.notify(f"{message.action} failed: {message.error}", severity="error",
                        timeout=6)

    def on_action_done(self, message: ActionDone) -> None:
        self.notify(message.detail, timeout=4)
        self.poll()

    # --- display -------------------------------------------------------------------------

    @property
    def stale_for(self) -> float | None:
        """Seconds since the last good poll while polls fail (what is shown is that old)."""
        if self.poll_error is None or self._last_good_poll is None:
            return None
        return time.monotonic() - self._last_good_poll

    def _show_stale(self) -> None:
        """Dim the meters and the table and say how old they are while polls fail."""
        stale = self.stale_for
        box = self.query_one("#resources")
        box.set_class(stale is not None, "-stale")
        self.query_one(RunsTable).set_class(stale is not None, "-stale")
        box.border_title = "resources" if stale is None else f"resources · stale {int(stale)}s"

    def _show_header(self) -> None:
        snap = self.snapshot
        self.query_one(SchedulerHeader).show(snap.scheduler if snap else None,
                                             self.backend.label, self.poll_error,
                                             self.stale_for)

    def _show_caption(self) -> None:
        table = self.query_one(RunsTable)
        runs = self.snapshot.runs if self.snapshot else ()
        self.query_one(RunsCaption).show(runs, table.row_count, table.text_filter,
                                         table.sorted_by, self.stale_for)
        message = empty_message(len(runs), table.text_filter) if self.snapshot else None
        empty = self.query_one("#runs-empty", Static)
        empty.display = message is not None
        empty.update(message or "")

    @on(DataTable.RowHighlighted, "#runs")
    def _show_detail(self) -> None:
        """The selected run's pane; the footer follows the selection (its keys)."""
        table = self.query_one(RunsTable)
        run = table.selected
        mark = MARKS[table.marks.index(run.run_id)] if run and run.run_id in table.marks \
            else None
        self.query_one(RunDetail).show(run, mark)
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only keys that act show in the footer: none of the screen's keys while typing
        a filter (the input takes them), esc while a filter is open, the run keys the
        selected run can take, compare with two runs marked. A hidden run key still
        answers (``refused``), saying why it does nothing."""
        box = self.query_one("#filter", Input)
        if action == "clear_filter":
            return bool(box.display)
        if box.has_focus:
            return False
        if action == "refused":
            return True
        table = self.query_one(RunsTable)
        if action == "compare":
            return len(table.marks) == len(MARKS)
        if action not in self.RUN_ACTIONS:
            return True
        run = table.selected
        if run is not None and run.kind == "serve":  # a served policy: it can be stopped
            return action == "cancel_run" and not run.state.terminal
        if run is None or run.kind != "run":
            return False
        if action == "priority":
            return run.state is RunState.QUEUED
        if action == "cancel_run":
            return not run.state.terminal
        if action == "resume":
            return run.state.terminal
        return True

    def action_refused(self, action: str, *args: object) -> None:
        """A run key pressed where it does not apply: the action itself says why."""
        getattr(self, f"action_{action}")(*args)

    # --- actions -------------------------------------------------------------------------

    def _selected(self, serve: bool = False) -> RunInfo | None:
        """The selected run (``serve``: or served policy), else None and a note why."""
        run = self.query_one(RunsTable).selected
        if run is None:
            self.notify("no run selected", severity="warning", timeout=2)
        elif run.kind != "run" and not (serve and run.kind == "serve"):
            # Not a run: it has no run dir, and it leaves the queue when its command does.
            what = "`evaltui serve-policy`" if run.kind == "serve" else \
                f"`evaltui run {run.graph}`"
            self.notify(f"{run.run_id} is {what}, not a run; `evaltui cancel {run.run_id}` "
                        "takes it out of the queue", timeout=6)
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
        self.app.push_screen(SubmitScreen(self.backend, draft=self.submit_draft), submitted)

    def action_sort(self) -> None:
        table = self.query_one(RunsTable)
        table.cycle_sort()
        self._show_caption()

    def action_mark(self) -> None:
        run = self._selected()
        if run is None:
            return
        table = self.query_one(RunsTable)
        table.toggle_mark(run.run_id)
        self._show_detail()
        if len(table.marks) == len(MARKS):
            self.notify(f"A = {table.marks[0]}, B = {table.marks[1]}: x compares them",
                        timeout=4)

    def action_compare(self) -> None:
        """Open the comparison of the marked runs (B against A)."""
        table = self.query_one(RunsTable)
        if len(table.marks) != len(MARKS):
            self.notify("mark two runs with m first (A, then B), then press x", timeout=4)
            return
        runs = [table.run(rid) for rid in table.marks]
        dirs = [r.run_dir for r in runs if r is not None and r.run_dir is not None
                and readable_dir(r.run_dir)]
        if len(dirs) != len(MARKS):
            self.notify("a marked run's directory is not readable on this machine",
                        severity="warning", timeout=6)
            return
        self.app.push_screen(CompareScreen(dirs[0], dirs[1]))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()
        self.refresh_bindings()

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()  # typing in the filter hides the run keys, and back

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
        self.refresh_bindings()

    def on_unmount(self) -> None:
        self._stop_lock_refresh()
