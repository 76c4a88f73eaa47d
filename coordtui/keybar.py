"""The bottom row: the focused widget's main keys (Textual's Footer: the bindings with show=True), and `? Help`
and `^q Quit` pinned at its right end (`^p Palette` too when there is room), so that at 80 columns a long list
of pane keys never pushes help or the way out of sight. Each pane declares few enough main keys to fit at 80
columns beside them (tests/tui/functional/test_footers.py); the rest are in help."""
from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer, Static

PINNED = "[b $footer-key-foreground]?[/] Help  [b $footer-key-foreground]^q[/] Quit"
PALETTE = "  [b $footer-key-foreground]^p[/] Palette"
PALETTE_FROM = 100  # columns: narrower, the palette key is left to help (it costs the panes' keys room)


class KeyBar(Horizontal):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
    }
    KeyBar > Footer {
        dock: none;
        width: 1fr;
    }
    KeyBar > #keybar-help {
        width: auto;
        padding: 0 1;
        color: $footer-foreground;
        background: $footer-background;
        border-left: vkey $foreground 20%;
    }
    """

    def compose(self) -> ComposeResult:
        yield Footer(show_command_palette=False)
        yield Static(PINNED + PALETTE, id="keybar-help")  # our own constant markup, no server text

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#keybar-help", Static).update(PINNED + (PALETTE if event.size.width >= PALETTE_FROM else ""))
