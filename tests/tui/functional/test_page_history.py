"""A page's history in coordtui against the real server: the versions listed, a coloured diff against the page
as the live editor has it, restore with a confirmation while another editor is live (both converge on the
restored text), and a checkpoint with a label."""
from __future__ import annotations

from textual.widgets import DataTable, Static

from coordtui.client.notebook import NotebookSession
from coordtui.screens.page_history import PageHistoryScreen, diff_lines
from tests.conftest import TOKENS, client
from tests.tui.helpers import make_app, open_notebook_page, wait_for, wait_idle

ORIGINAL = "step 1: page the DBA\nstep 2: fail over\n"


def versions(server, page_id: str) -> list[dict]:
    with client(server, "alice") as api:
        return api.get(f"/api/notebook/{page_id}/versions").json()["versions"]


def test_the_diff_marks_added_and_removed_lines():
    shown = diff_lines("a\nb\n", "a\nc\n", "version 1", "now")
    styles = {line.plain: [span.style for span in line.spans] for line in shown.split("\n")}
    assert styles["-b"] == ["red"] and styles["+c"] == ["green"]
    assert diff_lines("same\n", "same\n", "v", "now").plain == "No differences."


async def test_history_diff_restore_and_checkpoint_with_another_editor_live(server):
    with client(server, "alice") as api:
        page_id = api.post("/api/notebook", json={"title": "Failover runbook", "content": ORIGINAL}).json()["page"]["id"]
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        editor = await open_notebook_page(pilot, app, page_id)
        await wait_for(pilot, lambda: editor.text == ORIGINAL and not editor.read_only, what="the page open")
        bob = await NotebookSession(server.url, TOKENS["bob"], page_id).connect()
        try:
            bob.insert(len(bob.value), "step 3: BROKEN by bob\n")
            await wait_for(pilot, lambda: "BROKEN" in editor.text, what="bob's edit arrives")

            app.query_one("#notebook-pages", DataTable).focus()
            await pilot.press("h")
            await wait_for(pilot, lambda: isinstance(app.screen, PageHistoryScreen) and app.screen.loads,
                           what=lambda: f"the history: {app.screen} {app.focused} {[str(n.message) for n in app._notifications]}")
            screen = app.screen
            created = next(v for v in versions(server, page_id) if v["reason"] == "created")
            table = screen.query_one("#history-table", DataTable)
            table.move_cursor(row=table.get_row_index(str(created["id"])))
            diff = screen.query_one("#history-diff", Static)
            await wait_for(pilot, lambda: "+step 3: BROKEN by bob" in str(diff.render()),
                           what=lambda: str(diff.render()))

            await pilot.press("r")
            await wait_for(pilot, lambda: "Restore version" in str(app.screen.query_one("#confirm-question").render()),
                           what="the confirmation")
            await pilot.press("y")
            await wait_for(pilot, lambda: editor.text == ORIGINAL, what=lambda: f"restored in the editor: {editor.text!r}")
            await wait_for(pilot, lambda: bob.value == ORIGINAL, what="restored for the other editor")
            await wait_for(pilot, lambda: any(v["reason"] == "restore" for v in versions(server, page_id)),
                           what="the restore is a version")

            await wait_idle(pilot, app)
            await pilot.press("c", *"after the drill", "ctrl+s")
            await wait_for(pilot, lambda: any(v.get("label") == "after the drill" for v in versions(server, page_id)),
                           what="the checkpoint")
            await wait_for(pilot, lambda: any("after the drill" in str(row) for row in
                                              (table.get_row(key) for key in table.rows)), what="listed")
        finally:
            await bob.close()
