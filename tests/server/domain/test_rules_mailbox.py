"""The mailbox through the store, no HTTP, on both backends (over HTTP: tests/server/api/test_messages.py): a
message and its event whole, what a send announces, repeats of a dedupeKey, replies, acks, pending replies, the
inbox's two orders and their cursors, the sent list and search, each as a caller sees it. The mutation run of
messages.py uses these with test_rules_messages.py."""
from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta

import peewee as pw
import pytest

from coordserver.domain import identities, kinds, messages, users
from coordserver.errors import Invalid, NotFound
from coordserver.events.channels import EPHEMERAL, STREAM_HINTS, WAKE, WAKE_CHANGED
from coordserver.models import Message
from coordserver.timeutil import to_db
from tests.server.domain.conftest import KNOWN, START, logged_after, published

AT = "2026-03-07T12:00:00.000Z"


def wire(message_id: int, **fields) -> dict:
    """A wire Message as a send answers it: unread, nothing waiting on it."""
    base = {"id": message_id, "recipient": "bob", "sender": "alice", "title": "hello", "body": "", "status": "unread",
            "urgent": False, "createdAt": AT, "viewedAt": None, "threadId": None, "replyToMessageId": None,
            "dedupeKey": None, "metadata": None, "responseWaiting": False, "waitingResponder": None,
            "waitingSince": None, "fromIsAgent": False}
    return {**base, **fields}


def send(store, sender="alice", recipient="bob", **fields):
    return store.write(messages.send, sender, recipient, {"title": "hello", **fields}, KNOWN)


def counts() -> int:
    return Message.select().count()


def inbox(store, identity, status=None, limit=50, cursor=None):
    async def page():
        text, total, next_cursor = await store.read(messages.inbox_page, identity, status, limit, cursor)
        return json.loads(text), total, next_cursor
    return page()


def cursor_of(*parts) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


# --- sending ----------------------------------------------------------------------------------

async def test_a_send_answers_the_message_whole_logs_its_event_and_pulses_the_recipient(store):
    sent = await send(store, body="words", urgent=1, thread_id="th", reply_to_message_id=None,
                      metadata={"k": [1, "two"]})
    assert sent == wire(sent["id"], body="words", urgent=True, threadId="th", metadata={"k": [1, "two"]})
    assert await store.read(logged_after) == [("message", {
        "type": "message", "recipient": "bob", "sender": "alice", "messageId": sent["id"], "title": "hello",
        "urgent": True}, ["bob"])]
    assert published(store, WAKE) == [{"identity": "bob"}]
    assert published(store, WAKE_CHANGED) == []
    # what was stored reads back the same
    page, total, _ = await inbox(store, "bob")
    assert (page, total) == ([sent], 1)


async def test_a_send_without_body_or_urgency_is_an_empty_body_not_urgent(store):
    sent = await store.write(messages.send, "alice", "bob", {"title": "t", "body": None, "urgent": None}, KNOWN)
    assert sent == wire(sent["id"], title="t")


async def test_a_message_from_an_agent_says_so(store):
    await store.write(kinds.declare_env_agents, frozenset({"alice"}))
    sent = await send(store)
    assert sent["fromIsAgent"] is True
    back = await send(store, sender="bob", recipient="alice", dedupe_key="k")
    assert back["fromIsAgent"] is False
    page, _, _ = await inbox(store, "bob")
    assert [m["fromIsAgent"] for m in page] == [True]


async def test_a_message_to_oneself_changes_the_wake_without_a_pulse(store):
    sent = await send(store, recipient="alice")
    assert sent["recipient"] == "alice"
    assert published(store, WAKE) == []
    assert published(store, WAKE_CHANGED) == [{"identity": "alice"}]


async def test_a_repeated_dedupe_key_answers_the_first_message_and_writes_nothing(store):
    first = await send(store, dedupe_key="once", body="first", metadata={"n": 1})
    assert first == wire(first["id"], body="first", dedupeKey="once", metadata={"n": 1})
    store.clock.advance(minutes=1)
    again = await send(store, dedupe_key="once", body="second", title="other")
    assert again == first
    assert await store.read(counts) == 1
    assert len(await store.read(logged_after)) == 1
    # the key is per sender and recipient
    to_carol = await send(store, recipient="carol", dedupe_key="once")
    from_carol = await send(store, sender="carol", dedupe_key="once")
    assert len({first["id"], to_carol["id"], from_carol["id"]}) == 3
    assert await store.read(counts) == 3


