"""Who is where on a page, in coordtui against the real server: another editor's caret and selection are drawn
in their colour and named in the status line, mine reaches them as I move, ctrl+g follows them, and they
disappear when the editor leaves."""
from __future__ import annotations

from rich.color import Color

from coordtui.client.notebook import NotebookSession
from tests.conftest import TOKENS, client
from tests.tui.helpers import make_app, open_notebook_page, wait_for

TEXT = "line one\nline two\nline three\n"
RED = "#ff0000"


def cells_with_background(editor, row: int, colour: str) -> list[int]:
    """The x of every cell of the editor's screen row drawn on `colour`."""
    strip = editor.render_line(row)
    found, x = [], 0
    for segment in strip:
        style = segment.style
        if style is not None and style.bgcolor == Color.parse(colour):
            found.extend(range(x, x + len(segment.text)))
        x += len(segment.text)
    return found


async def test_another_editors_caret_is_drawn_named_and_followed(server):
    with client(server, "alice") as api:
        page_id = api.post("/api/notebook", json={"title": "Cursors", "content": TEXT}).json()["page"]["id"]
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        editor = await open_notebook_page(pilot, app, page_id)
        await wait_for(pilot, lambda: editor.text == TEXT and not editor.read_only, what="the page open")
        status = app.query_one("#notebook-status")

        bob = await NotebookSession(server.url, TOKENS["bob"], page_id).connect()
        try:
            bob.set_user("bob", RED)
            bob.set_cursor(14, 17)  # "two" selected on the second line, the caret after it
            await wait_for(pilot, lambda: "bob line 2" in str(status.render()), what=lambda: str(status.render()))
            gutter = editor.gutter_width
            await wait_for(pilot, lambda: cells_with_background(editor, 1, RED) == [gutter + 8],
                           what=lambda: f"bob's caret drawn: {cells_with_background(editor, 1, RED)}")

            editor.focus()
            await pilot.press("down", "down", "end")  # my caret at the end of line three
            mine = len("line one\nline two\nline three")
            await wait_for(pilot, lambda: any(c.name == "alice" and c.head == mine for c in bob.cursors.values()),
                           what=lambda: f"my caret reaches bob: {list(bob.cursors.values())}")

            await pilot.press("ctrl+g")
            await wait_for(pilot, lambda: "(following)" in str(status.render()), what="following bob")
            assert any("Following bob" in str(n.message) for n in app._notifications)
        finally:
            await bob.close()
        await wait_for(pilot, lambda: "bob" not in str(status.render()) and not editor.remote_cursors,
                       what="bob gone when he leaves")
        assert cells_with_background(editor, 1, RED) == []
