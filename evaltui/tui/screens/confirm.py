"""ConfirmScreen: a yes/no question for destructive actions (cancel a run)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from evaltui.tui.keys import QUIT_BINDINGS
from evaltui.tui.widgets.keys_footer import KeysFooter


class ConfirmScreen(ModalScreen[bool]):
    """Dismisses with True on ``y``/Yes, False on ``n``/Escape/No."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
        *QUIT_BINDINGS,
    ]

    def __init__(self, title: str, detail: str = "", *, yes: str = "Yes") -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            if self.detail:
                yield Static(self.detail)
            with Horizontal(classes="dialog-buttons"):
                yield Button("No", id="no")
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
