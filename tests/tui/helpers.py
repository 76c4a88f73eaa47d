"""Helpers for driving coordtui against a real server."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable
from datetime import datetime, timezone

from textual.drivers import headless_driver
from textual.drivers.headless_driver import HeadlessDriver

from coordtui.app import CoordApp
from coordtui.config import Profile
from coordtui.panes.base import Pane
from coordtui.panes.catalog import PANES
from tests.conftest import TOKENS

FROZEN_NOW = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)


def make_app(server, who: str = "alice", **kwargs) -> CoordApp:
    kwargs.setdefault("backoff", (0.1, 0.5))
    return CoordApp(Profile("test", server.url, TOKENS[who]), **kwargs)


def pane_by_id(app: CoordApp, pane_id: str) -> Pane:
    """A pane by its id in the one pane list (panes/catalog.py); the app itself reaches panes by typed property."""
    return app.pane_of(next(spec.cls for spec in PANES if spec.id == pane_id))


async def wait_for(pilot, predicate, timeout: float = 10.0, what: str | Callable[[], str] = "condition") -> None:
    """Poll `predicate` until it holds; `what` names it in the failure (a callable is asked then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


async def wait_idle(pilot, app: CoordApp) -> None:
    """All pane loads finished and events flushed."""
    await wait_for(pilot, lambda: not any(p.busy for p in app.panes()) and not app._pending, what="idle")
    await pilot.pause(0.1)


def table_text(app, selector: str) -> str:
    """Every cell of a DataTable as plain text, rows separated by newlines."""
    table = app.query_one(selector)
    lines = []
    for row_key in table.rows:
        lines.append(" | ".join(str(getattr(cell, "plain", cell)) for cell in table.get_row(row_key)))
    return "\n".join(lines)


async def select_message(pilot, app, message_id: int) -> None:
    """Inbox in view with the message `message_id` highlighted."""
    await pilot.press("2")
    await wait_for(pilot, lambda: str(message_id) in row_keys(app, "#inbox-table"), what="listed")
    await wait_idle(pilot, app)
    select_row(app, "#inbox-table", str(message_id))


def select_row(app, selector: str, key: str) -> None:
    """Puts the cursor of a DataTable on the row with `key` (what the arrow keys would do)."""
    table = app.query_one(selector)
    table.focus()
    table.move_cursor(row=table.get_row_index(key))


def row_keys(app, selector: str) -> list[str]:
    return [row_key.value for row_key in app.query_one(selector).rows]


async def fill_form(pilot, **values) -> None:
    """Fills the open FormScreen's fields (typing into inputs) and submits with ctrl+s."""
    screen = pilot.app.screen
    for name, value in values.items():
        widget = screen.query_one(f"#field-{name}")
        if isinstance(value, bool):
            widget.value = value
            continue
        widget.focus()
        if hasattr(widget, "clear"):
            widget.clear()
        if value:
            await pilot.press(*value)
    await pilot.press("ctrl+s")
    await pilot.pause(0.1)


async def open_notebook_page(pilot, app: CoordApp, page_id: str):
    """Opens a page the way a person does (pane 7, select it, enter) and returns the editor widget."""
    await pilot.press("7")
    await wait_for(pilot, lambda: page_id in row_keys(app, "#notebook-pages"), what="page list")
    select_row(app, "#notebook-pages", page_id)
    await pilot.press("enter")
    return app.query_one("#notebook-editor")


class TerminalRecorder(HeadlessDriver):
    """The test driver, except that the app renders to it as to a terminal: `written` holds every string the
    app wrote (screen updates, bells, OSC notifications), as a real terminal would have received them."""

    written: list[str] = []

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        type(self).written.append(data)


@contextmanager
def recorded_terminal(monkeypatch):
    """Within it, `run_test()` apps write to a TerminalRecorder; yields the list of what they wrote."""
    written: list[str] = []
    monkeypatch.setattr(TerminalRecorder, "written", written)
    monkeypatch.setattr(headless_driver, "HeadlessDriver", TerminalRecorder)
    yield written


def screen_lines(app) -> list[str]:
    """The screen as the terminal shows it now, one string per row (what is cut off is not there)."""
    update = app.screen._compositor.render_full_update()
    return ["".join(strip.text for strip in line) for line in update.strips]


def screen_links(app) -> dict[str, str]:
    """The terminal hyperlinks (OSC 8) on screen now: each address with the text it is on."""
    update = app.screen._compositor.render_full_update()
    links: dict[str, str] = {}
    for line in update.strips:
        for segment in (segment for strip in line for segment in strip):
            if segment.style is not None and segment.style.link:
                links[segment.style.link] = links.get(segment.style.link, "") + segment.text
    return links
