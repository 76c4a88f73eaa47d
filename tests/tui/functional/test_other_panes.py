"""Presence, doctor, directory, buzz and notebook panes against the real server."""
from __future__ import annotations

import asyncio

from textual.widgets import Tree

from coordtui.panes.collab import CollabTextArea
from coordtui.panes.doctor import DoctorPane
from coordtui.screens.form import FormScreen
from coordtui.screens.confirm import ConfirmScreen
from coordtui.tables import cursor_key
from tests.conftest import TOKENS, client
from tests.tui.helpers import (fill_form, make_app, open_notebook_page, pane_by_id, row_keys, select_row, table_text,
                               wait_for, wait_idle)


async def test_presence_online_first_and_live(make_server):
    server = make_server()
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await wait_for(pilot, lambda: "carol" in row_keys(app, "#presence-table"), what="presence rows")

        def online_flags():
            return [("●" in line) for line in table_text(app, "#presence-table").splitlines()]

        def row(name):
            return next(line for line in table_text(app, "#presence-table").splitlines() if f"| {name} |" in line)
        assert online_flags() == sorted(online_flags(), reverse=True), "online first"
        assert "●" in row("alice") and "○" in row("carol") and "never" in row("carol")
        with client(server, "carol") as carol:  # carol comes online: the pane updates without a key
            carol.get("/api/users").raise_for_status()
        with client(server, "bob") as bob:
            bob.post("/api/mailboxes/carol/messages", json={"title": "count me"}).raise_for_status()
        await wait_for(pilot, lambda: "●" in row("carol") and "| 1 |" in row("carol"), what="carol online")
        assert online_flags() == sorted(online_flags(), reverse=True)


async def test_doctor_admin_and_ordinary(server):
    DoctorPane.refresh_seconds = 0.3
    try:
        app = make_app(server, "admin")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("6")
            pane = pane_by_id(app, "doctor")
            await wait_for(pilot, lambda: pane.report is not None, what="admin report")
            ids = {p.id for p in pane.report.probes}
            assert {"database", "events", "loop"} <= ids
            assert "admin doctor" in str(app.query_one("#doctor-summary").render())
            loads = pane.loads
            await wait_for(pilot, lambda: pane.loads >= loads + 2, what="live refresh")
            tree = app.query_one("#doctor-tree", Tree)
            tree.focus()
            database = next(n for n in tree.root.children if n.data == "database")
            tree.move_cursor(database)
            await pilot.press("space")
            await wait_for(pilot, lambda: next(n for n in tree.root.children if n.data == "database").is_expanded,
                           what="expanded")
            await pilot.pause(0.5)  # survives a refresh
            assert next(n for n in tree.root.children if n.data == "database").is_expanded
        app = make_app(server, "bob")
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("6")
            pane = pane_by_id(app, "doctor")
            await wait_for(pilot, lambda: pane.report is not None, what="ordinary report")
            assert "auth" in {p.id for p in pane.report.probes} and "database" not in {p.id for p in pane.report.probes}
            assert "admin" not in str(app.query_one("#doctor-summary").render())
    finally:
        DoctorPane.refresh_seconds = 5.0


async def test_directory_add_search_delete(server):
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("8")
        await wait_idle(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="add form")
        await fill_form(pilot, title="Handbuch", url="https://docs.example.com/h", description="Übersicht")
        with client(server, "alice") as alice:
            entries = lambda: alice.get("/api/directory").json()
            await wait_for(pilot, lambda: any(e["title"] == "Handbuch" for e in entries()), what="added")
            entry = next(e for e in entries() if e["title"] == "Handbuch")
            await wait_for(pilot, lambda: str(entry["id"]) in row_keys(app, "#directory-table"), what="listed")
            await wait_idle(pilot, app)
            app.query_one("#directory-table").focus()
            await pilot.press("slash", *"nothing-matches", "enter")
            await wait_for(pilot, lambda: row_keys(app, "#directory-table") == [], what="search")
            await pilot.press("slash", "escape")  # escape clears the search
            await wait_for(pilot, lambda: str(entry["id"]) in row_keys(app, "#directory-table"), what="cleared")
            await wait_idle(pilot, app)
            select_row(app, "#directory-table", str(entry["id"]))
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="delete asks first")
            await pilot.press("n")  # cancelled: still there
            await wait_idle(pilot, app)
            assert any(e["id"] == entry["id"] for e in entries())
            select_row(app, "#directory-table", str(entry["id"]))
            await pilot.press("d")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asks again")
            await pilot.press("y")
            await wait_for(pilot, lambda: not any(e["id"] == entry["id"] for e in entries()), what="deleted")


