"""Issue 24: every list in the app moves one way: j/k and the arrows, Home/End to the first/last row,
PageUp/PageDown; `/` filters. The Tokens list ignored j/k (and `x` then acted on another row)."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Tree

from coordtui.ops.admin import TokensScreen
from coordtui.ops.commands import OPENERS
from coordtui.ops.base import OpsScreen
from coordtui.panes.catalog import PANES
from coordtui.ops.commands import open_ops
from tests.tui.functional.test_typed_ahead import issue_token, tokens
from tests.tui.helpers import make_app, pane_by_id, row_keys, wait_for, wait_idle

PAD = 30  # more rows than a page at 120x35


def position(widget) -> int:
    return widget.cursor_row if isinstance(widget, DataTable) else widget.cursor_line


def pad(widget) -> None:
    """Rows enough to move through: the keys are what is tested, whatever the list holds."""
    if isinstance(widget, DataTable):
        for n in range(PAD):
            widget.add_row(*[Text(f"pad {n}") for _ in widget.columns], key=f"pad-{n}")
    else:
        widget.root.expand()
        for n in range(PAD):
            widget.root.add_leaf(f"pad {n}")


async def moves_like_a_list(pilot, widget, where: str) -> None:
    pad(widget)
    widget.focus()
    await pilot.pause(0.1)
    last = widget.row_count - 1 if isinstance(widget, DataTable) else widget.last_line
    steps = [("home", lambda p: p == 0), ("j", lambda p: p == 1), ("down", lambda p: p == 2), ("k", lambda p: p == 1),
             ("up", lambda p: p == 0), ("end", lambda p: p == last), ("home", lambda p: p == 0),
             ("pagedown", lambda p: p > 1), ("pageup", lambda p: p == 0)]
    for key, expected in steps:
        await pilot.press(key)
        await pilot.pause(0.05)
        assert expected(position(widget)), f"{where}: {key} left the cursor at {position(widget)} (last {last})"


def lists_in(node) -> list:
    return [w for w in node.query("DataTable, Tree")  # those in view: a hidden container hides its lists too
            if all(getattr(n, "display", True) for n in w.ancestors_with_self)]


async def test_every_list_moves_with_j_k_home_end_and_pages(server, monkeypatch):
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.session.identity, what="connected")
        checked = []
        for spec in PANES:
            pane_id = spec.id
            app.action_pane(pane_id)
            await wait_for(pilot, lambda: pane_by_id(app, pane_id).loads >= 1, what=f"{pane_id} loaded")
            await wait_idle(pilot, app)
            # the padding stays: no reload (Doctor ticks) and no redraw of what was read (Who's words every 15 s)
            monkeypatch.setattr(pane_by_id(app, pane_id), "request_reload", lambda: None)
            monkeypatch.setattr(pane_by_id(app, pane_id), "show", lambda _data: None)
            for widget in lists_in(pane_by_id(app, pane_id)):
                await moves_like_a_list(pilot, widget, f"{pane_id} #{widget.id}")
                checked.append(widget.id)
        for name, opener in OPENERS.items():
            opener(app.ops)
            await pilot.pause(0.1)
            if not isinstance(app.screen, OpsScreen):  # a form, not a list
                await pilot.press("escape")
                continue
            screen = app.screen
            # CI once timed out here with no clue: say what the screen shows and what its load is doing
            await wait_for(pilot, lambda: screen.loads >= 1, what=lambda: (
                f"{name} loaded: screen {app.screen!r}, summary {screen.query_one('#ops-summary').render()!s}, "
                f"workers {[(w.name, w.state.name, w.error) for w in app.workers if w.node is screen]}"))
            for widget in lists_in(screen):
                await moves_like_a_list(pilot, widget, f"{name} #{widget.id}")
                checked.append(f"{name}:{widget.id}")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is not screen, what=f"{name} closed")
        assert {"wake-table", "inbox-table", "chat-channels", "doctor-tree", "notebook-pages", "directory-table",
                "buzz-table", "presence-table", "tokens:ops-table", "users:ops-table"} <= set(checked), checked


async def test_tokens_x_revokes_the_row_j_reached_and_slash_filters(server):
    first, second = issue_token(server, "listbot1"), issue_token(server, "listbot2")
    issue_token(server, "otherbot")
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.session.identity, what="connected")
        open_ops(app.ops, "tokens")
        await wait_for(pilot, lambda: isinstance(app.screen, TokensScreen) and app.screen.loads >= 1, what="tokens")
        screen = app.screen
        await pilot.press("slash", *"listbot", "enter")
        await wait_for(pilot, lambda: sorted(row_keys(screen, "#ops-table")) == sorted([str(first["id"]),
                                                                                         str(second["id"])]),
                       what=lambda: f"filtered rows, got {row_keys(screen, '#ops-table')}")
        top, reached = [int(key) for key in row_keys(screen, "#ops-table")]
        await pilot.press("home", "j", "x")
        await wait_for(pilot, lambda: app.screen is not screen, what="the confirmation")
        await pilot.press("enter")
        await wait_for(pilot, lambda: next(t for t in tokens(server) if t["id"] == reached).get("revokedAt"),
                       what="the highlighted token revoked")
        assert not next(t for t in tokens(server) if t["id"] == top).get("revokedAt")
        await wait_for(pilot, lambda: app.screen is screen, what="back on the list")
        await pilot.press("escape")  # clears the filter, stays
        await wait_for(pilot, lambda: len(row_keys(screen, "#ops-table")) > 2, what="filter cleared")
        assert app.screen is screen
