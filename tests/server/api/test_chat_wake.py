"""API.md §18 chat in wake over real HTTP on SQLite and PostgreSQL: items appear, read as specified,
leave when the read marker passes the latest message, and a new chat message pulses the others."""
from __future__ import annotations

import httpx

from coordserver.timeutil import FrozenClock
from tests.helpers import async_client, client, ok
from tests.sse_helpers import open_stream


def chat_items(c: httpx.Client) -> list[dict]:
    return [i for i in ok(c.get("/api/wake"))["items"] if i["source"] == "chat"]


def test_dm_and_group_items_appear_read_and_leave(make_server, database_url):
    clock = FrozenClock()
    srv = make_server(clock=clock, database_url=database_url)
    alice, bob, carol = client(srv, "alice"), client(srv, "bob"), client(srv, "carol")
    assert chat_items(bob) == []
    dm = ok(alice.post("/api/chat/channels", json={"type": "dm", "identity": "bob"}))["channelId"]
    ok(alice.post(f"/api/chat/channels/{dm}/messages", json={"body": "first"}))
    clock.advance(hours=2)
    latest = "can you look at the deploy? " + "x" * 120
    ok(alice.post(f"/api/chat/channels/{dm}/messages", json={"body": latest}))
    clock.advance(minutes=5)
    ok(bob.post(f"/api/chat/channels/{dm}/messages", json={"body": "own words are never unread to their sender"}))
    assert [i["summary"] for i in chat_items(alice)] == ['DM with bob — bob: "own words are never unread to their sender"']
    items = chat_items(bob)
    assert items == [{"source": "chat", "id": dm, "channelId": dm, "channelType": "dm", "channelName": None,
                      "summary": f'DM with alice — alice: "{latest[:100]}"',
                      "action": "Read the conversation and answer; POST .../read marks it read.",
                      "priority": "normal", "ephemeral": False, "age": "2h 5m"}]
    wake = ok(bob.get("/api/wake"))
    assert {"item": "chat", "action": wake["actions"][0]["action"],
            "skill_url": "http://coord.test/api/skill/chat"} in wake["actions"]
    assert "1 unread chat" in wake["summary"]

    group = ok(alice.post("/api/chat/channels", json={"type": "group", "name": "ops",
                                                      "members": ["bob", "carol"]}))["channelId"]
    ok(carol.post(f"/api/chat/channels/{group}/messages", json={"body": "c1"}))
    ok(alice.post(f"/api/chat/channels/{group}/messages", json={"body": "a1"}))
    ok(carol.post(f"/api/chat/channels/{group}/messages", json={"body": "c2"}))
    by_channel = {i["id"]: i for i in chat_items(bob)}
    assert by_channel[group]["summary"] == "ops — 3 messages from carol, alice"
    assert by_channel[group]["channelType"] == "group" and by_channel[group]["channelName"] == "ops"
    assert [i["summary"] for i in chat_items(carol)] == ["ops — 1 message from alice"]

    # fetching does not mark read; POST .../read does; archiving hides the channel from wake
    ok(bob.get(f"/api/chat/channels/{dm}/messages"))
    assert dm in {i["id"] for i in chat_items(bob)}
    clock.advance(seconds=1)
    assert ok(bob.post(f"/api/chat/channels/{dm}/read")) == {"ok": True}
    assert {i["id"] for i in chat_items(bob)} == {group}
    clock.advance(seconds=1)
    ok(alice.post(f"/api/chat/channels/{dm}/messages", json={"body": "again"}))
    items = {i["id"]: i for i in chat_items(bob)}
    assert items[dm]["summary"] == 'DM with alice — alice: "again"' and items[dm]["age"] == "0m"
    ok(bob.post(f"/api/chat/channels/{group}/archive"))
    assert {i["id"] for i in chat_items(bob)} == {dm}
    clock.advance(seconds=1)
    ok(bob.post(f"/api/chat/channels/{dm}/read"))
    assert chat_items(bob) == []
    assert not any(a["item"] == "chat" for a in ok(bob.get("/api/wake"))["actions"])


async def test_a_chat_message_pulses_the_other_members(make_server, database_url):
    srv = make_server(database_url=database_url)
    async with async_client(srv, "alice") as alice:
        dm = (await alice.post("/api/chat/channels", json={"type": "dm", "identity": "bob"})).json()["channelId"]
        async with open_stream(srv, "bob") as bob:
            await bob.until(lambda f: f.event == "wake_pulse")  # the pulse on connect
            assert (await alice.post(f"/api/chat/channels/{dm}/messages", json={"body": "ping"})).status_code == 200
            pulse = await bob.until(lambda f: f.event == "wake_pulse"
                                    and any(i["source"] == "chat" for i in f.data["items"]))
            item = next(i for i in pulse.data["items"] if i["source"] == "chat")
            assert item["summary"] == 'DM with alice — alice: "ping"' and item["channelId"] == dm
