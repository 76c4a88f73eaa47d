"""Mailbox over real HTTP: send, inbox order and cursor paging, ack, reply, pending, dedupe, search, events."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from coordserver.events import channels
from coordserver.events import log
from coordserver.timeutil import FrozenClock
from tests.helpers import client, eventually


def events_for(server, identity: str, type_: str | None = None) -> list[dict]:
    rows = server.call(lambda: server.coord.store.read(log.for_identity_after, identity, 0))
    return [data for _id, kind, data in rows if type_ is None or kind == type_]


class BusRecorder:
    """Records what is published on a bus channel of the running server."""

    def __init__(self, server, channel: channels.Channel):
        self.items: list[dict] = []

        async def subscribe():
            return server.coord.bus.subscribe(channel, self.items.append)
        self._unsubscribe = server.call(subscribe)
        self._server = server

    def close(self):
        async def unsubscribe():
            self._unsubscribe()
        self._server.call(unsubscribe)


def send(api, to: str, **fields):
    response = api.post(f"/api/mailboxes/{to}/messages", json={"title": "hello", **fields})
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def fresh(make_server):
    return make_server()


def test_message_flow_between_two_identities(fresh):
    alice, bob = client(fresh, "alice"), client(fresh, "bob")
    wake = BusRecorder(fresh, channels.WAKE)
    message = send(alice, "bob", title="Deploy window", body="Ship at 15:00?", threadId="t-1",
                   metadata={"any": ["json", 1]})
    assert message["recipient"] == "bob" and message["sender"] == "alice"
    assert message["status"] == "unread" and message["viewedAt"] is None and message["threadId"] == "t-1"
    assert message["metadata"] == {"any": ["json", 1]}
    assert message["createdAt"].endswith("Z")

    inbox = bob.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()
    assert [m["id"] for m in inbox["messages"]] == [message["id"]] and inbox["total"] == 1
    assert "nextCursor" not in inbox
    assert alice.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["total"] == 0
    assert [m["id"] for m in alice.get("/api/mailboxes/me/sent").json()["messages"]] == [message["id"]]

    assert events_for(fresh, "bob", "message") == [{
        "type": "message", "recipient": "bob", "sender": "alice", "messageId": message["id"],
        "title": "Deploy window", "urgent": False}]
    assert events_for(fresh, "alice", "message") == []
    assert {"identity": "bob"} in wake.items
    wake.close()


def test_reply_threads_and_lands_in_the_senders_inbox(fresh):
    alice, bob, carol = client(fresh, "alice"), client(fresh, "bob"), client(fresh, "carol")
    original = send(alice, "bob", title="Deploy window")
    wake = BusRecorder(fresh, channels.WAKE)
    reply = bob.post(f"/api/mailboxes/me/messages/{original['id']}/reply", json={"body": "Yes, 15:00"})
    assert reply.status_code == 200
    reply = reply.json()
    assert reply["recipient"] == "alice" and reply["sender"] == "bob"
    assert reply["title"] == "Re: Deploy window"
    assert reply["threadId"] == str(original["id"]) and reply["replyToMessageId"] == original["id"]
    unread = alice.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["messages"]
    assert [m["id"] for m in unread] == [reply["id"]]
    assert events_for(fresh, "alice", "message")[-1]["messageId"] == reply["id"]
    assert {"identity": "alice"} in wake.items
    wake.close()

    # Replying to the reply keeps the title and the thread.
    again = alice.post(f"/api/mailboxes/me/messages/{reply['id']}/reply", json={"body": "ok"}).json()
    assert again["title"] == "Re: Deploy window" and again["threadId"] == str(original["id"])
    assert again["recipient"] == "bob"

    # Only the recipient of a message may reply to it.
    assert alice.post(f"/api/mailboxes/me/messages/{original['id']}/reply", json={"body": "x"}).status_code == 404
    denied = carol.post(f"/api/mailboxes/me/messages/{original['id']}/reply", json={"body": "x"})
    assert denied.status_code == 404 and denied.json() == {"error": "Message not found"}
    assert bob.post(f"/api/mailboxes/me/messages/{original['id']}/reply", json={}).status_code == 400
    assert bob.post("/api/mailboxes/me/messages/999999/reply", json={"body": "x"}).status_code == 404


def test_reply_keeps_an_existing_thread_id(fresh):
    alice, bob = client(fresh, "alice"), client(fresh, "bob")
    original = send(alice, "bob", title="Re: already", threadId="ops-7")
    reply = bob.post(f"/api/mailboxes/me/messages/{original['id']}/reply", json={"body": "b" * 10_050}).json()
    assert reply["title"] == "Re: already" and reply["threadId"] == "ops-7" and len(reply["body"]) == 10_000


def test_pending_set_and_clear_by_the_recipient_only(fresh):
    alice, bob, carol = client(fresh, "alice"), client(fresh, "bob"), client(fresh, "carol")
    message = send(alice, "bob")
    path = f"/api/mailboxes/me/messages/{message['id']}/pending"
    pending = bob.post(path).json()
    assert pending["responseWaiting"] is True and pending["waitingResponder"] == "bob"
    assert pending["waitingSince"] is not None
    shown = bob.get("/api/mailboxes/me/messages").json()["messages"][0]
    assert shown["responseWaiting"] is True and shown["waitingSince"] == pending["waitingSince"]
    for other in (alice, carol):
        assert other.post(path).status_code == 404
        assert other.delete(path).status_code == 404
    cleared = bob.delete(path).json()
    assert cleared["responseWaiting"] is False
    assert cleared["waitingResponder"] is None and cleared["waitingSince"] is None


def test_ack_single_and_batch(fresh):
    alice, bob, carol = client(fresh, "alice"), client(fresh, "bob"), client(fresh, "carol")
    first, second, third = send(alice, "bob", title="1"), send(alice, "bob", title="2"), send(alice, "bob", title="3")
    carols = send(alice, "carol")
    checks = BusRecorder(fresh, channels.EPHEMERAL)

    acked = bob.post(f"/api/mailboxes/me/messages/{first['id']}/ack")
    assert acked.status_code == 200
    acked = acked.json()
    assert acked["status"] == "read" and acked["viewedAt"] is not None
    again = bob.post(f"/api/mailboxes/me/messages/{first['id']}/ack").json()
    assert again["viewedAt"] == acked["viewedAt"] and again["status"] == "read"
    unread = bob.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()
    assert first["id"] not in [m["id"] for m in unread["messages"]] and unread["total"] == 2
    read = bob.get("/api/mailboxes/me/messages", params={"status": "read"}).json()
    assert [m["id"] for m in read["messages"]] == [first["id"]]

    # Another identity cannot ack someone else's message.
    refused = alice.post(f"/api/mailboxes/me/messages/{second['id']}/ack")
    assert refused.status_code == 404 and refused.json() == {"error": "Message not found"}

    batch = bob.post("/api/mailboxes/me/messages/ack",
                     json={"ids": [second["id"], third["id"], carols["id"], 999999, second["id"]]})
    assert batch.json() == {"success": [second["id"], third["id"]], "notFound": [carols["id"], 999999]}
    assert bob.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["total"] == 0
    assert carol.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["total"] == 1

    acks = [p for p in checks.items if p["type"] == "inbox_check" and p["data"]["action"] == "ack"]
    assert acks and all(p["to"] == ["bob"] and p["data"]["mailbox"] == "bob" for p in acks)
    checks.close()


def test_dedupe_key_returns_the_first_message_and_emits_nothing(fresh):
    alice, bob = client(fresh, "alice"), client(fresh, "bob")
    first = send(alice, "bob", title="Job 17 done", dedupeKey="job-17")
    repeat = send(alice, "bob", title="Job 17 done again", dedupeKey="job-17")
    assert repeat == first
    assert len(events_for(fresh, "bob", "message")) == 1
    assert bob.get("/api/mailboxes/me/messages").json()["total"] == 1
    # The key is per (sender, recipient): another pair stores a new message.
    other = send(alice, "carol", dedupeKey="job-17")
    from_bob = send(bob, "carol", dedupeKey="job-17")
    assert len({first["id"], other["id"], from_bob["id"]}) == 3


def test_concurrent_dedupe_stores_one_message(make_server, database_url):
    import concurrent.futures
    fresh = make_server(database_url=database_url)  # PostgreSQL runs several writers: a real race
    alice = client(fresh, "alice")

    def post(_):
        return client(fresh, "alice").post("/api/mailboxes/bob/messages",
                                           json={"title": "once", "dedupeKey": "race"}).json()["id"]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(post, range(16)))
    assert len(ids) == 1
    assert len(events_for(fresh, "bob", "message")) == 1
    alice.close()


def test_unread_lists_urgent_first_then_oldest_and_others_newest_first(make_server):
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc))
    srv = make_server(clock=clock)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    ids = {}
    for name, urgent in [("old", False), ("old-urgent", True), ("new", False), ("new-urgent", True)]:
        ids[name] = send(alice, "bob", title=name, urgent=urgent)["id"]
        clock.advance(minutes=1)
    unread = bob.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["messages"]
    assert [m["title"] for m in unread] == ["old-urgent", "new-urgent", "old", "new"]
    everything = bob.get("/api/mailboxes/me/messages").json()["messages"]
    assert [m["title"] for m in everything] == ["new-urgent", "new", "old-urgent", "old"]


def test_limit_defaults_to_50_and_is_clamped_to_100(fresh):
    alice, bob = client(fresh, "alice"), client(fresh, "bob")
    for i in range(120):
        send(alice, "bob", title=f"m{i}")
    assert len(bob.get("/api/mailboxes/me/messages").json()["messages"]) == 50
    capped = bob.get("/api/mailboxes/me/messages", params={"limit": 500}).json()
    assert len(capped["messages"]) == 100 and capped["total"] == 120 and "nextCursor" in capped
    assert len(alice.get("/api/mailboxes/me/sent", params={"limit": 1000}).json()["messages"]) == 100
    assert bob.get("/api/mailboxes/me/messages", params={"limit": "ten"}).status_code == 400
    assert bob.get("/api/mailboxes/me/messages", params={"limit": 0}).status_code == 400


@pytest.mark.parametrize("status", ["unread", "read", None])
def test_cursor_walk_visits_each_message_once_while_new_ones_arrive(make_server, database_url, status):
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc))
    srv = make_server(clock=clock, database_url=database_url)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    existing = set()
    for i in range(250):
        existing.add(send(alice, "bob", title=f"m{i}", urgent=i % 7 == 0)["id"])
    if status == "read":
        bob.post("/api/mailboxes/me/messages/ack", json={"ids": sorted(existing)})
        if i % 3 == 0:
            # Sub-millisecond steps (the wire shows milliseconds; the cursor must not round) and ties
            # (several share a timestamp: the id breaks them).
            clock.advance(microseconds=400)
    params = {"limit": 100}
    if status:
        params["status"] = status
    seen: list[int] = []
    arrived = 0
    while True:
        page = bob.get("/api/mailboxes/me/messages", params=params).json()
        assert page["total"] == 250 + arrived
        seen.extend(m["id"] for m in page["messages"])
        # New mail (urgent and not) arrives between pages.
        for urgent in (True, False):
            late = send(alice, "bob", title="late", urgent=urgent)
            if status == "read":
                bob.post(f"/api/mailboxes/me/messages/{late['id']}/ack")
            arrived += 1
        if "nextCursor" not in page:
            break
        params["cursor"] = page["nextCursor"]
    assert len(seen) == len(set(seen)), "a message was returned twice"
    assert existing <= set(seen), "a message present before the walk was skipped"
    assert len(seen) <= 256


def test_cursor_is_validated(fresh):
    bob = client(fresh, "bob")
    for bad in ("garbage", "eyJ4IjoxfQ", "W10"):
        response = bob.get("/api/mailboxes/me/messages", params={"cursor": bad})
        assert response.status_code == 400 and response.json() == {"error": "Invalid cursor"}
    alice = client(fresh, "alice")
    for i in range(3):
        send(alice, "bob", title=f"m{i}")
    page = bob.get("/api/mailboxes/me/messages", params={"limit": 1}).json()
    # A cursor belongs to its order: reusing a newest-first cursor for the unread order is refused.
    mixed = bob.get("/api/mailboxes/me/messages", params={"status": "unread", "cursor": page["nextCursor"]})
    assert mixed.status_code == 400


def test_search_finds_a_message_by_a_body_word(make_server, database_url):
    srv = make_server(database_url=database_url)
    alice, bob, carol = client(srv, "alice"), client(srv, "bob"), client(srv, "carol")
    target = send(alice, "bob", title="Weekly", body="The canary deployment is green")
    send(alice, "bob", title="Other", body="nothing to see")
    send(alice, "carol", title="Also canary", body="not bob's")
    later = send(alice, "bob", title="Canary again", body="second")
    checks = BusRecorder(srv, channels.STREAM_HINTS)

    found = bob.get("/api/mailboxes/me/messages/search", params={"q": "canary"})
    assert found.status_code == 200
    rows = found.json()["messages"]
    assert [r["id"] for r in rows] == [later["id"], target["id"]]  # newest first, bob's only
    row = rows[1]
    assert row["created_at"] == target["createdAt"] and row["reply_to_message_id"] is None
    assert {"thread_id", "dedupe_key", "response_waiting", "waiting_responder", "waiting_since",
            "viewed_at"} <= set(row)
    assert [r["id"] for r in bob.get("/api/mailboxes/me/messages/search",
                                     params={"q": "canary green"}).json()["messages"]] == [target["id"]]
    assert bob.get("/api/mailboxes/me/messages/search", params={"q": "DEPLOYMENT"}).json()["messages"][0]["id"] \
        == target["id"]
    assert carol.get("/api/mailboxes/me/messages/search", params={"q": "green"}).json()["messages"] == []

    # Any input is a clean 200 (operators and quotes are treated as words or dropped).
    for q in ['"', "canary OR", "*", "NEAR(canary", "title:canary", "-canary", "^", "é😀", "'; DROP",
              "(", ")", "canary\"green", "AND", "%_\\"]:
        response = bob.get("/api/mailboxes/me/messages/search", params={"q": q})
        assert response.status_code == 200, (q, response.text)
    assert bob.get("/api/mailboxes/me/messages/search").status_code == 400
    assert bob.get("/api/mailboxes/me/messages/search", params={"q": "a\x00b"}).status_code == 400  # NUL rule
    assert bob.get("/api/mailboxes/me/messages/search", params={"q": "  "}).status_code == 400
    assert any(p["type"] == "inbox_check" and p["data"]["action"] == "search" and p["to"] == ["bob"]
               for p in checks.items)
    checks.close()


def test_inbox_list_emits_inbox_check_to_the_caller(fresh):
    checks = BusRecorder(fresh, channels.STREAM_HINTS)
    client(fresh, "carol").get("/api/mailboxes/me/messages")
    wanted = {"type": "inbox_check", "to": ["carol"], "data": {"type": "inbox_check", "mailbox": "carol", "action": "list"}}
    assert wanted in eventually(lambda: checks.items, lambda items: wanted in items)  # maybe from another worker
    checks.close()


def test_send_limits_and_bad_input(fresh):
    alice = client(fresh, "alice")
    long = send(alice, "bob", title="t" * 300, body="b" * 12_000)
    assert len(long["title"]) == 255 and len(long["body"]) == 10_000

    def status(payload=None, to="bob", **kwargs):
        return alice.post(f"/api/mailboxes/{to}/messages", json=payload, **kwargs)

    unknown = status({"title": "x"}, to="nobody")
    assert unknown.status_code == 400 and unknown.json() == {"error": "Invalid recipient mailbox"}
    assert status({"body": "no title"}).json() == {"error": "title is required"}
    for payload in [{"title": ""}, {"title": 5}, {"title": "x", "body": 5}, {"title": "x", "urgent": "yes"},
                    {"title": "x", "threadId": "t" * 101}, {"title": "x", "threadId": {"a": 1}},
                    {"title": "x", "dedupeKey": "k" * 256}, {"title": "x", "dedupeKey": 7},
                    {"title": "x", "replyToMessageId": "41"}, {"title": "x", "replyToMessageId": 1.5}, [1, 2]]:
        response = status(payload)
        assert response.status_code == 400, payload
        assert isinstance(response.json()["error"], str)
    assert alice.post("/api/mailboxes/bob/messages", content=b"{not json").status_code == 400
    assert alice.post("/api/mailboxes/bob/messages").status_code == 400
    assert alice.get("/api/mailboxes/me/messages", params={"status": "archived"}).json() == {
        "error": "status must be unread or read"}
    for ids in [None, "1", [1, "2"], [True], {"a": 1}]:
        body = {} if ids is None else {"ids": ids}
        assert alice.post("/api/mailboxes/me/messages/ack", json=body).status_code == 400, ids
    assert alice.post("/api/mailboxes/me/messages/abc/ack").status_code == 400
    assert alice.post("/api/mailboxes/me/messages/abc/pending").status_code == 400
    assert client(fresh).get("/api/mailboxes/me/messages").status_code == 401
    assert client(fresh, token="wrong").post("/api/mailboxes/bob/messages", json={"title": "x"}).status_code == 401
    # Nothing half-written: only the one good message reached bob.
    assert client(fresh, "bob").get("/api/mailboxes/me/messages").json()["total"] == 1


def test_inbox_rows_are_exactly_the_message_objects(make_server, database_url):
    """The inbox rows are encoded by the database: they must equal what send, ack and pending return."""
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, 0, 999_700, tzinfo=timezone.utc))  # truncation, not rounding
    srv = make_server(clock=clock, database_url=database_url)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    sent = [
        send(alice, "bob", title='Quotes " and \\ and é ß 😀', body="line1\nline2\t\u2028", urgent=True,
             threadId="t-1", replyToMessageId=41, dedupeKey="k-1",
             metadata={"nested": {"list": [1, 2.5, None, True, "x"]}, "unicode": "ü"}),
        send(alice, "bob", title="plain", metadata="just a string"),
        send(alice, "bob", title="no metadata"),
        send(alice, "bob", title="zero", metadata=0),
    ]
    assert sent[0]["createdAt"] == "2026-02-17T12:00:00.999Z"
    clock.advance(seconds=1)
    acked = bob.post(f"/api/mailboxes/me/messages/{sent[1]['id']}/ack").json()
    pending = bob.post(f"/api/mailboxes/me/messages/{sent[2]['id']}/pending").json()
    expected = {m["id"]: m for m in sent}
    expected[acked["id"]], expected[pending["id"]] = acked, pending
    listed = bob.get("/api/mailboxes/me/messages").json()
    assert listed["total"] == 4
    assert {m["id"]: m for m in listed["messages"]} == expected
    assert [m["id"] for m in listed["messages"]] == [s["id"] for s in reversed(sent)]
    unread = bob.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["messages"]
    assert unread[0] == sent[0]
