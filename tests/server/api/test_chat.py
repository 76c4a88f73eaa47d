"""Chat over real HTTP between three identities: channels, unread counts, paging, search, events."""
from __future__ import annotations

import concurrent.futures
from datetime import datetime, timezone

import pytest

from coordserver.events import channels
from coordserver.timeutil import FrozenClock
from tests.helpers import client
from tests.server.api.test_messages import BusRecorder, events_for

T0 = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def chat(make_server):
    clock = FrozenClock(T0)
    srv = make_server(clock=clock)
    return srv, clock, {who: client(srv, who) for who in ("alice", "bob", "carol", "admin")}


def group(api, name="ops", members=("bob", "carol")) -> str:
    response = api.post("/api/chat/channels", json={"type": "group", "name": name, "members": list(members)})
    assert response.status_code == 200, response.text
    assert response.json()["type"] == "group"
    return response.json()["channelId"]


def post(api, channel: str, body: str) -> dict:
    response = api.post(f"/api/chat/channels/{channel}/messages", json={"body": body})
    assert response.status_code == 200, response.text
    return response.json()


def channel_row(api, channel: str, archived: bool = False) -> dict | None:
    params = {"archived": "true"} if archived else {}
    rows = api.get("/api/chat/channels", params=params).json()["channels"]
    return next((r for r in rows if r["id"] == channel), None)


def test_group_creation_includes_the_creator(chat):
    _srv, _clock, api = chat
    channel = group(api["alice"])
    for who in ("alice", "bob", "carol"):
        row = channel_row(api[who], channel)
        assert row["type"] == "group" and row["name"] == "ops" and row["created_by"] == "alice"
        assert sorted(m["identity"] for m in row["members"]) == ["alice", "bob", "carol"]
        assert row["last_message"] is None and row["unread_count"] == 0 and row["last_read_at"] is None
    assert channel_row(api["admin"], channel) is None
    unknown = api["alice"].post("/api/chat/channels", json={"type": "group", "name": "x", "members": ["nobody"]})
    assert unknown.status_code == 400 and "nobody" in unknown.json()["error"]


def test_unread_counts_per_member_and_read_resets_one_member(chat):
    _srv, clock, api = chat
    channel = group(api["alice"])
    clock.advance(seconds=1)
    post(api["alice"], channel, "one")
    clock.advance(seconds=1)
    post(api["alice"], channel, "two")
    clock.advance(seconds=1)
    last = post(api["bob"], channel, "three")
    counts = {who: channel_row(api[who], channel)["unread_count"] for who in ("alice", "bob", "carol")}
    assert counts == {"alice": 1, "bob": 2, "carol": 3}
    row = channel_row(api["carol"], channel)
    assert row["last_message"] == {"id": last["id"], "sender": "bob", "body": "three", "created_at": last["createdAt"]}

    # Fetching messages does not move the marker; POST read does, for the caller only.
    assert len(api["carol"].get(f"/api/chat/channels/{channel}/messages").json()["messages"]) == 3
    assert channel_row(api["carol"], channel)["unread_count"] == 3
    clock.advance(seconds=1)
    assert api["carol"].post(f"/api/chat/channels/{channel}/read").json() == {"ok": True}
    counts = {who: channel_row(api[who], channel)["unread_count"] for who in ("alice", "bob", "carol")}
    assert counts == {"alice": 1, "bob": 2, "carol": 0}
    assert channel_row(api["carol"], channel)["last_read_at"] == "2026-02-17T12:00:04.000Z"
    clock.advance(seconds=1)
    post(api["alice"], channel, "four")
    assert channel_row(api["carol"], channel)["unread_count"] == 1


def test_non_members_are_refused_and_unknown_channels_are_404(chat):
    _srv, _clock, api = chat
    dm = api["alice"].post("/api/chat/channels", json={"type": "dm", "identity": "bob"}).json()["channelId"]
    post(api["alice"], dm, "private")
    carol = api["carol"]
    for method, suffix, body in [("GET", "messages", None), ("POST", "messages", {"body": "hi"}), ("POST", "read", None),
                                 ("POST", "typing", None), ("POST", "archive", None), ("POST", "unarchive", None)]:
        response = carol.request(method, f"/api/chat/channels/{dm}/{suffix}", json=body)
        assert response.status_code == 403 and response.json() == {"error": "Not a member"}, suffix
        missing = carol.request(method, f"/api/chat/channels/no-such-channel/{suffix}", json=body)
        assert missing.status_code == 404, suffix
    assert channel_row(carol, dm) is None
    assert carol.get("/api/chat/search", params={"q": "private"}).json()["messages"] == []
    assert carol.get("/api/chat/search", params={"q": "pr"}).json()["messages"] == []


