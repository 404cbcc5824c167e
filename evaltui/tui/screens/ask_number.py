"""AskNumberScreen: a small modal asking for a whole number in a range (an episode #, a
replay's step)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.validation import Integer
from textual.widgets import Input, Label

from evaltui.tui.keys import QUIT_BINDINGS
from evaltui.tui.widgets.keys_footer import KeysFooter


class AskNumberScreen(ModalScreen[int | None]):
    """Returns the number typed (within ``minimum..maximum``), or None if dismissed."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), *QUIT_BINDINGS]

    def __init__(self, title: str, *, minimum: int = 0, maximum: int | None = None,
                 value: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.minimum = minimum
        self.maximum = maximum
        self.initial = value
        """What the input holds at first (the replay's current step)."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Input(self.initial, id="number", type="integer",
                        validators=[Integer(minimum=self.minimum, maximum=self.maximum)])
            yield Label("", id="number-error", classes="field-error")
        yield KeysFooter()

    @on(Input.Submitted, "#number")
    def _submitted(self, event: Input.Submitted) -> None:
        result = event.validation_result
        if not event.value.strip() or (result is not None and not result.is_valid):
            why = "; ".join(result.failure_descriptions) if result else "type a number"
            self.query_one("#number-error", Label).update(why or "type a number")
            return
        self.dismiss(int(event.value))
