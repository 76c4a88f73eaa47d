"""Yes/no before anything destructive (delete a link, archive a channel, acknowledge all mail)."""
from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from .focus import focus_first


class ConfirmScreen(ModalScreen[bool]):
    AUTO_FOCUS = "#no"  # see screens/focus.py (enter alone never destroys)
    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]
    # A Label is as wide as its text: the question must wrap inside the dialog, never be cut at 80 columns.
    DEFAULT_CSS = """
    ConfirmScreen #confirm-question { width: 100%; }
    """

    def __init__(self, question: str, yes: str = "Yes"):
        super().__init__(classes="form-screen")
        self.question = question
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="form"):
            yield Label(f"[b]{escape(self.question)}[/b]", id="confirm-question")
            yield Label("[dim]y confirms · n or escape cancels[/dim]")
            with Horizontal(id="form-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error", compact=True)
                yield Button("Cancel (n)", id="no", compact=True)

    def on_mount(self) -> None:
        focus_first(self)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")