# --- replies ------------------------------------------------------------------------------------

async def test_a_reply_goes_to_the_sender_in_the_thread_of_the_original(store):
    original = await send(store, body="question")
    store.clock.advance(minutes=1)
    answer = await store.write(messages.reply, "bob", original["id"], "answer")
    assert answer == wire(answer["id"], recipient="alice", sender="bob", title="Re: hello", body="answer",
                          createdAt="2026-03-07T12:01:00.000Z", threadId=str(original["id"]),
                          replyToMessageId=original["id"])
    assert (await store.read(logged_after))[-1] == ("message", {
        "type": "message", "recipient": "alice", "sender": "bob", "messageId": answer["id"], "title": "Re: hello",
        "urgent": False}, ["alice"])
    assert published(store, WAKE) == [{"identity": "bob"}, {"identity": "alice"}]
    # a reply to the reply keeps the thread and one "Re: "
    again = await store.write(messages.reply, "alice", answer["id"], "thanks")
    assert (again["title"], again["threadId"], again["replyToMessageId"], again["recipient"]) == \
        ("Re: hello", str(original["id"]), answer["id"], "bob")


async def test_a_reply_keeps_an_existing_thread_and_is_cut_to_the_limits(store):
    original = await send(store, title="t" * 255, thread_id="th-1")
    answer = await store.write(messages.reply, "bob", original["id"], "b" * 10_001)
    assert answer["title"] == ("Re: " + "t" * 255)[:255]
    assert answer["body"] == "b" * 10_000
    assert answer["threadId"] == "th-1"


async def test_a_reply_to_a_message_not_received_or_from_an_archived_sender_is_refused(store):
    original = await send(store)
    for identity, message_id in (("alice", original["id"]), ("carol", original["id"]), ("bob", original["id"] + 1)):
        with pytest.raises(NotFound) as refused:
            await store.write(messages.reply, identity, message_id, "x")
        assert str(refused.value) == "Message not found"
    await store.write(identities.ensure_user, "alice")
    await store.write(users.admin_update, "alice", {"archivedAt": "2026-03-01T00:00:00Z"})
    with pytest.raises(Invalid) as refused:
        await store.write(messages.reply, "bob", original["id"], "x")
    assert str(refused.value) == "Invalid recipient mailbox"
    assert await store.read(counts) == 1


# --- acknowledging and pending -------------------------------------------------------------------

def inbox_checks(store) -> list[dict]:
    """Acks on EPHEMERAL (they change wakes), reads and searches on STREAM_HINTS, in the order published."""
    return [payload for channel, payload in store.published if channel in (EPHEMERAL, STREAM_HINTS)]


def check(identity: str, action: str) -> dict:
    return {"type": "inbox_check", "to": [identity], "data": {"type": "inbox_check", "mailbox": identity,
                                                                 "action": action}}


async def test_an_ack_marks_read_once_and_keeps_the_first_viewed_time(store):
    sent = await send(store)
    store.clock.advance(minutes=2)
    acked = await store.write(messages.ack, "bob", sent["id"])
    assert acked == {**sent, "status": "read", "viewedAt": "2026-03-07T12:02:00.000Z"}
    store.clock.advance(minutes=2)
    assert await store.write(messages.ack, "bob", sent["id"]) == acked
    assert inbox_checks(store) == [check("bob", "ack"), check("bob", "ack")]
    for identity, message_id in (("alice", sent["id"]), ("bob", sent["id"] + 1)):
        with pytest.raises(NotFound) as refused:
            await store.write(messages.ack, identity, message_id)
        assert str(refused.value) == "Message not found"
    page, _, _ = await inbox(store, "bob")
    assert page == [acked]


