"""The key list: global keys, the active pane's keys, and how to change them in keys.toml.

The app gives it the panes (key and title, from the one pane list: panes/catalog.py) and the pane in view."""
from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import Static

from ..keys import KeyConfig


@dataclass(frozen=True)
class PaneHelp:
    """The section of the pane in view: its title, what its keys do, and its class (whose bindings are listed)."""
    title: str
    keys: list[tuple[str, str]]
    cls: type[DOMNode]


def pane_keys(panes: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The rows that switch panes, from (key, title) of every pane in order."""
    keys = f"{panes[0][0]}-{panes[-1][0]}"
    return [(keys, "switch pane: " + ", ".join(f"{key} {title}" for key, title in panes)),
            (f"alt+{keys}", "switch pane from anywhere, inside inputs and editors too (or escape, then the digit)")]


GLOBAL_KEYS = [
    ("j / k", "down / up in every list, arrows too (keys.toml: list.down, list.up)"),
    ("home / end", "first / last row (list.first, list.last); pgup / pgdn a page"),
    ("/", "filter the list of the pane or screen (escape clears)"),
    ("u", "undo the last undoable action (pending cleared, channel archived)"),
    ("ctrl+e", "in a form: write the text in $VISUAL / $EDITOR"),
    ("ctrl+p", "command palette (panes, refresh, help)"),
    ("ctrl+r", "refresh the active pane"),
    ("?", "this help"),
    ("ctrl+q", "quit (stops the bundled server with --serve)"),
]

NOTES = [
    "Tab labels count what waits: wake items, unread mail, unread chat, unseen buzz (live).",
    "New mail and chat toast quietly when their pane is not in view; --notify also sends a desktop",
    "notification through the terminal (OSC 9 / OSC 777); --bell rings on urgent items.",
    "The top bar says when the pane in view was last updated.",
]


def key_rows(cls: type[DOMNode], keymap: dict[str, str]) -> list[tuple[str, str, str]]:
    """(key as configured, what it does, binding id) for the pane's own bindings."""
    rows = []
    seen = set()
    for base in cls.__mro__:
        for binding in base.__dict__.get("BINDINGS", []):
            if isinstance(binding, Binding) and binding.id and binding.id not in seen:
                seen.add(binding.id)
                rows.append((keymap.get(binding.id, binding.key), binding.description or binding.action, binding.id))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, panes: list[tuple[str, str]], pane: PaneHelp | None, key_config: KeyConfig) -> None:
        super().__init__()
        self.panes = panes
        self.pane = pane
        self.key_config = key_config

    def compose(self) -> ComposeResult:
        keymap = self.key_config.keymap
        lines = ["[b]coordtui keys[/b]", ""]
        lines += [f"  [b]{escape(key):>9}[/b]  {escape(text)}" for key, text in pane_keys(self.panes) + GLOBAL_KEYS]
        lines += [""] + [f"  {escape(note)}" for note in NOTES]
        if self.pane is not None:
            lines += ["", f"[b]{escape(self.pane.title)}[/b]", ""]
            lines += [f"  [b]{escape(key):>9}[/b]  {escape(text)}" for key, text in self.pane.keys]
            lines += ["", "[b]Bindings[/b] (key · action · id for keys.toml)", ""]
            lines += [f"  [b]{escape(key):>9}[/b]  {escape(text):<16} [dim]{escape(binding_id)}[/dim]"
                      for key, text, binding_id in key_rows(self.pane.cls, keymap)]
        lines += ["", f"Your keys: {escape(str(self.key_config.path))}", '  [keys] "inbox.compose" = "C"   '
                  '(also app.pane.wake…, app.help, app.reload, app.undo, form.submit, form.editor)',
                  "  [options] open_marks_read = false   (opening a message no longer acknowledges it)",
                  "", "escape closes"]
        with VerticalScroll(id="help"):
            yield Static("\n".join(lines), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