def test_dm_is_reused_per_pair_even_when_opened_concurrently(chat):
    srv, _clock, api = chat
    first = api["alice"].post("/api/chat/channels", json={"type": "dm", "identity": "bob"}).json()
    assert first["type"] == "dm"
    assert api["bob"].post("/api/chat/channels", json={"type": "dm", "identity": "alice"}).json() == first
    assert api["alice"].post("/api/chat/channels", json={"type": "dm", "identity": "BOB"}).json() == first

    def open_dm(who_other):
        who, other = who_other
        return client(srv, who).post("/api/chat/channels", json={"type": "dm", "identity": other}).json()["channelId"]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(open_dm, [("carol", "bob"), ("bob", "carol")] * 6))
    assert len(ids) == 1
    row = channel_row(api["carol"], ids.pop())
    assert sorted(m["identity"] for m in row["members"]) == ["bob", "carol"] and row["name"] is None


def test_before_paging_returns_each_message_once_oldest_first(chat):
    _srv, _clock, api = chat
    channel = group(api["alice"])
    posted = [post(api["alice" if i % 2 else "bob"], channel, f"m{i}")["id"] for i in range(130)]
    seen: list[int] = []
    before = None
    while True:
        params = {"limit": 40}
        if before is not None:
            params["before"] = before
        page = api["carol"].get(f"/api/chat/channels/{channel}/messages", params=params).json()["messages"]
        if not page:
            break
        ids = [m["id"] for m in page]
        assert ids == sorted(ids)  # each page oldest first
        seen = ids + seen
        before = ids[0]
    assert seen == posted
    newest = api["carol"].get(f"/api/chat/channels/{channel}/messages").json()["messages"]
    assert [m["id"] for m in newest] == posted[-50:]
    assert len(api["carol"].get(f"/api/chat/channels/{channel}/messages", params={"limit": 1000})
               .json()["messages"]) == 100
    assert api["carol"].get(f"/api/chat/channels/{channel}/messages", params={"before": "x"}).status_code == 400


def test_channels_ordered_by_latest_message_and_empty_last_and_archive(chat):
    _srv, clock, api = chat
    alice = api["alice"]
    empty = group(alice, "empty")
    clock.advance(seconds=1)
    older = group(alice, "older")
    newer = group(alice, "newer")
    post(alice, newer, "first")
    clock.advance(seconds=1)
    post(alice, older, "second")
    order = [r["id"] for r in alice.get("/api/chat/channels").json()["channels"]]
    assert order == [older, newer, empty]

    assert alice.post(f"/api/chat/channels/{older}/archive").json() == {"ok": True}
    assert [r["id"] for r in alice.get("/api/chat/channels").json()["channels"]] == [newer, empty]
    archived = alice.get("/api/chat/channels", params={"archived": "true"}).json()["channels"]
    assert [r["id"] for r in archived] == [older] and archived[0]["archived_at"] is not None
    assert channel_row(api["bob"], older) is not None  # only the caller's view changes
    alice.post(f"/api/chat/channels/{older}/unarchive")
    assert [r["id"] for r in alice.get("/api/chat/channels").json()["channels"]] == [older, newer, empty]


def test_events_chat_message_logged_to_all_members_and_typing_to_others(chat):
    srv, _clock, api = chat
    channel = group(api["alice"], members=["bob"])
    message = post(api["bob"], channel, "  ship it  ")
    assert message["body"] == "ship it" and message["channelId"] == channel and message["sender"] == "bob"
    expected = {"type": "chat_message", "channelId": channel,
                "message": {"id": message["id"], "sender": "bob", "body": "ship it", "createdAt": message["createdAt"], "isAgent": False}}
    for who in ("alice", "bob"):
        assert events_for(srv, who, "chat_message") == [expected]
    assert events_for(srv, "carol", "chat_message") == []

    recorder = BusRecorder(srv, channels.EPHEMERAL)
    assert api["bob"].post(f"/api/chat/channels/{channel}/typing").json() == {"ok": True}
    typing = [p for p in recorder.items if p["type"] == "chat_typing"]
    assert typing == [{"type": "chat_typing", "to": ["alice"],
                       "data": {"type": "chat_typing", "channelId": channel, "identity": "bob"}}]
    recorder.close()


