"""Inbox and chat panes against the real server."""
from __future__ import annotations

import asyncio

from coordtui.screens.form import FormScreen
from tests.conftest import client
from tests.tui.helpers import fill_form, make_app, row_keys, select_row, table_text, wait_for, wait_idle


def inbox_of(server, who):
    with client(server, who) as api:
        return api.get("/api/mailboxes/me/messages", params={"limit": 100}).json()["messages"]


async def test_inbox_lists_unread_first_threads_and_acts(server):
    with client(server, "alice") as alice:
        old = alice.post("/api/mailboxes/bob/messages", json={"title": "Old news", "body": "read me"}).json()
        new = alice.post("/api/mailboxes/bob/messages", json={"title": "Fresh", "body": "the body"}).json()
    with client(server, "bob") as bob:
        bob.post(f"/api/mailboxes/me/messages/{old['id']}/ack").raise_for_status()
    app = make_app(server, "bob")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: str(new["id"]) in row_keys(app, "#inbox-table"), what="inbox rows")
        keys = row_keys(app, "#inbox-table")
        assert keys.index(str(new["id"])) < keys.index(str(old["id"])), "unread first"

        with client(server, "carol") as carol:  # live: no refresh key
            live = carol.post("/api/mailboxes/bob/messages", json={"title": "Live one", "urgent": True}).json()
        await wait_for(pilot, lambda: str(live["id"]) in row_keys(app, "#inbox-table"), what="live message")
        assert row_keys(app, "#inbox-table")[0] == str(live["id"]), "urgent unread on top"

        await wait_idle(pilot, app)
        select_row(app, "#inbox-table", str(new["id"]))
        await pilot.pause(0.1)
        assert "the body" in str(app.query_one("#inbox-thread-text").render())
        await pilot.press("a")
        await wait_for(pilot, lambda: next(m for m in inbox_of(server, "bob") if m["id"] == new["id"])["status"]
                       == "read", what="ack")
        await wait_idle(pilot, app)
        select_row(app, "#inbox-table", str(new["id"]))
        await pilot.press("p")
        await wait_for(pilot, lambda: next(m for m in inbox_of(server, "bob") if m["id"] == new["id"])[
            "responseWaiting"], what="pending on")
        await wait_idle(pilot, app)
        select_row(app, "#inbox-table", str(new["id"]))
        await pilot.press("p")
        await wait_for(pilot, lambda: not next(m for m in inbox_of(server, "bob") if m["id"] == new["id"])[
            "responseWaiting"], what="pending off")

        await wait_idle(pilot, app)
        select_row(app, "#inbox-table", str(new["id"]))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="reply form")
        await fill_form(pilot, body="Thanks")
        await wait_for(pilot, lambda: any(m["title"] == "Re: Fresh" for m in inbox_of(server, "alice")),
                       what="reply")
        # the reply joins the thread view (sent mail in the same thread)
        await wait_idle(pilot, app)
        select_row(app, "#inbox-table", str(new["id"]))
        await wait_for(pilot, lambda: "Thanks" in str(app.query_one("#inbox-thread-text").render()),
                       what="thread shows the reply")

        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="compose form")
        await fill_form(pilot, recipient="carol", title="Über alles", body="hallo", urgent=True)
        await wait_for(pilot, lambda: any(m["title"] == "Über alles" and m["urgent"] for m in inbox_of(server, "carol")),
                       what="composed")

        await wait_idle(pilot, app)
        app.query_one("#inbox-table").focus()
        await pilot.press("slash")
        await pilot.press(*"Fresh", "enter")
        await wait_for(pilot, lambda: row_keys(app, "#inbox-table") == [str(new["id"])], what="search result")
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(row_keys(app, "#inbox-table")) >= 3, what="search cleared")


