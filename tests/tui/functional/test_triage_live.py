"""Unread at a glance against the real server: badges, quiet toasts, --notify, chat read marking,
chat in wake (both the §18 source and the fallback for servers without it), "updated Xs ago", presence
states, and badges recovering when the server restarts under the app."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from textual.widgets import Input, TabbedContent

from coordtui.client.api import CoordClient
from coordtui.client.models import PresenceEntry, ServerEvent, Wake
from coordtui.live import osc_notification
from coordtui.panes.presence import presence_state
from tests.conftest import TOKENS, client
from tests.tui.helpers import make_app, pane_by_id, row_keys, select_row, table_text, wait_for, wait_idle


def label(app, pane_id: str) -> str:
    return app.query_one("#panes", TabbedContent).get_tab(f"tab-{pane_id}").label_text


def toasts(app) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


def sdk(server, who: str) -> CoordClient:
    return CoordClient(server.url, TOKENS[who])


def chat_unread(server, who: str, channel_id: str) -> int:
    with client(server, who) as api:
        rows = api.get("/api/chat/channels").json()["channels"]
    return next(c for c in rows if c["id"] == channel_id)["unread_count"]


async def connected(pilot, app, who: str) -> None:
    await wait_for(pilot, lambda: app.session.identity == who and app.conn_state == "connected", what="connected")
    await wait_idle(pilot, app)


async def test_badges_count_live_toast_quietly_and_notify_through_the_terminal(server):
    app = make_app(server, "carol", notify=True)
    async with app.run_test(size=(120, 35)) as pilot:
        written: list[str] = []
        original = app._driver.write
        app._driver.write = lambda data: (written.append(data), original(data))
        await connected(pilot, app, "carol")
        await pilot.press("4")  # reading the Swarm board: mail and chat arrive elsewhere
        await wait_for(pilot, lambda: app.session.counts.fetches >= 1 or app.session.counts.mail is not None, what="first counts")
        assert label(app, "inbox") == "2 Inbox"

        async with sdk(server, "alice") as alice:
            first = await alice.send("carol", "Coffee?", "at 3")
            await wait_for(pilot, lambda: label(app, "inbox") == "2 Inbox (1)", what="mail badge")
            await wait_for(pilot, lambda: label(app, "wake") == "1 Wake (1)", what="wake badge")
            await wait_for(pilot, lambda: "New mail: alice: Coffee?" in toasts(app), what="quiet toast")
            assert any("\x1b]9;New mail: alice: Coffee?\x07" in w for w in written), written
            assert any("\x1b]777;notify;New mail;alice: Coffee?\x07" in w for w in written)

            dm = await alice.open_dm("carol")
            await alice.post_chat(dm, "ping in chat")
            await wait_for(pilot, lambda: label(app, "chat") == "3 Chat (1)", what="chat badge")
            await wait_for(pilot, lambda: any("ping in chat" in t for t in toasts(app)), what="chat toast")
            # the fallback chat item (this server's wake has no chat source) counts in Wake too
            await wait_for(pilot, lambda: label(app, "wake") == "1 Wake (2)", what="wake counts chat")

            fetches = app.session.counts.fetches
            for i in range(12):  # a burst: the counts are refetched a few times, not once per event
                await alice.send("carol", f"burst {i}")
            await wait_for(pilot, lambda: label(app, "inbox") == "2 Inbox (13)", what="burst counted")
            await wait_idle(pilot, app)
            assert app.session.counts.fetches - fetches <= 6, app.session.counts.fetches - fetches

        with client(server, "carol") as carol:  # acknowledged elsewhere (another client): the badge follows
            carol.post("/api/mailboxes/me/messages/ack", json={"ids": [first.id]}).raise_for_status()
        await wait_for(pilot, lambda: label(app, "inbox") == "2 Inbox (12)", what="ack from elsewhere")

        shown = len(app._notifications)
        await pilot.press("2")  # the inbox in view: new mail shows there, no toast
        await wait_idle(pilot, app)
        async with sdk(server, "bob") as bob:
            await bob.send("carol", "while reading")
        await wait_for(pilot, lambda: label(app, "inbox") == "2 Inbox (13)", what="badge while in view")
        await wait_idle(pilot, app)
        assert not any("while reading" in t for t in toasts(app)[shown:])


def test_osc_notification_shows_control_characters_as_placeholders():
    sequence = osc_notification("Mail;x", "evil\x1b]0;title\x07 body\x9c\u202e")
    assert sequence.startswith("\x1b]9;Mail x: evil\u241b]0 title\u2407 body\ufffd\ufffd\x07")
    assert sequence.count("\x1b") == 2 and sequence.count("\x07") == 2


async def test_open_channel_is_marked_read_as_messages_arrive(server):
    with client(server, "alice") as alice:
        ops = alice.post("/api/chat/channels", json={"type": "group", "name": "ops-live", "members": ["bob"]}).json()
        alice.post(f"/api/chat/channels/{ops['channelId']}/messages", json={"body": "before"})
    channel = ops["channelId"]
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await connected(pilot, app, "bob")
        await wait_for(pilot, lambda: "3 Chat (" in label(app, "chat"), what="chat badge")
        # Wake lists the channel (the server's §18 chat item, as the server words it); enter opens it
        await wait_for(pilot, lambda: f"chat:{channel}" in row_keys(app, "#wake-table"), what="chat in wake")
        assert "Unread chat" in table_text(app, "#wake-table") and "ops-live — 1 message from alice" in \
            table_text(app, "#wake-table")
        select_row(app, "#wake-table", f"chat:{channel}")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.active_pane.id == "chat" and app.chat_pane.current == channel,
                       what="channel open")
        await wait_for(pilot, lambda: isinstance(app.focused, Input) and app.focused.id == "chat-input",
                       what="cursor in the message box")
        await wait_for(pilot, lambda: chat_unread(server, "bob", channel) == 0, what="read on opening")

        async with sdk(server, "alice") as alice:
            for body in ("one", "two"):
                await alice.post_chat(channel, body)
        await wait_for(pilot, lambda: "two" in str(app.query_one("#chat-messages").render()), what="live")
        await wait_for(pilot, lambda: chat_unread(server, "bob", channel) == 0, what="read as they arrive")
        await wait_for(pilot, lambda: label(app, "chat") == "3 Chat", what="no chat badge")

        await pilot.press("escape", "4")  # not in view any more: arriving messages stay unread
        await wait_idle(pilot, app)
        async with sdk(server, "alice") as alice:
            await alice.post_chat(channel, "three")
        await wait_for(pilot, lambda: label(app, "chat") == "3 Chat (1)", what="unread while away")
        assert chat_unread(server, "bob", channel) == 1


# A §18 wake payload as a v1.1 server sends it (API.md §18 "Chat in wake"); the channel id is filled in.
S18_WAKE = {
    "instructions": "Each actions entry names a kind of waiting work; its skill_url explains how to handle it.",
    "items": [{"source": "chat", "id": "CHANNEL", "channelId": "CHANNEL", "channelType": "dm", "channelName": None,
               "summary": "DM with alice — alice: \"can you look at the deploy?\"",
               "action": "Read the conversation and answer; POST .../read marks it read.", "priority": "normal",
               "age": "5m", "ephemeral": False}],
    "actions": [{"item": "chat", "action": "Read and answer.", "skill_url": "http://coord.test/api/skill/chat"}],
    "summary": "1 waiting: 1 chat.", "timestamp": "2026-02-17T12:00:00.000Z"}


async def test_s18_chat_items_are_shown_as_sent_and_open_the_channel(server):
    with client(server, "alice") as alice:
        dm = alice.post("/api/chat/channels", json={"type": "dm", "identity": "carol"}).json()["channelId"]
        alice.post(f"/api/chat/channels/{dm}/messages", json={"body": "can you look at the deploy?"})
    payload = {**S18_WAKE, "items": [{**S18_WAKE["items"][0], "id": dm, "channelId": dm}]}
    item = Wake.parse(payload).items[0]
    assert (item.source, item.channel_id, item.channel_type, item.key) == ("chat", dm, "dm", f"chat:{dm}")

    app = make_app(server, "carol")
    async with app.run_test(size=(120, 35)) as pilot:
        await connected(pilot, app, "carol")
        app._pending.append(ServerEvent("wake_pulse", payload))  # as the stream delivers a v1.1 pulse
        await wait_for(pilot, lambda: "DM with alice" in table_text(app, "#wake-table"), what="§18 item")
        assert row_keys(app, "#wake-table").count(f"chat:{dm}") == 1, "no fallback item beside the server's"
        assert label(app, "wake").startswith("1 Wake (")  # counted (other tests' items may wait for carol too)
        select_row(app, "#wake-table", f"chat:{dm}")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.chat_pane.current == dm, what="opened from the §18 item")
        await wait_for(pilot, lambda: chat_unread(server, "carol", dm) == 0, what="read")


async def test_panes_say_when_they_were_updated_and_presence_ages(server):
    now = [datetime.now(timezone.utc)]
    app = make_app(server, "alice", clock=lambda: now[0])
    async with app.run_test(size=(120, 35)) as pilot:
        await connected(pilot, app, "alice")
        await pilot.press("5")
        await wait_for(pilot, lambda: "alice" in row_keys(app, "#presence-table"), what="presence")
        row = next(line for line in table_text(app, "#presence-table").splitlines() if "| alice |" in line)
        assert "| online |" in row
        now[0] += timedelta(seconds=12)
        app.render_updated()
        assert str(app.query_one("#updated").render()) == "updated 12s ago"

        now[0] += timedelta(minutes=5)  # five minutes on: the pane reloads and alice has gone idle
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: "idle" in table_text(app, "#presence-table"), what="idle")
        app.render_updated()
        assert str(app.query_one("#updated").render()) == "updated 0s ago"
        await pilot.press("8")  # Links returning to view later reloads at once
        await wait_idle(pilot, app)
        loads = pane_by_id(app, "directory").loads
        await pilot.press("5")
        now[0] += timedelta(seconds=30)
        await pilot.press("8")
        await wait_for(pilot, lambda: pane_by_id(app, "directory").loads == loads + 1, what="fresh on return")


def test_presence_states_from_last_seen():
    now = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)

    def entry(minutes, online=True):
        seen = None if minutes is None else now - timedelta(minutes=minutes)
        return PresenceEntry("x", online, seen, "sse", 0, 0)
    assert [presence_state(entry(m), now) for m in (0, 1.9, 2, 14.9, 15)] == \
        ["online", "online", "idle", "idle", "idle"]
    assert presence_state(entry(40, online=False), now) == "offline"
    assert presence_state(entry(None, online=False), now) == "offline"


async def test_badges_recover_after_the_server_restarts(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    port = server.port
    app = make_app(server, "bob", backoff=(0.5, 1.0))
    async with app.run_test(size=(80, 24)) as pilot:
        await connected(pilot, app, "bob")
        await pilot.press("4")
        async with sdk(server, "alice") as alice:
            await alice.send("bob", "before the restart")
        await wait_for(pilot, lambda: label(app, "inbox") == "2 Inbox (1)", what="badge")

        server.stop()
        await wait_for(pilot, lambda: app.conn_state != "connected", timeout=15, what="disconnected")
        restarted = make_server(port=port, database_url=sqlite_url)
        async with sdk(restarted, "alice") as alice:
            await alice.send("bob", "while away")  # while the client backs off
        await wait_for(pilot, lambda: app.conn_state == "connected", timeout=15, what="reconnected")
        await wait_for(pilot, lambda: label(app, "inbox") == "2 Inbox (2)", what="badge after the restart")
        async with sdk(restarted, "carol") as carol:
            await carol.send("bob", "after the restart")
            dm = await carol.open_dm("bob")
            await carol.post_chat(dm, "still there?")
        await wait_for(pilot, lambda: label(app, "inbox") == "2 Inbox (3)", what="live again")
        await wait_for(pilot, lambda: label(app, "chat") == "3 Chat (1)", what="chat badge after the restart")


async def test_a_burst_of_chat_is_one_toast_and_says_how_many_were_held_back(server):
    with client(server, "alice") as alice:
        burst = alice.post("/api/chat/channels", json={"type": "group", "name": "burst", "members": ["bob"]}).json()
    app = make_app(server, "bob")
    async with app.run_test(size=(120, 35)) as pilot:
        await connected(pilot, app, "bob")
        shown = len(toasts(app))
        async with sdk(server, "alice") as alice:
            for n in range(12):
                await alice.post_chat(burst["channelId"], f"burst {n}")
        await wait_for(pilot, lambda: "3 Chat (" in label(app, "chat"), what="chat badge")
        await wait_idle(pilot, app)
        arrived = [t for t in toasts(app)[shown:] if "burst" in t]
        assert len(arrived) == 1 and arrived[0].endswith("burst 0"), arrived
        app.live._toasted["chat"] = (float("-inf"), app.live._toasted["chat"][1])  # as if TOAST_SPACING had passed
        async with sdk(server, "alice") as alice:
            await alice.post_chat(burst["channelId"], "after the burst")
        await wait_for(pilot, lambda: any("after the burst (and 11 more)" in t for t in toasts(app)),
                       what="the next toast counts the held-back ones")


async def test_two_digit_badges_fit_the_tab_row_at_80_columns(make_server, sqlite_url):
    server = make_server(database_url=sqlite_url)
    app = make_app(server, "carol")
    async with app.run_test(size=(80, 24)) as pilot:
        await connected(pilot, app, "carol")
        async with sdk(server, "alice") as alice, sdk(server, "bob") as bob:
            for i in range(12):
                await alice.send("carol", f"mail {i}")
            dm = await bob.open_dm("carol")
            for i in range(10):
                await bob.post_chat(dm, f"chat {i}")
        await wait_for(pilot, lambda: (app.session.counts.wake, app.session.counts.mail, app.session.counts.chat) == (13, 12, 10),
                       what=lambda: f"counts {app.session.counts}")
        await wait_idle(pilot, app)
        await pilot.pause(0.2)
        tabs = app.query_one("#panes", TabbedContent)
        labels = [label(app, pane_id) for pane_id in ("wake", "inbox", "chat")]
        assert labels == ["1 Wake(13)", "2 Inbox(12)", "3 Chat(10)"], labels
        for pane_id in ("wake", "buzz"):  # the row neither scrolls the first tab away nor pushes the last one off
            tab = tabs.get_tab(f"tab-{pane_id}")
            assert 0 <= tab.region.x and tab.region.right <= 80, (pane_id, tab.region)
