"""The bottom row: the focused widget's keys (Textual's Footer), and `? Help` and `^p Palette` pinned at its
right end, so that at 80 columns a long list of pane keys never pushes help out of sight."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer, Static


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
        yield Static("[b $footer-key-foreground]?[/] Help  [b $footer-key-foreground]^p[/] Palette", id="keybar-help")