async def test_chat_channels_messages_typing_and_send(server):
    with client(server, "alice") as alice:
        ops = alice.post("/api/chat/channels", json={"type": "group", "name": "ops", "members": ["bob"]}).json()
        dm = alice.post("/api/chat/channels", json={"type": "dm", "identity": "bob"}).json()
        alice.post(f"/api/chat/channels/{ops['channelId']}/messages", json={"body": "first in ops"})
        alice.post(f"/api/chat/channels/{dm['channelId']}/messages", json={"body": "psst"})
    app = make_app(server, "bob")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await wait_for(pilot, lambda: ops["channelId"] in row_keys(app, "#chat-channels"), what="channels")
        assert "#ops" in table_text(app, "#chat-channels") and "@alice" in table_text(app, "#chat-channels")
        await wait_idle(pilot, app)
        first_open = app.chat_pane.current
        other = dm["channelId"] if first_open == ops["channelId"] else ops["channelId"]
        assert app.chat_pane.channels[other].unread == 1
        await pilot.press("n")  # jump to the next unread channel
        await wait_for(pilot, lambda: app.chat_pane.current == other, what="jumped to unread")
        await wait_idle(pilot, app)
        with client(server, "bob") as bob:
            rows = bob.get("/api/chat/channels").json()["channels"]
        assert next(c for c in rows if c["id"] == other)["unread_count"] == 0, "opening marks read"

        with client(server, "alice") as alice:
            alice.post(f"/api/chat/channels/{other}/typing")
            await wait_for(pilot, lambda: "alice is typing" in str(app.query_one("#chat-typing").render()),
                           what="typing indicator")
            alice.post(f"/api/chat/channels/{other}/messages", json={"body": "live über chat"})
        await wait_for(pilot, lambda: "live über chat" in str(app.query_one("#chat-messages").render()),
                       what="live chat message")

        await pilot.press("i")
        await pilot.press(*"hello back", "enter")
        with client(server, "alice") as alice:
            def arrived():
                rows = alice.get(f"/api/chat/channels/{other}/messages").json()["messages"]
                return any(m["body"] == "hello back" and m["sender"] == "bob" for m in rows)
            await wait_for(pilot, arrived, what="sent chat message")
        await wait_for(pilot, lambda: "hello back" in str(app.query_one("#chat-messages").render()), what="echo")


async def test_each_chat_channel_keeps_its_own_draft(make_server, sqlite_url):
    """Text typed for one channel used to stay in the box when another was opened (and enter sent it there);
    a message refused after its channel was left was dropped."""
    server = make_server(database_url=sqlite_url)
    with client(server, "alice") as alice:
        first = alice.post("/api/chat/channels", json={"type": "dm", "identity": "bob"}).json()["channelId"]
        second = alice.post("/api/chat/channels", json={"type": "dm", "identity": "carol"}).json()["channelId"]
    app = make_app(server, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await wait_for(pilot, lambda: {first, second} <= set(row_keys(app, "#chat-channels")), what="channels")
        await wait_idle(pilot, app)
        chat = app.chat_pane
        box = app.query_one("#chat-input")

        async def open_channel(channel_id):
            select_row(app, "#chat-channels", channel_id)
            await pilot.press("enter")
            await wait_for(pilot, lambda: chat.current == channel_id and box.has_focus, what=f"open {channel_id}")

        await open_channel(first)
        await pilot.press(*"für bob")
        await open_channel(second)
        assert box.value == "", "bob's draft is not carol's message"
        await pilot.press(*"for carol")
        await open_channel(first)
        assert box.value == "für bob"
        await open_channel(second)
        assert box.value == "for carol"

        # a send that fails after its channel was left: the text waits in that channel's draft
        gate = asyncio.Event()
        post_chat = app.session.client.post_chat

        async def slow_post_chat(channel_id, body):
            await gate.wait()
            return await post_chat(channel_id, body)
        app.session.client.post_chat = slow_post_chat
        await pilot.press("enter")
        await open_channel(first)
        server.stop()
        gate.set()
        await wait_for(pilot, lambda: chat.drafts.get(second) == "for carol", what="refused text kept")
        await open_channel(second)
        assert box.value == "for carol"
