"""Who may receive mail, checked by the send's own insert: the rule of identities.is_known, written once
as SQL (KNOWN_SQL), on both backends. A refused send writes neither a message nor an event."""
from __future__ import annotations

import asyncio
import re

import pytest

from coordserver.domain import identities, kinds, messages, users
from coordserver.errors import Invalid
from coordserver.events import log
from coordserver.models import Event, Message
from coordserver.db import Store
from coordserver.timeutil import FrozenClock
from tests.helpers import MergeWatch
from tests.server.domain.conftest import KNOWN, START

FIELDS = {"title": "hello"}


def counts() -> tuple[int, int]:
    """Messages and logged events (ids a failed statement took are skipped, so not the latest id)."""
    return Message.select().count(), Event.select().count()


def issue(identity: str) -> None:
    identities.issue_token(identity, False, "agent", "admin")


@pytest.mark.parametrize("recipient, setup", [
    ("bob", None),                      # an environment identity without a users row
    ("dave", issue),                    # an identity that holds a token
    ("erin", identities.ensure_user),   # a users row, not archived
])
async def test_known_recipients_receive(rules_store, recipient, setup):
    if setup:
        await rules_store.write(setup, recipient)
    assert await rules_store.read(identities.is_known, recipient, KNOWN)
    sent = await rules_store.write(messages.send, "alice", recipient, FIELDS, KNOWN)
    assert (sent["recipient"], sent["status"]) == (recipient, "unread")
    assert await rules_store.read(counts) == (1, 1)


@pytest.mark.parametrize("dedupe_key", [None, "once"])
async def test_unknown_and_archived_recipients_are_refused_and_nothing_is_written(rules_store, dedupe_key):
    await rules_store.write(issue, "frank")
    await rules_store.write(users.admin_update, "frank", {"archivedAt": "2026-03-01T00:00:00Z"})
    before = await rules_store.read(counts)
    for recipient in ("nobody", "frank"):
        assert not await rules_store.read(identities.is_known, recipient, KNOWN)
        with pytest.raises(Invalid, match="Invalid recipient mailbox"):
            await rules_store.write(messages.send, "alice", recipient, {**FIELDS, "dedupe_key": dedupe_key}, KNOWN)
    assert await rules_store.read(counts) == before


async def test_an_archived_environment_identity_is_refused(rules_store):
    await rules_store.write(identities.ensure_user, "carol")
    await rules_store.write(users.admin_update, "carol", {"archivedAt": "2026-03-01T00:00:00Z"})
    with pytest.raises(Invalid, match="Invalid recipient mailbox"):
        await rules_store.write(messages.send, "alice", "carol", FIELDS, KNOWN)
    unarchived = await rules_store.write(users.admin_update, "carol", {"archivedAt": None})
    assert unarchived["user"]["archivedAt"] is None
    assert (await rules_store.write(messages.send, "alice", "carol", FIELDS, KNOWN))["recipient"] == "carol"


# --- sends queued together (stored by one statement per table, one on PostgreSQL: db.merges) -------

def logged_messages() -> list[tuple[int, int, str, list[str]]]:
    """(event id, its messageId, recipient, targets) for every message event, in log order."""
    events = log.range_after(0, None, 1000)
    return [(event_id, data["messageId"], data["recipient"], audience)
            for event_id, event_type, data, _to_all, audience in events if event_type == "message"]


def message_rows() -> dict[int, tuple]:
    return {row[0]: row[1:] for row in Message.select(Message.id, Message.recipient, Message.sender, Message.title,
                                                      Message.urgent, Message.thread_id, Message.body).tuples()}


