"""Who is who in coordtui (issue 28): an agent's name carries the agent mark in Inbox, its thread view, Chat and
Who, and a human's does not, against the real server (carol declared an agent by COORD_AGENTS)."""
from __future__ import annotations

from coordtui.agentmark import AGENT_MARK, named
from tests.conftest import client
from tests.tui.helpers import make_app, row_keys, table_text, wait_for


def test_named_marks_agents_only():
    assert named("carol", True) == f"carol {AGENT_MARK}" and named("alice", False) == "alice"


async def test_agents_are_marked_in_inbox_chat_and_who(make_server):
    server = make_server(env={"COORD_AGENTS": "carol"})
    with client(server, "carol") as carol, client(server, "alice") as alice:
        from_agent = carol.post("/api/mailboxes/bob/messages", json={"title": "build green"}).json()
        alice.post("/api/mailboxes/bob/messages", json={"title": "lunch?"}).raise_for_status()
        dm = carol.post("/api/chat/channels", json={"type": "dm", "identity": "bob"}).json()["channelId"]
        carol.post(f"/api/chat/channels/{dm}/messages", json={"body": "deploying now"}).raise_for_status()
    app = make_app(server, "bob")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: str(from_agent["id"]) in row_keys(app, "#inbox-table"), what="inbox rows")
        rows = table_text(app, "#inbox-table").splitlines()
        assert any(f"carol {AGENT_MARK}" in row and "build green" in row for row in rows)
        assert any("| alice |" in row and "lunch?" in row for row in rows)  # a human: no mark

        await pilot.press("3")
        await wait_for(pilot, lambda: "deploying now" in str(app.query_one("#chat-messages").render()),
                       what="chat messages")
        assert f"carol {AGENT_MARK}" in str(app.query_one("#chat-messages").render())

        await pilot.press("5")
        await wait_for(pilot, lambda: "carol" in row_keys(app, "#presence-table"), what="presence rows")
        who = table_text(app, "#presence-table").splitlines()
        assert any(f"carol {AGENT_MARK}" in row for row in who)
        assert not any(f"alice {AGENT_MARK}" in row for row in who)


async def test_a_loop_guard_heads_the_wake_pane(make_server):
    server = make_server(env={"COORD_AGENTS": "alice,bob", "COORD_LOOP_MESSAGES": "6"})
    with client(server, "alice") as alice, client(server, "bob") as bob:
        for n in range(4):
            alice.post("/api/mailboxes/bob/messages", json={"title": f"ack {n}"}).raise_for_status()
            bob.post("/api/mailboxes/alice/messages", json={"title": f"ack ack {n}"}).raise_for_status()
        guard_id = next(i["id"] for i in bob.get("/api/wake").json()["items"] if i["source"] == "guard")
    app = make_app(server, "bob")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: f"guard:{guard_id}" in row_keys(app, "#wake-table"), what="guard item")
        text = table_text(app, "#wake-table")
        assert text.index("Loop guards") < text.index("Unread mail")
        assert "Loop suspected between alice and bob: 7 messages in 2 min" in text


async def test_agents_are_marked_in_the_directory(make_server):
    server = make_server(env={"COORD_AGENTS": "carol"})
    with client(server, "carol") as carol, client(server, "alice") as alice:
        by_agent = carol.post("/api/directory", json={"title": "Build dashboard", "url": "https://ci.example"}).json()
        by_human = alice.post("/api/directory", json={"title": "Team docs", "url": "https://docs.example"}).json()
        assert (by_agent["createdByIsAgent"], by_human["createdByIsAgent"]) == (True, False)
    app = make_app(server, "bob")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("8")
        await wait_for(pilot, lambda: str(by_human["id"]) in row_keys(app, "#directory-table"), what="links")
        rows = table_text(app, "#directory-table").splitlines()
        assert any(f"carol {AGENT_MARK}" in row and "Build dashboard" in row for row in rows)
        assert any("| alice " in row and "Team docs" in row and AGENT_MARK not in row for row in rows)
