"""Triage keys against the real server: `/` filters in every listed pane, j/k, n/N, mark all read with a
confirmation, $EDITOR in forms, open-marks-read, the sent view, keys.toml, focus rules, ]/[ along the
state table, confirmations and undo."""
from __future__ import annotations

import sys
import textwrap

from textual.widgets import DataTable, Input, TextArea

from coordtui.screens.confirm import ConfirmScreen
from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import fill_form, make_app, open_notebook_page, row_keys, select_row, wait_for, wait_idle


def post(server, who, path, **body):
    with client(server, who) as api:
        response = api.post(path, json=body)
        response.raise_for_status()
        return response.json()


def unread_ids(server, who) -> list[int]:
    with client(server, who) as api:
        return [m["id"] for m in api.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["messages"]]


def task_status(server, task_id) -> str:
    with client(server, "alice") as api:
        rows = api.get("/api/swarm/tasks", params={"includeCompleted": "true"}).json()["tasks"]
    return next(t for t in rows if t["id"] == task_id)["status"]


async def ready(pilot, app, who):
    await wait_for(pilot, lambda: app.session.identity == who and app.conn_state == "connected", what="connected")
    await wait_idle(pilot, app)


async def filter_rows(pilot, app, pane_key: str, table: str, text: str, keep: str, drop: str) -> None:
    """Types `/text` in the pane and checks the list narrows to `keep`; escape brings `drop` back."""
    await pilot.press(pane_key)
    await wait_for(pilot, lambda: keep in row_keys(app, table) and drop in row_keys(app, table), what=f"{table} rows")
    await wait_idle(pilot, app)
    app.query_one(table).focus()
    await pilot.press("slash", *text[:-1])
    if not app.active_pane.SERVER_FILTER:  # narrows while typing
        await wait_for(pilot, lambda: drop not in row_keys(app, table), what=f"{table} narrowed while typing")
    await pilot.press(text[-1], "enter")
    await wait_for(pilot, lambda: keep in row_keys(app, table) and drop not in row_keys(app, table),
                   what=f"{table} filtered")
    await pilot.press("escape")
    await wait_for(pilot, lambda: drop in row_keys(app, table), what=f"{table} filter cleared")
    assert isinstance(app.focused, DataTable), "escape hands the keys back to the list"


async def open_inbox_with(pilot, app, message: dict) -> None:
    """Switch to Inbox and wait until `message` is listed and every load has finished."""
    await pilot.press("2")
    await wait_for(pilot, lambda: str(message["id"]) in row_keys(app, "#inbox-table"), what="inbox")
    await wait_idle(pilot, app)


async def test_slash_filters_every_list(server):
    hook = post(server, "alice", "/api/broadcast/webhooks", appName="ci", title="CI", forUsers="bob")
    with client(server) as anonymous:
        for title in ("Deploy green", "Nightly red"):
            anonymous.post(f"/api/ingest/ci/{hook['token']}", json={"title": title})
    with client(server, "bob") as bob:
        events = bob.get("/api/broadcast/events").json()["events"]
    green = str(next(e["id"] for e in events if e["title"] == "Deploy green"))
    red = str(next(e["id"] for e in events if e["title"] == "Nightly red"))
    task_a = post(server, "alice", "/api/swarm/tasks", title="Rotate zebra keys", assigneeUserId="bob")
    task_b = post(server, "alice", "/api/swarm/tasks", title="Paint the shed", assigneeUserId="bob")
    ops = post(server, "alice", "/api/chat/channels", type="group", name="opsroom", members=["bob"])["channelId"]
    dm = post(server, "alice", "/api/chat/channels", type="dm", identity="bob")["channelId"]
    page_a = post(server, "bob", "/api/notebook", title="Runbook zebra", content="x")["page"]["id"]
    page_b = post(server, "bob", "/api/notebook", title="Shopping list", content="y")["page"]["id"]
    link_a = post(server, "bob", "/api/directory", title="Zebra docs", url="https://zebra.example")
    link_b = post(server, "bob", "/api/directory", title="Grafana", url="https://grafana.example")
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "bob")
        await filter_rows(pilot, app, "1", "#wake-table", "zebra", f"swarm:{task_a['id']}", f"swarm:{task_b['id']}")
        await filter_rows(pilot, app, "3", "#chat-channels", "opsroom", ops, dm)
        await filter_rows(pilot, app, "4", "#col-ready", "zebra", task_a["id"], task_b["id"])
        await filter_rows(pilot, app, "7", "#notebook-pages", "zebra", page_a, page_b)
        await filter_rows(pilot, app, "8", "#directory-table", "zebra", str(link_a["id"]), str(link_b["id"]))
        await filter_rows(pilot, app, "9", "#buzz-table", "green", green, red)


