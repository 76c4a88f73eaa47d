"""Where a screen's cursor starts, decided once: its `AUTO_FOCUS` selector.

Textual focuses a new screen's first match of `AUTO_FOCUS` as the screen resumes (App's default "*": the first
focusable widget), while a `focus()` called in `on_mount` takes effect later, from the App's queue. Keys typed in
between went to the first widget: the first letters of a token into the URL field, an enter typed ahead onto a
confirmation's destructive button. A screen naming its start in `AUTO_FOCUS` is focused there from the first moment.
`focus_first` in `on_mount` covers a screen opened while the terminal window has no focus (Textual auto-focuses only
a focused app); on a screen already focused there it changes nothing."""
from __future__ import annotations

from typing import Any

from textual.screen import Screen


def focus_first(screen: Screen[Any]) -> None:
    """Focuses the first focusable widget the screen's `AUTO_FOCUS` names, as Textual's auto-focus picks it (no-op
    where it already has focus)."""
    if not screen.AUTO_FOCUS:
        return
    for widget in screen.query(screen.AUTO_FOCUS):
        if widget.focusable:
            widget.focus()
            return
