"""Issue 24: archived channels can be listed and unarchived, and one with new messages says so."""
from __future__ import annotations

from coordtui.ops.chat import ArchivedChannelsScreen
from tests.tui.functional.test_typed_ahead import api
from tests.tui.helpers import make_app, select_row, table_text, wait_for, wait_idle


async def test_archived_chats_list_what_arrived_and_enter_brings_one_back(server):
    channel = api(server, "alice", "POST", "/api/chat/channels",
                  json={"type": "group", "name": "old-incident", "members": ["bob"]})["channelId"]
    api(server, "alice", "POST", f"/api/chat/channels/{channel}/archive")
    api(server, "bob", "POST", f"/api/chat/channels/{channel}/messages", json={"body": "it is back"})
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        await pilot.press("3")
        await wait_idle(pilot, app)
        app.chat_pane.query_one("#chat-channels").focus()
        await pilot.press("X")
        await wait_for(pilot, lambda: isinstance(app.screen, ArchivedChannelsScreen) and app.screen.loads,
                       what="archived chats")
        assert "#old-incident" in table_text(app.screen, "#ops-table")
        assert "1 new" in table_text(app.screen, "#ops-table")
        assert "with new messages" in str(app.screen.query_one("#ops-summary").render())
        select_row(app.screen, "#ops-table", channel)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ArchivedChannelsScreen), what="back in Chat")
        await wait_for(pilot, lambda: app.chat_pane.current == channel, what="the channel open")
    listed = api(server, "alice", "GET", "/api/chat/channels")["channels"]
    assert any(c["id"] == channel for c in listed), "unarchived"