async def test_directory_edit_in_the_add_form_filled_in_and_a_refusal_shown(server):
    """Issue 24: `e` edits the selected link in the add form's fields, filled in; ctrl+s saves and the row shows
    it. A link the caller may not edit (another's, not an admin) gets the server's refusal in the form, and
    nothing changes."""
    with client(server, "alice") as alice, client(server, "bob") as bob:
        mine = alice.post("/api/directory", json={"title": "Grafana", "url": "https://grafana.example/d/1",
                                                  "description": "payments board"}).json()
        theirs = bob.post("/api/directory", json={"title": "Bob's wiki", "url": "https://wiki.example"}).json()
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("8")
        await wait_for(pilot, lambda: {str(mine["id"]), str(theirs["id"])} <= set(row_keys(app, "#directory-table")),
                       what="listed")
        await wait_idle(pilot, app)
        select_row(app, "#directory-table", str(mine["id"]))
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="edit form")
        form = app.screen
        assert {name: form.query_one(f"#field-{name}").value for name in ("title", "url", "description")} == {
            "title": "Grafana", "url": "https://grafana.example/d/1", "description": "payments board"}
        assert app.focused is form.query_one("#field-title")
        await fill_form(pilot, title="Grafana payments", description="")
        with client(server, "alice") as alice:
            edited = lambda: next(e for e in alice.get("/api/directory").json() if e["id"] == mine["id"])  # noqa: E731
            await wait_for(pilot, lambda: edited()["title"] == "Grafana payments", what="saved")
            assert edited() == {**mine, "title": "Grafana payments", "description": None}
        await wait_for(pilot, lambda: not isinstance(app.screen, FormScreen), what="form closed")
        await wait_for(pilot, lambda: "Grafana payments" in table_text(app, "#directory-table"), what="row updated")
        assert cursor_key(app.query_one("#directory-table")) == str(mine["id"])  # still on the link edited

        select_row(app, "#directory-table", str(theirs["id"]))
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="edit form for bob's link")
        await fill_form(pilot, title="Alice's now")
        await wait_for(pilot, lambda: "Only the creator or an admin may edit this entry"
                       in str(app.screen.query_one("#form-error").render()), what="the server's refusal")
        # what to do about it: retyping cannot (a refusal that can be fixed says "Fix it and press ctrl+s again")
        assert "Nothing typed here changes that: esc closes." in str(app.screen.query_one("#form-error").render())
        assert isinstance(app.screen, FormScreen)  # still open, with what was typed
        assert app.screen.query_one("#field-title").value == "Alice's now"
        with client(server, "bob") as bob:
            assert next(e for e in bob.get("/api/directory").json() if e["id"] == theirs["id"]) == theirs
        await pilot.press("escape")


async def test_buzz_events_live(server):
    with client(server, "alice") as alice:
        hook = alice.post("/api/broadcast/webhooks", json={"appName": "deploys", "title": "Deploys",
                                                           "forUsers": "carol", "notifyAgent": "carol"}).json()
    app = make_app(server, "carol")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("9")
        await wait_idle(pilot, app)
        with client(server) as anonymous:
            anonymous.post(f"/api/ingest/deploys/{hook['token']}", json={"title": "Shipped v2", "body": "all green"})
        await wait_for(pilot, lambda: "Shipped v2" in table_text(app, "#buzz-table"), what="live buzz alert")
        assert "deploys" in table_text(app, "#buzz-table")
        app.query_one("#buzz-table").focus()
        await pilot.press("enter")  # the alert with its events: the body is there
        await wait_for(pilot, lambda: app.screen.query("#alert-events")
                       and "all green" in table_text(app.screen, "#alert-events"), what="the event's body")