async def test_acking_many_marks_ones_own_and_names_the_rest(store):
    first = await send(store)
    second = await send(store)
    others = await send(store, recipient="carol")
    store.clock.advance(minutes=1)
    await store.write(messages.ack, "bob", first["id"])
    store.clock.advance(minutes=1)
    missing = others["id"] + 10
    answer = await store.write(messages.ack_many, "bob", [second["id"], others["id"], second["id"], missing,
                                                          first["id"]])
    assert answer == {"success": [second["id"], first["id"]], "notFound": [others["id"], missing]}
    page, _, _ = await inbox(store, "bob")
    assert {m["id"]: (m["status"], m["viewedAt"]) for m in page} == {
        first["id"]: ("read", "2026-03-07T12:01:00.000Z"), second["id"]: ("read", "2026-03-07T12:02:00.000Z")}
    carol, _, _ = await inbox(store, "carol")
    assert [(m["status"], m["viewedAt"]) for m in carol] == [("unread", None)]
    assert await store.write(messages.ack_many, "bob", []) == {"success": [], "notFound": []}
    assert await store.write(messages.ack_many, "bob", [missing]) == {"success": [], "notFound": [missing]}
    assert inbox_checks(store) == [check("bob", "ack")] * 2 + [check("bob", "list"), check("carol", "list")] + \
        [check("bob", "ack")] * 2


async def test_a_pending_reply_keeps_its_first_time_until_cleared(store):
    sent = await send(store)
    other = await send(store)
    elsewhere = await send(store, recipient="carol")
    store.clock.advance(minutes=1)
    waiting = await store.write(messages.set_pending, "bob", sent["id"], True)
    assert waiting == {**sent, "responseWaiting": True, "waitingResponder": "bob",
                       "waitingSince": "2026-03-07T12:01:00.000Z"}
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}]
    store.clock.advance(minutes=1)
    assert await store.write(messages.set_pending, "bob", sent["id"], True) == waiting
    cleared = await store.write(messages.set_pending, "bob", sent["id"], False)
    assert cleared == sent
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}] * 3
    with pytest.raises(NotFound) as refused:
        await store.write(messages.set_pending, "alice", sent["id"], True)
    assert str(refused.value) == "Message not found"
    assert published(store, WAKE_CHANGED) == [{"identity": "bob"}] * 3
    # only that message changed, each time
    await store.write(messages.set_pending, "bob", sent["id"], True)
    assert (await inbox(store, "carol"))[0] == [elsewhere]
    await store.write(messages.set_pending, "carol", elsewhere["id"], True)
    await store.write(messages.set_pending, "bob", sent["id"], False)
    assert (await inbox(store, "bob"))[0] == [other, sent]
    assert (await inbox(store, "carol"))[0][0]["responseWaiting"] is True


# --- the inbox ------------------------------------------------------------------------------------

async def test_the_inbox_pages_newest_first_without_overlap_or_gaps(store):
    sent = []
    for i in range(5):
        sent.append(await send(store, title=f"message {i} of five", urgent=i == 1))
        if i != 2:  # two messages at one instant: the id breaks the tie
            store.clock.advance(seconds=1)
    await send(store, recipient="carol")
    newest = list(reversed(sent))
    page, total, cursor = await inbox(store, "bob", limit=2)
    assert (page, total) == (newest[:2], 5)
    assert cursor is not None
    page, total, cursor = await inbox(store, "bob", limit=2, cursor=cursor)
    assert (page, total) == (newest[2:4], 5)
    page, total, cursor = await inbox(store, "bob", limit=2, cursor=cursor)
    assert (page, total, cursor) == (newest[4:], 5, None)
    page, total, cursor = await inbox(store, "bob", limit=5)
    assert (page, total, cursor) == (newest, 5, None)
    assert inbox_checks(store) == [check("bob", "list")] * 4


async def test_the_unread_inbox_pages_urgent_first_then_oldest(store):
    sent = []
    for i in range(6):
        sent.append(await send(store, title=f"m{i}", urgent=i in (1, 3, 4)))
        store.clock.advance(seconds=1)
    await store.write(messages.ack, "bob", sent[5]["id"])
    await store.write(messages.ack, "bob", sent[4]["id"])
    expected = [sent[1], sent[3], sent[0], sent[2]]
    pages = []
    cursor = None
    for _ in range(4):
        page, total, cursor = await inbox(store, "bob", "unread", 1, cursor)
        assert total == 4
        pages += page
        if cursor is None:
            break
    assert pages == expected and cursor is None
    # a page of two starting inside the urgent ones, and one starting after them
    page, _, after_urgent = await inbox(store, "bob", "unread", 2)
    assert page == expected[:2]
    page, total, cursor = await inbox(store, "bob", "unread", 2, after_urgent)
    assert (page, total, cursor) == (expected[2:], 4, None)
    read, total, _ = await inbox(store, "bob", "read")
    assert ([m["id"] for m in read], total) == ([sent[5]["id"], sent[4]["id"]], 2)