async def test_jk_next_unread_mark_all_read_and_sent_view(server):
    read = post(server, "alice", "/api/mailboxes/carol/messages", title="Old and read")
    post(server, "carol", f"/api/mailboxes/me/messages/{read['id']}/ack")
    unread = [post(server, "bob", "/api/mailboxes/carol/messages", title=f"Unread {i}")["id"] for i in range(3)]
    post(server, "carol", "/api/mailboxes/alice/messages", title="Sent by carol")
    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "carol")
        await open_inbox_with(pilot, app, read)
        table = app.query_one("#inbox-table", DataTable)
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        select_row(app, "#inbox-table", str(read["id"]))  # the read one is last
        await pilot.press("n")  # wraps to the first unread
        assert app.inbox_pane.selected().id == unread[0]
        await pilot.press("n")
        assert app.inbox_pane.selected().id == unread[1]
        await pilot.press("N", "N")
        assert app.inbox_pane.selected().id == unread[2], "N goes back, wrapping to the last unread"

        await pilot.press("s")  # sent mail
        await wait_for(pilot, lambda: "Sent by carol" in str(app.query_one("#inbox-thread-text").render())
                       or "sent:" in str(app.query_one("#inbox-summary").render()), what="sent view")
        assert "sent: 1 shown" in str(app.query_one("#inbox-summary").render())
        await pilot.press("s")

        await pilot.press("A")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asks first")
        assert "Mark all 3 unread messages read?" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        await wait_idle(pilot, app)
        assert sorted(unread_ids(server, "carol")) == sorted(unread)
        await pilot.press("A")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="asks again")
        await pilot.press("y")
        await wait_for(pilot, lambda: unread_ids(server, "carol") == [], what="all read")
        await wait_for(pilot, lambda: app.session.counts.mail == 0, what="badge cleared")


EDITOR_SCRIPT = textwrap.dedent('''\
    import sys
    path = sys.argv[1]
    text = open(path, encoding="utf-8").read()
    open(path, "w", encoding="utf-8").write(text + "written in the editor\\nsecond line\\n")
''')


async def test_editor_compose_open_marks_read_and_keys_toml(server, tmp_path, monkeypatch, isolated_config):
    script = tmp_path / "fake_editor.py"
    script.write_text(EDITOR_SCRIPT)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)
    isolated_config.mkdir(parents=True, exist_ok=True)
    (isolated_config / "keys.toml").write_text('[keys]\n"inbox.compose" = "w"\n"app.pane.chat" = "3,f3"\n'
                                               '"no.such.binding" = "z"\n')
    first = post(server, "alice", "/api/mailboxes/bob/messages", title="Open me")
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "bob")
        assert any("no.such.binding" in str(n.message) for n in app._notifications), "a typo is reported"
        await pilot.press("f3")
        assert app.active_pane.id == "chat", "keys.toml added f3"
        await open_inbox_with(pilot, app, first)
        select_row(app, "#inbox-table", str(first["id"]))
        await pilot.press("enter")  # opening marks it read (the default)
        await wait_for(pilot, lambda: first["id"] not in unread_ids(server, "bob"), what="read on open")

        await pilot.press("c")  # no longer compose: keys.toml moved it to w
        await pilot.pause(0.2)
        assert not isinstance(app.screen, FormScreen)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="compose on w")
        form = app.screen
        form.query_one("#field-recipient").value = "alice"
        form.query_one("#field-title").value = "From the editor"
        form.query_one("#field-body", TextArea).focus()
        await pilot.press(*"Hello ")
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: "second line" in form.query_one("#field-body", TextArea).text, what="edited")
        assert form.query_one("#field-body", TextArea).text == "Hello written in the editor\nsecond line"
        await pilot.press("ctrl+s")
        with client(server, "alice") as alice:
            def arrived():
                rows = alice.get("/api/mailboxes/me/messages").json()["messages"]
                return any(m["title"] == "From the editor" and m["body"] == "Hello written in the editor\nsecond line"
                           for m in rows)
            await wait_for(pilot, arrived, what="sent with the edited body")


async def test_open_does_not_mark_read_when_configured(server, isolated_config):
    isolated_config.mkdir(parents=True, exist_ok=True)
    (isolated_config / "keys.toml").write_text("[options]\nopen_marks_read = false\n")
    message = post(server, "alice", "/api/mailboxes/carol/messages", title="Leave me unread")
    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "carol")
        await open_inbox_with(pilot, app, message)
        select_row(app, "#inbox-table", str(message["id"]))
        await pilot.press("enter")
        await wait_idle(pilot, app)
        await pilot.pause(0.3)
        assert message["id"] in unread_ids(server, "carol")