async def test_notebook_collaborative_editing(server):
    from coordtui.client.notebook import NotebookSession
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Runbook", "content": "Grüße\n"}).json()["page"]
    app = make_app(server, "bob")
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await open_notebook_page(pilot, app, page["id"])
        await wait_for(pilot, lambda: editor.shared is not None and editor.text == "Grüße\n", what="synced")
        assert not editor.read_only
        editor.move_cursor((0, 5))

        other = await NotebookSession(server.url, TOKENS["alice"], page["id"]).connect()
        try:
            await wait_for(pilot, lambda: "alice" in str(app.query_one("#notebook-status").render()), what="viewers")
            other.insert(0, "🎉 ")  # a remote edit before bob's cursor
            await wait_for(pilot, lambda: editor.text == "🎉 Grüße\n", what="remote edit")
            assert editor.cursor_location == (0, 7), "the cursor stays after Grüße"
            await pilot.press(*" à tous")
            await other.wait_for(lambda s: s.value == "🎉 Grüße à tous\n", timeout=10)

            await asyncio.sleep(0.5)  # past the undo capture window
            other.insert(len(other.value), "PS")
            await wait_for(pilot, lambda: editor.text == "🎉 Grüße à tous\nPS", what="second remote edit")
            # ctrl+z undoes bob's typing only, and the peer sees it. Keys more than the undo manager's capture
            # window apart (400 ms: a slow typist, or a loaded machine) are separate steps, so it may take more
            # than one; no step may touch alice's edits.
            undone = 0
            for undone in range(1, len(" à tous") + 1):
                await pilot.press("ctrl+z")
                await pilot.pause(0.1)
                assert editor.text.startswith("🎉 Grüße") and editor.text.endswith("\nPS"), editor.text
                if editor.text == "🎉 Grüße\nPS":
                    break
            await wait_for(pilot, lambda: editor.text == "🎉 Grüße\nPS", what="own edit undone")
            await other.wait_for(lambda s: s.value == "🎉 Grüße\nPS", timeout=10)
            await pilot.press(*["ctrl+y"] * undone)  # redo, step for step
            await other.wait_for(lambda s: s.value == "🎉 Grüße à tous\nPS", timeout=10)

            with client(server, "alice") as alice:  # the owner locks it: bob becomes read-only
                alice.patch(f"/api/notebook/{page['id']}", json={"locked": True}).raise_for_status()
            await wait_for(pilot, lambda: editor.read_only, what="read-only")
            assert "read-only" in str(app.query_one("#notebook-status").render())
            await pilot.press("x")
            await asyncio.sleep(0.3)
            assert other.value == "🎉 Grüße à tous\nPS"
        finally:
            await other.close()


async def test_notebook_new_page_and_lock_keys(server):
    app = make_app(server, "carol")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await wait_idle(pilot, app)
        app.query_one("#notebook-pages").focus()
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="new page form")
        await fill_form(pilot, title="Carnet de bord", tags="ops, été")
        pane = app.notebook_pane
        editor = app.query_one("#notebook-editor", CollabTextArea)
        await wait_for(pilot, lambda: pane.page_session is not None and editor.shared is not None, what="opened")
        with client(server, "carol") as carol:
            page = carol.get(f"/api/notebook/{pane.page_id}").json()["page"]
            assert page["title"] == "Carnet de bord" and page["tags"] == ["ops", "été"]
            await pilot.press(*"Notizen für heute")
            await wait_for(pilot, lambda: carol.get(f"/api/notebook/{pane.page_id}").json()["page"]["content"]
                           == "Notizen für heute", what="typing saved (live document)")
            await wait_for(pilot, lambda: pane.page_id in pane.pages, what="listed")
            app.query_one("#notebook-pages").focus()
            await pilot.press("ctrl+l")
            await wait_for(pilot, lambda: carol.get(f"/api/notebook/{pane.page_id}").json()["page"]["locked"],
                           what="locked by key")
            assert not editor.read_only, "the owner keeps editing a locked page"



async def test_tab_in_the_notebook_editor_indents(server):
    """Tab used to move focus out of the editor, and the next digit typed switched panes."""
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Tabs", "content": "x"}).json()["page"]
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await open_notebook_page(pilot, app, page["id"])
        await wait_for(pilot, lambda: editor.shared is not None and editor.has_focus, what="editing")
        editor.move_cursor((0, 0))
        await pilot.press("tab", "1", "2")
        assert app.active_pane.id == "notebook" and editor.has_focus
        assert editor.text in ("    12x", "\t12x"), editor.text


async def test_back_on_notes_with_a_page_open_the_editor_has_focus(server):
    with client(server, "alice") as alice:
        page = alice.post("/api/notebook", json={"title": "Focus", "content": "x"}).json()["page"]
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        editor = await open_notebook_page(pilot, app, page["id"])
        await wait_for(pilot, lambda: editor.shared is not None and editor.has_focus, what="editing")
        await pilot.press("alt+2")
        await wait_for(pilot, lambda: app.active_pane.id == "inbox", what="inbox")
        await pilot.press("alt+7")
        await wait_for(pilot, lambda: app.active_pane.id == "notebook", what="notes again")
        await pilot.pause(0.1)
        assert editor.has_focus, f"focus on {app.focused}"
        editor.move_cursor((0, 1))
        await pilot.press("!")
        assert editor.text == "x!"