async def test_an_empty_inbox_page_still_counts(store):
    assert await inbox(store, "bob") == ([], 0, None)
    await send(store)
    page, total, cursor = await inbox(store, "bob", limit=1)
    assert (len(page), total, cursor) == (1, 1, None)
    last = cursor_of("newest", 0, "2026-03-07 12:00:00", page[0]["id"])
    assert await inbox(store, "bob", cursor=last) == ([], 1, None)


async def test_times_are_milliseconds_truncated_on_every_path(store):
    store.clock.set(START + timedelta(microseconds=123_999))
    sent = await send(store)
    assert sent["createdAt"] == "2026-03-07T12:00:00.123Z"
    page, _, _ = await inbox(store, "bob")
    assert page == [sent]
    assert (await store.read(messages.sent, "alice", 5))["messages"] == [sent]
    store.clock.set(START + timedelta(seconds=1))
    other = await send(store)
    page, _, _ = await inbox(store, "bob")
    assert page == [other, sent]
    assert (await store.read(messages.sent, "alice", 5))["messages"] == [other, sent]


async def test_metadata_the_database_cannot_encode_is_read_leniently(store):
    good = await send(store, metadata={"a": 1})
    bad = await send(store, metadata={"b": 2})
    none = await send(store)
    worse = await send(store, metadata={"c": 3})

    def store_nan() -> None:
        Message.update(metadata=pw.SQL("'{\"b\": NaN}'")).where(Message.id == bad["id"]).execute()
        Message.update(metadata=pw.SQL("'[Infinity, 1]'")).where(Message.id == worse["id"]).execute()
    await store.write(store_nan)
    page, _, _ = await inbox(store, "bob")
    assert page == [{**worse, "metadata": [None, 1]}, none, {**bad, "metadata": {"b": None}}, good]


async def test_a_cursor_of_another_order_or_mangled_is_refused(store):
    await send(store)
    good = cursor_of("newest", 0, "2026-03-07 12:00:00", 1)
    assert (await inbox(store, "bob", cursor=good))[1] == 1
    for cursor, status in ((good, "unread"), (cursor_of("unread", 1, "2026-03-07 12:00:00", 1), None),
                           (cursor_of("unread", 2, "2026-03-07 12:00:00", 1), "unread"),
                           (cursor_of("newest", 0, "2026-03-07 12:00:00", True), None),
                           (cursor_of("newest", 0, "2026-03-07 12:00:00", "1"), None),
                           (cursor_of("newest", 0, "2026-03-07 12:00:00", -1), None),
                           (cursor_of("newest", 0, "2026-03-07 12:00:00", 2**31), None),
                           (cursor_of("newest", 0, "yesterday", 1), None),
                           (cursor_of("newest", 0, 5, 1), None),
                           (cursor_of("newest", 0, "2026-03-07 12:00:00"), None),
                           ("not base64 at all!", None), (base64.urlsafe_b64encode(b"\xff\xfe").decode(), None),
                           (base64.urlsafe_b64encode(b"[1e999999]").decode(), None)):
        with pytest.raises(Invalid) as refused:
            await inbox(store, "bob", status, cursor=cursor)
        assert str(refused.value) == "Invalid cursor"
    edge = cursor_of("newest", 0, "2026-03-07 12:00:00", 2**31 - 1)  # the largest id stored
    assert (await inbox(store, "bob", cursor=edge))[0] != []
    zero = cursor_of("unread", 0, "2026-03-07 12:00:00", 0)
    assert (await inbox(store, "bob", "unread", cursor=zero))[1] == 1


# --- sent and search ---------------------------------------------------------------------------------

