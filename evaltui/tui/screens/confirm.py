"""ConfirmScreen: a yes/no question for destructive actions (cancel a run).

Its detail may be live (a callable, read again every ``LIVE_SEC``): the queue under a
cancel dialog keeps moving, and a count frozen when the dialog opened (74/200 beside a
pane saying 102/200) read as if the run were stuck.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from evaltui.tui.keys import QUIT_BINDINGS
from evaltui.tui.widgets.keys_footer import KeysFooter

LIVE_SEC = 0.5


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True on ``y``/Yes, False on ``n``/Escape/No."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
        *QUIT_BINDINGS,
    ]

    def __init__(self, title: str, detail: str | Callable[[], str] = "", *,
                 yes: str = "Yes") -> None:
        super().__init__()
        self.title_text = title
        self.live = detail if callable(detail) else None
        self.detail = detail() if callable(detail) else detail
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            if self.detail:
                yield Static(self.detail, id="confirm-detail")
            with Horizontal(classes="dialog-buttons"):
                yield Button("No", id="no")
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()
        if self.live is not None and self.detail:
            self.set_interval(LIVE_SEC, self._refresh_detail)

    def _refresh_detail(self) -> None:
        assert self.live is not None
        detail = self.live()
        if detail != self.detail:
            self.detail = detail
            self.query_one("#confirm-detail", Static).update(detail)

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
