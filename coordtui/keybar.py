"""The bottom row: the focused widget's main keys (Textual's Footer: the bindings with show=True), and `? Help`
and `^q Quit` pinned at its right end (`^p Palette` too when there is room), so that at 80 columns a long list
of pane keys never pushes help or the way out of sight. Each pane declares few enough main keys to fit at 80
columns beside them (tests/tui/functional/test_footers.py); the rest are in help."""
from __future__ import annotations

from typing import Callable

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer, Static

PINNED = "[b $footer-key-foreground]?[/] Help  [b $footer-key-foreground]^q[/] Quit"
PALETTE = "  [b $footer-key-foreground]^p[/] Palette"
PALETTE_FROM = 100  # columns: narrower, the palette key is left to help (it costs the panes' keys room)


class KeyFooter(Footer):
    """Textual's Footer, which can say when the keys it shows are the latest focus's."""

    def __init__(self) -> None:
        super().__init__(show_command_palette=False)
        self.after_keys: list[Callable[[], object]] = []  # run once the next rebuild is painted
        self.shown: tuple[tuple[str, str, bool], ...] = ()

    def keys_now(self) -> tuple[tuple[str, str, bool], ...]:
        return tuple((binding.key, binding.description, enabled)
                     for _node, binding, enabled, _tip in self.screen.active_bindings.values() if binding.show)

    async def recompose(self) -> None:
        """Rebuilt only when the keys differ from those shown (a focus change asks twice: rebuilding again
        emptied the row for a moment). A rebuild Textual asked for after the screen went away (escape right after
        a list opened) does nothing, as Widget.recompose does: asking a removed footer for its keys raised NoScreen."""
        if not self.is_attached or self._pruning:
            return
        keys = self.keys_now()
        if keys != self.shown or not self.children:
            self.shown = keys
            await super().recompose()
        waiting, self.after_keys = self.after_keys, []
        for then in waiting:
            self.call_after_refresh(then)


class KeyBar(Horizontal):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
    }
    KeyBar > KeyFooter {
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
        yield KeyFooter()
        yield Static(PINNED + PALETTE, id="keybar-help")  # our own constant markup, no server text

    def show_keys_now(self, then: Callable[[], object]) -> None:
        """The focused widget's keys in the row at the next refresh, and `then` once they are painted (left to
        itself, a focus change announces new keys only after a refresh, and Footer rebuilds after another: a
        pane refreshing a big list meanwhile held the previous pane's keys on screen)."""
        footer = self.query_one(KeyFooter)
        if not self.app.app_focus:  # Footer does not rebuild while the terminal is out of focus
            self.call_after_refresh(then)
            return
        footer.after_keys.append(then)
        self.screen.refresh_bindings()

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#keybar-help", Static).update(PINNED + (PALETTE if event.size.width >= PALETTE_FROM else ""))
