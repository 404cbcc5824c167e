"""GoToStepScreen: a small modal asking for a step number."""

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


class GoToStepScreen(ModalScreen[int | None]):
    """Returns the step typed (within ``0..last_step``), or None if dismissed."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), *QUIT_BINDINGS]

    def __init__(self, last_step: int, current: int) -> None:
        super().__init__()
        self.last_step = last_step
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Go to step (0–{self.last_step})", classes="dialog-title")
            yield Input(str(self.current), id="step", type="integer",
                        validators=[Integer(minimum=0, maximum=self.last_step)])
            yield Label("", id="step-error", classes="field-error")
        yield KeysFooter()

    @on(Input.Submitted, "#step")
    def _submitted(self, event: Input.Submitted) -> None:
        result = event.validation_result
        if result is not None and not result.is_valid:
            self.query_one("#step-error", Label).update("; ".join(result.failure_descriptions))
            return
        self.dismiss(int(event.value))
