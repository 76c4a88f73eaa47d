"""The key list: global keys, then the active pane's own bindings."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

GLOBAL_KEYS = [
    ("1-9", "switch pane: 1 Wake, 2 Inbox, 3 Chat, 4 Swarm, 5 Presence, 6 Doctor, 7 Notebook, 8 Directory, 9 Buzz"),
    ("ctrl+p", "command palette (panes, refresh, help)"),
    ("ctrl+r", "refresh the active pane"),
    ("?", "this help"),
    ("ctrl+q", "quit (stops the bundled server with --serve)"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, pane_title: str, pane_keys: list[tuple[str, str]]):
        super().__init__()
        self.pane_title = pane_title
        self.pane_keys = pane_keys

    def compose(self) -> ComposeResult:
        lines = ["[b]coordtui keys[/b]", ""]
        lines += [f"  [b]{key:>8}[/b]  {text}" for key, text in GLOBAL_KEYS]
        lines += ["", f"[b]{self.pane_title}[/b]", ""]
        lines += [f"  [b]{key:>8}[/b]  {text}" for key, text in self.pane_keys] or ["  (no pane keys)"]
        lines += ["", "escape closes"]
        with VerticalScroll(id="help"):
            yield Static("\n".join(lines), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