async def test_the_sent_list_is_the_senders_newest_first(store):
    first = await send(store)
    store.clock.advance(seconds=1)
    second = await send(store, recipient="carol")
    await send(store, sender="carol")
    assert await store.read(messages.sent, "alice", 10) == {"messages": [second, first]}
    assert await store.read(messages.sent, "alice", 1) == {"messages": [second]}


async def test_search_finds_every_word_in_ones_own_mail_newest_first(store):
    first = await send(store, title="deploy plan", body="the green release")
    store.clock.advance(seconds=1)
    second = await send(store, title="release notes", body="green light")
    store.clock.advance(seconds=1)
    await send(store, title="other", body="nothing here")
    await send(store, recipient="carol", title="green release")

    def row(message: dict) -> dict:
        return {column: message[messages.camel(column)] for column, _kind in messages.MESSAGE_WIRE}
    found = await store.read(messages.search, "bob", "green release", 10)
    assert found == {"messages": [row(second), row(first)]}
    assert await store.read(messages.search, "bob", "green release", 1) == {"messages": [row(second)]}
    assert await store.read(messages.search, "bob", "deploy green", 10) == {"messages": [row(first)]}
    assert await store.read(messages.search, "bob", "  ", 10) == {"messages": []}
    # newest first by time, then by id
    store.clock.set(START - timedelta(hours=1))
    earlier = await send(store, title="green release, written earlier", body="")
    store.clock.set(START + timedelta(seconds=1))
    tied = await send(store, title="green release", body="at second's instant")
    assert await store.read(messages.search, "bob", "green release", 10) == \
        {"messages": [row(tied), row(second), row(first), row(earlier)]}
    assert inbox_checks(store) == [check("bob", "search")] * 5


def test_the_row_builders_are_the_wire_literal():
    """message_json and search_row are generated at import (messages._row_builder): a builder made afresh gives
    each kind of column its reading, under its name, with its documentation."""
    row = (7, "bob", "alice", "t", "b", "read", 1, "2026-03-07 12:00:00.123456", None, "th", 3, "k", '{"a": NaN}',
           0, "bob", "2026-03-07 12:01:00", 1)
    keys = [f"k{i}" for i in range(len(row))]
    built = messages._row_builder("built", keys, "Its words.")
    assert built(row) == dict(zip(keys, [7, "bob", "alice", "t", "b", "read", True, "2026-03-07T12:00:00.123Z", None,
                                         "th", 3, "k", {"a": None}, False, "bob", "2026-03-07T12:01:00.000Z", True]))
    assert (built.__name__, built.__doc__, built.__module__) == ("built", "Its words.", "coordserver.domain.messages")
    assert messages.message_json(row)["createdAt"] == "2026-03-07T12:00:00.123Z"
    assert messages.search_row(row)["created_at"] == "2026-03-07T12:00:00.123Z"


async def test_a_cursor_is_the_last_rows_key_compact_json_unpadded(store):
    store.clock.set(START + timedelta(microseconds=123_456))
    first = await send(store, title="two words", urgent=True)
    store.clock.set(START + timedelta(seconds=1))
    await send(store, title="more words here", urgent=True)
    for status, order in ((None, "newest"), ("unread", "unread")):
        page, _, cursor = await inbox(store, "bob", status, 1)
        assert len(page) == 1 and "=" not in cursor
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        key = [order, 1, "2026-03-07 12:00:01", page[0]["id"]] if order == "newest" else \
            [order, 1, "2026-03-07 12:00:00.123456", first["id"]]
        assert raw == json.dumps(key, separators=(",", ":"))


def test_every_cursor_decodes_whatever_its_length():
    """Cursors are unpadded base64: decode_cursor pads each length back (ids and times of every length)."""
    for message_id in (*range(1, 41), 12345, 2**31 - 1):
        for created in ("2026-03-07 12:00:00", "2026-03-07 12:00:00.5", "2026-03-07 12:00:00.123456"):
            for order, urgent in (("newest", 0), ("unread", 1)):
                cursor = messages._encode_cursor(order, (message_id, None, None, None, None, None, urgent, created))
                assert "=" not in cursor
                assert messages.decode_cursor(cursor, order) == (
                    urgent, to_db(datetime.fromisoformat(created)), message_id)