def test_search_substring_full_text_and_filters(make_server, database_url):
    clock = FrozenClock(T0)
    srv = make_server(clock=clock, database_url=database_url)
    alice, bob, carol = client(srv, "alice"), client(srv, "bob"), client(srv, "carol")
    ops = group(alice, "ops")
    dm = alice.post("/api/chat/channels", json={"type": "dm", "identity": "bob"}).json()["channelId"]
    first = post(alice, ops, "Deploying the canary now")
    clock.advance(minutes=1)
    second = post(bob, dm, "canary looks healthy")
    clock.advance(minutes=1)
    post(carol, ops, "lunch?")

    rows = alice.get("/api/chat/search", params={"q": "canary"}).json()["messages"]
    assert [r["id"] for r in rows] == [second["id"], first["id"]]  # newest first
    assert rows[0] == {"id": second["id"], "channel_id": dm, "sender": "bob", "body": "canary looks healthy",
                       "created_at": second["createdAt"], "channel_type": "dm", "channel_name": None}
    assert rows[1]["channel_type"] == "group" and rows[1]["channel_name"] == "ops"
    assert [r["id"] for r in carol.get("/api/chat/search", params={"q": "canary"}).json()["messages"]] == [first["id"]]
    # Under 3 characters: case-insensitive substring.
    assert [r["body"] for r in alice.get("/api/chat/search", params={"q": "LU"}).json()["messages"]] == ["lunch?"]
    assert alice.get("/api/chat/search", params={"q": "%"}).json()["messages"] == []
    # Filters.
    def ids(**params):
        return [r["id"] for r in alice.get("/api/chat/search", params={"q": "canary", **params}).json()["messages"]]
    assert ids(channelId=ops) == [first["id"]]
    assert ids(sender="bob") == [second["id"]]
    assert ids(before="2026-02-17T12:00:30Z") == [first["id"]]
    assert ids(after="2026-02-17T13:00:30+01:00") == [second["id"]]
    assert ids(limit=1) == [second["id"]]
    assert alice.get("/api/chat/search", params={"q": "canary", "before": "yesterday"}).status_code == 400
    assert alice.get("/api/chat/search").json() == {"error": "q is required"}
    for q in ['"', "canary OR", "*(", "NEAR(x", "😀😀😀"]:
        assert alice.get("/api/chat/search", params={"q": q}).status_code == 200, q
    assert alice.get("/api/chat/search", params={"q": "a\x00b"}).status_code == 400  # NUL: a 400 everywhere


def test_bad_input(chat):
    _srv, _clock, api = chat
    alice = api["alice"]

    def create(payload):
        return alice.post("/api/chat/channels", json=payload)
    assert create({"type": "dm"}).json() == {"error": "identity required for DM"}
    assert create({"type": "dm", "identity": "nobody"}).status_code == 400
    assert create({"type": "dm", "identity": "alice"}).status_code == 400
    assert create({"type": "dm", "identity": 5}).status_code == 400
    for payload in [{"type": "group", "members": ["bob"]}, {"type": "group", "name": "x"},
                    {"type": "group", "name": "x", "members": "bob"}, {"type": "group", "name": " ", "members": ["bob"]}]:
        assert create(payload).json() == {"error": "name and members required for group chat"}, payload
    assert create({"type": "group", "name": "n" * 101, "members": ["bob"]}).status_code == 400
    assert create({"type": "group", "name": "x", "members": [5]}).status_code == 400
    assert create({"type": "room"}).status_code == 400
    assert create({}).status_code == 400
    channel = group(alice)
    for body in [{}, {"body": "   "}, {"body": 5}, {"body": "x" * 10_001}]:
        response = alice.post(f"/api/chat/channels/{channel}/messages", json=body)
        assert response.status_code == 400, body
    assert alice.post(f"/api/chat/channels/{channel}/messages", json={"body": ""}).json() == {"error": "body required"}
    assert alice.get(f"/api/chat/channels/{channel}/messages").json() == {"messages": []}