async def test_focus_rules_moves_along_the_state_table_confirm_and_undo(server):
    task = post(server, "alice", "/api/swarm/tasks", title="Ship it", assigneeUserId="alice", status="in_progress")
    ops = post(server, "bob", "/api/chat/channels", type="group", name="archive-me", members=["alice"])["channelId"]
    post(server, "bob", f"/api/chat/channels/{ops}/messages", body="hello")
    pending = post(server, "bob", "/api/mailboxes/alice/messages", title="Answer me")
    post(server, "alice", f"/api/mailboxes/me/messages/{pending['id']}/pending")
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, "alice")
        # pane switching from inside an input: alt+digit, or escape then the digit
        await pilot.press("3")
        await wait_for(pilot, lambda: ops in row_keys(app, "#chat-channels"), what="channels")
        await pilot.press("i")
        assert isinstance(app.focused, Input) and app.focused.id == "chat-input"
        await pilot.press("alt+4")
        await wait_for(pilot, lambda: app.active_pane.id == "swarm", what="alt+4 leaves the input for Swarm")
        await pilot.press("3", "i", "4")  # a digit typed in the message box is text...
        assert app.active_pane.id == "chat" and app.query_one("#chat-input", Input).value == "4"
        await pilot.press("escape", "4")  # ...escape first, then it switches
        assert app.active_pane.id == "swarm"

        # a DM opens with the cursor in the message box
        await pilot.press("3", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="DM form")
        await fill_form(pilot, identity="carol")
        await wait_for(pilot, lambda: isinstance(app.focused, Input) and app.focused.id == "chat-input",
                       what="cursor in the DM's message box")

        # edit starts on the title; ] and [ follow the path of the state table
        await pilot.press("escape", "4")
        await wait_for(pilot, lambda: task["id"] in row_keys(app, "#col-in_progress"), what="board")
        await wait_idle(pilot, app)
        select_row(app, "#col-in_progress", task["id"])
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="edit form")
        assert app.focused.id == "field-title"
        await pilot.press("escape", "d")  # d: the Complete and Closed columns into view
        for expected in ("review", "complete"):
            await wait_idle(pilot, app)
            await pilot.press("right_square_bracket")
            await wait_for(pilot, lambda: task_status(server, task["id"]) == expected, what=expected)
            await wait_for(pilot, lambda: task["id"] in row_keys(app, f"#col-{expected}"), what="column")
            select_row(app, f"#col-{expected}", task["id"])
        await wait_idle(pilot, app)
        await pilot.press("right_square_bracket")  # nothing after complete
        await wait_for(pilot, lambda: any("No step forward from complete" in str(n.message)
                                          for n in app._notifications), what="explained")
        await pilot.press("left_square_bracket")  # back: reopen
        await wait_for(pilot, lambda: task_status(server, task["id"]) == "ready", what="reopened")

        # archiving asks first and can be undone
        await pilot.press("3")
        await wait_idle(pilot, app)
        app.chat_pane.open_channel(ops)
        await wait_idle(pilot, app)
        app.query_one("#chat-channels").focus()
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="archive asks")
        await pilot.press("y")

        def archived():
            with client(server, "alice") as api:
                return ops in [c["id"] for c in api.get("/api/chat/channels", params={"archived": "true"}).json()[
                    "channels"]]
        await wait_for(pilot, archived, what="archived")
        await wait_idle(pilot, app)
        await pilot.press("u")
        await wait_for(pilot, lambda: not archived(), what="unarchived by undo")

        # clearing pending can be undone too
        await open_inbox_with(pilot, app, pending)
        select_row(app, "#inbox-table", str(pending["id"]))
        await pilot.press("p")

        def waiting():
            with client(server, "alice") as api:
                rows = api.get("/api/mailboxes/me/messages").json()["messages"]
            return next(m for m in rows if m["id"] == pending["id"])["responseWaiting"]
        await wait_for(pilot, lambda: not waiting(), what="pending cleared")
        await wait_idle(pilot, app)
        await pilot.press("u")
        await wait_for(pilot, waiting, what="pending set again by undo")


async def test_notebook_filter_leaves_the_open_page_alone(server):
    """Filtering the page list while a page is open for editing keeps the editor's session."""
    page = post(server, "alice", "/api/notebook", title="Filter keeps me", content="body")["page"]["id"]
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await ready(pilot, app, "alice")
        editor = await open_notebook_page(pilot, app, page)
        await wait_for(pilot, lambda: app.notebook_pane.page_id == page, what="page open")
        app.query_one("#notebook-pages").focus()
        await pilot.press("slash", *"nothing-like-it")
        await wait_for(pilot, lambda: row_keys(app, "#notebook-pages") == [], what="filtered out")
        assert app.notebook_pane.page_id == page and editor.text == "body"