async def test_sends_queued_together_each_get_their_own_answer(rules_store, monkeypatch):
    watch = MergeWatch(monkeypatch, messages.send)
    await rules_store.write(identities.ensure_user, "gone")
    await rules_store.write(users.admin_update, "gone", {"archivedAt": "2026-03-01T00:00:00Z"})
    await rules_store.write(kinds.declare_env_agents, frozenset({"alice"}))
    committed: list[tuple] = []
    rules_store.on_commit = lambda max_event, effects: committed.append((max_event, effects))
    event_types: list[str] = []
    rules_store.on_events = event_types.extend

    logged_before = max(event_id for event_id, *_ in await rules_store.read(log.range_after, 0, None, 1000))
    recipients = ["bob", "nobody", "carol", "gone", *["bob", "carol"] * 12]
    # values travel to PostgreSQL as one JSON parameter (sql.json_rows): quotes, escapes and non-ASCII arrive as sent
    body = 'b{} "quoted" \\ back\\slash\nline \u2713 \U0001f600 %s ? $1'.format
    calls = [rules_store.write(messages.send, "alice", to, {"title": f"t{i}", "urgent": i % 2 == 0, "body": body(i),
                                                            "thread_id": f"th{i}", "metadata": {"i": i},
                                                            "reply_to_message_id": i + 100}, KNOWN)
             for i, to in enumerate(recipients)]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)

    refused = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, Exception)]
    assert refused == [1, 3] and all(str(outcomes[i]) == "Invalid recipient mailbox" for i in refused)
    sent = [outcome for outcome in outcomes if not isinstance(outcome, Exception)]
    rows = await rules_store.read(message_rows)
    assert sorted(rows) == sorted(m["id"] for m in sent)
    for i, outcome in enumerate(outcomes):
        if i not in refused:
            assert rows[outcome["id"]] == (recipients[i], "alice", f"t{i}", i % 2 == 0, f"th{i}", body(i))
            assert outcome == {
                "id": outcome["id"], "recipient": recipients[i], "sender": "alice", "title": f"t{i}", "body": body(i),
                "status": "unread", "urgent": i % 2 == 0, "createdAt": "2026-03-07T12:00:00.000Z", "viewedAt": None,
                "threadId": f"th{i}", "replyToMessageId": i + 100, "dedupeKey": None, "metadata": {"i": i},
                "responseWaiting": False, "waitingResponder": None, "waitingSince": None, "fromIsAgent": True}
    logged = await rules_store.read(logged_messages)
    assert [(message_id, recipient, targets) for _, message_id, recipient, targets in logged] == \
        sorted((m["id"], m["recipient"], [m["recipient"]]) for m in sent)
    # the log goes on where it stood, as one by one: no id skipped, none taken twice
    assert [event_id for event_id, *_ in logged] == list(range(logged_before + 1, logged_before + 1 + len(sent)))
    events = {data["messageId"]: data for _id, kind, data, _to_all, _audience in
              await rules_store.read(log.range_after, 0, None, 1000) if kind == "message"}
    assert events == {m["id"]: {"type": "message", "recipient": m["recipient"], "sender": "alice",
                                 "messageId": m["id"], "title": m["title"], "urgent": m["urgent"]} for m in sent}
    # the batch announced its events once, as the newest, and each committed send its recipient's wake pulse
    announced = [event_id for event_id, _ in committed if event_id is not None]
    assert max(announced) == logged[-1][0] and len(announced) < len(sent)
    assert sorted(effect[1]["identity"] for _, effects in committed for effect in effects) == \
        sorted(m["recipient"] for m in sent)
    assert event_types == ["message"] * len(sent)  # each unit told what it logged
    assert max(watch.merged) > 1 and watch.failed == [] and watch.unmerged == []  # they did run merged


async def test_a_send_that_breaks_the_merged_statement_fails_alone(pg_cluster):
    """PostgreSQL, which refuses a value over its column's width (SQLite stores it)."""
    store = Store(pg_cluster.create_database(), FrozenClock(START))
    store.open()
    try:
        too_long = "x" * 101  # over thread_id's column width: the database refuses the row
        calls = [store.write(messages.send, "alice", "bob", {"title": f"t{i}", "thread_id": too_long if i == 3 else None},
                             KNOWN) for i in range(12)]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        assert [i for i, outcome in enumerate(outcomes) if isinstance(outcome, Exception)] == [3]
        assert await store.read(counts) == (11, 11)
    finally:
        store.close()


def test_the_wire_message_is_one_shape():
    """The Message built in Python (message_json, search_row) and by the database (the inbox page) come
    from messages.MESSAGE_WIRE, and the OpenAPI declaration (schemas.messages.Message) has its fields."""
    from coordserver.domain import messages as wire
    from coordserver.schemas.messages import Message, SearchRow
    columns = [column for column, _kind in wire.MESSAGE_WIRE]
    assert list(Message.__struct_fields__) == columns
    assert list(SearchRow.__struct_fields__) == columns
    row = (None,) * len(columns)
    assert list(wire.message_json(row)) == [wire.camel(c) for c in columns]
    assert list(wire.search_row(row)) == columns
    keys = {True: r"(?:\(|, )'(\w+)', ", False: r' AS "(\w+)"'}  # json_object's pairs; row_to_json's column names
    for sqlite in (True, False):
        assert re.findall(keys[sqlite], wire._message_json_sql(sqlite)) == [wire.camel(c) for c in columns]


async def test_sends_with_one_dedupe_key_queued_together_store_one_message(rules_store):
    """A send with a dedupe key is never merged (the merged statement does not look for an earlier one): of
    sends queued together with one key, one is stored and every one is answered with it."""
    calls = [rules_store.write(messages.send, "alice", "bob",
                               {"title": f"t{i}", "dedupe_key": "deploy-42" if i % 2 else None}, KNOWN)
             for i in range(8)]
    outcomes = await asyncio.gather(*calls)
    keyed = [outcome for i, outcome in enumerate(outcomes) if i % 2]
    assert len({outcome["id"] for outcome in keyed}) == 1 and keyed[0]["dedupeKey"] == "deploy-42"
    assert len({outcome["id"] for outcome in outcomes}) == 5
    assert len(await rules_store.read(message_rows)) == 5
