"""The mailbox: send, inbox (keyset paging), ack, reply, pending and full-text search.

Every function runs inside a Store unit of work. Writes log their `message` event and queue the
recipient's wake pulse in the same unit, so a committed message is always announced and a failed
one never is.
"""
from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeAlias

import peewee as pw

from .. import db, jsonstrict
from ..jsonstrict import JSONObject
from ..errors import Invalid, NotFound
from ..events import log
from ..models import Guard, Message
from ..sql import json_rows, json_rows_param, serial_sequences
from ..timeutil import iso, to_db
from . import fulltext, guards, kinds
from .identities import KNOWN_SQL, archived_among, is_known, known_params, known_sql
from ..events.channels import EPHEMERAL, STREAM_HINTS, WAKE_CHANGED, EphemeralPayload, WakeChangedPayload
from . import wake_signal

TITLE_MAX = 255
BODY_MAX = 10_000
THREAD_MAX = 100
DEDUPE_MAX = 255
BATCH_ACK_MAX = 1000

# The hot paths (send, inbox, sent) use fixed SQL text with cached placeholders and build the wire
# JSON from row tuples: Peewee's per-call SQL generation and model instantiation cost more than the
# queries themselves (see bench/messages.py). Everything else uses Peewee with `.tuples()`.
#
# The wire Message, written once: its columns in wire order, each with how a stored value becomes the
# wire's. message_json, search_row and the database-encoded inbox row (_message_json_sql) are made from
# it; schemas/messages.py declares the same fields (tests/server/api/test_messages.py holds them equal).
PLAIN, BOOL, TIME, JSON = "plain", "bool", "time", "json"
MESSAGE_WIRE = (("id", PLAIN), ("recipient", PLAIN), ("sender", PLAIN), ("title", PLAIN), ("body", PLAIN),
                ("status", PLAIN), ("urgent", BOOL), ("created_at", TIME), ("viewed_at", TIME), ("thread_id", PLAIN),
                ("reply_to_message_id", PLAIN), ("dedupe_key", PLAIN), ("metadata", JSON),
                ("response_waiting", BOOL), ("waiting_responder", PLAIN), ("waiting_since", TIME),
                ("from_is_agent", BOOL))
# Wire fields that are no column of the row: SQL over it (the sender's kind, domain/kinds.py). Unqualified:
# the inbox's statements and peewee's aliased search select read it alike.
_DERIVED = {"from_is_agent": kinds.is_agent_sql("sender")}
_FIELDS = tuple(column for column, _kind in MESSAGE_WIRE)
_COLUMNS = tuple(pw.SQL(_DERIVED[name]) if name in _DERIVED else getattr(Message, name) for name in _FIELDS)
_SELECT = "SELECT " + ", ".join(_DERIVED.get(name, name) for name in _FIELDS) + " FROM message"
_INSERT_COLUMNS = ("INSERT INTO message (recipient, sender, title, body, status, urgent, created_at, thread_id, "
                   "reply_to_message_id, dedupe_key, metadata, response_waiting) ")
_INSERT = _INSERT_COLUMNS + "VALUES (?, ?, ?, ?, 'unread', ?, ?, ?, ?, ?, ?, ?)"
# A send checks its recipient in the insert itself: nothing is inserted for an unknown one.
_INSERT_TO_KNOWN = _INSERT_COLUMNS + "SELECT ?, ?, ?, ?, 'unread', ?, ?, ?, ?, ?, ?, ? WHERE " + KNOWN_SQL


_database = db.current_database
_rows = db.sql_rows


# --- wire shapes -----------------------------------------------------------------------------

def _wire_time(value: datetime | str | None) -> str | None:
    """iso() for raw column values: SQLite hands back the stored naive-UTC text, PostgreSQL a datetime."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) in (19, 26) and value[10] == " ":
        return f"{value[:10]}T{value[11:19]}.{value[20:23] if len(value) == 26 else '000'}Z"
    return iso(value)


def _metadata(value: Any) -> Any:
    return jsonstrict.loads_lenient(value) if isinstance(value, str) else value


def camel(column: str) -> str:
    head, *rest = column.split("_")
    return head + "".join(word.title() for word in rest)


def _row_builder(name: str, keys: list[str], doc: str) -> Callable[[db.Row], JSONObject]:
    """A function of one row tuple (in _FIELDS order) returning the dict of `keys`, generated once from
    MESSAGE_WIRE as the literal it would be written as by hand: the send and inbox paths are hot, and a
    loop over the table per row would cost them."""
    read = {PLAIN: "r[{i}]", BOOL: "bool(r[{i}])", TIME: "_wire_time(r[{i}])", JSON: "_metadata(r[{i}])"}
    items = ", ".join(f"{key!r}: {read[kind].format(i=i)}" for i, (key, (_column, kind)) in
                      enumerate(zip(keys, MESSAGE_WIRE)))
    namespace: dict[str, Any] = {"_wire_time": _wire_time, "_metadata": _metadata}
    exec(f"def {name}(r):\n    return {{{items}}}\n", namespace)  # noqa: S102 (source built above, no input)
    built: Callable[[db.Row], JSONObject] = namespace[name]
    built.__doc__, built.__module__ = doc, __name__
    return built


message_json = _row_builder("message_json", [camel(column) for column in _FIELDS],
                            "A row in _FIELDS order as the wire Message.")
search_row = _row_builder("search_row", list(_FIELDS), "The v1 snake_case row returned by search.")


# --- sending ---------------------------------------------------------------------------------

def _event_data(recipient: str, sender: str, title: str, urgent: bool) -> JSONObject:
    return {"type": "message", "recipient": recipient, "sender": sender, "messageId": None, "title": title,
            "urgent": urgent}


def _store(recipient: str, sender: str, title: str, body: str, urgent: bool, thread_id: str | None,
           reply_to: int | None, dedupe_key: str | None, metadata: Any,
           known: tuple[str, bool, str] | None = None) -> JSONObject:
    """Insert one unread message, log its `message` event and pulse the recipient's wake. `known`:
    known_params for the recipient, checked by the insert (Invalid if it is not a known identity)."""
    created = to_db(db.now())
    stored_metadata = Message.metadata.db_value(metadata)
    params = (recipient, sender, title, body, urgent, created, thread_id, reply_to, dedupe_key, stored_metadata, False)
    message_id = log.insert_and_append(
        _INSERT if known is None else _INSERT_TO_KNOWN, params if known is None else params + known,
        "message", _event_data(recipient, sender, title, urgent), "messageId", to=[recipient])
    if message_id is None:
        raise Invalid("Invalid recipient mailbox")
    agents = _delivered(sender, recipient)
    return _new_message_json(message_id, recipient, sender, title, body, urgent, created, thread_id, reply_to,
                             dedupe_key, stored_metadata, sender in agents)


def _delivered(sender: str, recipient: str, batch: _Batch | None = None) -> set[str]:
    """A message was stored: the loop guard counts it, then it enters the recipient's wake (a pulse, unless
    the sender wrote to itself or a guard holds their pulses). Returns which of the two are agents.
    `batch`: what the sends stored together have read once for all of them."""
    if batch is None:
        agents = kinds.agents_among((sender, recipient))
    else:
        agents = {identity for identity in (sender, recipient) if identity in batch.agents}
    view = batch.guards if batch is not None else None
    guards.after_mail(sender, recipient, agents, view)
    # A human's message has just cleared every guard holding the recipient: none can hold this pulse.
    wake_signal.enters_wake(recipient, sender, may_be_held=sender in agents, guard_view=view)
    return agents


@dataclass(frozen=True)
class _Batch:
    """Read once for the sends stored by one merged statement, instead of by each: which of their senders and
    recipients are agents, and the guards not cleared. On PostgreSQL the merged statement reads them itself
    (_BATCH_READ), which spares a batch two round trips."""

    agents: set[str]
    guards: guards.GuardView

    @classmethod
    def read(cls, identities: set[str]) -> _Batch:
        return cls(kinds.agents_among(identities), guards.view())


def _new_message_json(message_id: int, recipient: str, sender: str, title: str, body: str, urgent: bool,
                      created: datetime, thread_id: str | None, reply_to: int | None, dedupe_key: str | None,
                      stored_metadata: str | None, from_is_agent: bool) -> JSONObject:
    """The wire Message of a message just stored (unread, nothing waiting on it)."""
    return message_json((message_id, recipient, sender, title, body, "unread", urgent, created, None, thread_id,
                         reply_to, dedupe_key, stored_metadata, False, None, None, from_is_agent))


# A send's fields in _store's order: recipient, sender, title, body, urgent, thread, reply-to.
SendValues: TypeAlias = tuple[str, str, str, str, bool, str | None, int | None]


def _send_values(sender: str, recipient: str, fields: JSONObject) -> SendValues:
    """A send's fields in _store's order: recipient, sender, title, body, urgent, thread, reply-to."""
    return (recipient, sender, fields["title"], fields.get("body") or "", bool(fields.get("urgent")),
            fields.get("thread_id"), fields.get("reply_to_message_id"))


def _find_dedupe(sender: str, recipient: str, key: str) -> JSONObject | None:
    rows = _rows(_SELECT + " WHERE sender = ? AND recipient = ? AND dedupe_key = ?", (sender, recipient, key))
    return message_json(rows[0]) if rows else None


# Sends queued together, stored by a few statements for the lot (db.merges). PostgreSQL: ONE statement, one
# round trip instead of one per send; each known recipient's row gets its message and event ids from the
# sequences, then message, event and target rows are inserted from them. SQLite (no round trips, but each
# statement's steps release and retake the GIL, and Python pays for every statement it builds): the writer
# holds the write lock (BEGIN IMMEDIATE), so ids are taken from the tables' highest, as SQLite itself
# would take them, and each of the three tables gets one INSERT for the batch.
_MERGED_COLUMNS = (("ord", "integer"), ("recipient", "text"), ("sender", "text"), ("title", "text"), ("body", "text"),
                   ("urgent", "boolean"), ("created_at", "timestamp"), ("thread_id", "text"), ("reply_to", "bigint"),
                   ("metadata", "text"), ("data", "text"), ("env", "boolean"))


@lru_cache(maxsize=1)
def _merged_send_sql() -> str:
    return (f"WITH {serial_sequences(m='message', e='event')}, "
            f"v AS (SELECT x.*, nextval(s.m) AS mid, nextval(s.e) AS eid FROM s, {json_rows(_MERGED_COLUMNS)}"
            " WHERE " + known_sql("x.recipient", "x.env") + " ORDER BY x.ord), "
            "r AS (INSERT INTO message (id, recipient, sender, title, body, status, urgent, created_at, thread_id, "
            "reply_to_message_id, metadata, response_waiting) SELECT mid, recipient, sender, title, body, 'unread', "
            "urgent, created_at, thread_id, reply_to, metadata, false FROM v), "
            "e AS (INSERT INTO event (id, type, data, to_all, created_at) "
            f"SELECT eid, 'message', {log.id_filled_sql('mid', 'data')}, false, created_at FROM v), "
            "t AS (INSERT INTO event_target (identity, event) SELECT recipient, eid FROM v) "
            + _BATCH_READ)


# What _Batch.read would read, in the merged statement instead of two round trips after it: the guards not
# cleared (rows whose first column is NULL; listed first, so their columns' types are the union's), then each
# stored send's ord, ids and whether its sender and recipient are agents.
_GUARD_COLUMNS = len(Guard._meta.sorted_fields)
_BATCH_READ = (f"SELECT NULL, NULL, NULL, NULL, NULL, {db.every_column(Guard)} FROM guard {guards.UNCLEARED} "
               f"UNION ALL SELECT ord, mid, eid, {kinds.is_agent_sql('v.sender')}, {kinds.is_agent_sql('v.recipient')}, "
               + ", ".join(["NULL"] * _GUARD_COLUMNS) + " FROM v")


_SQLITE_MERGED_COLUMNS = ("id", "recipient", "sender", "title", "body", "urgent", "created_at", "thread_id",
                          "reply_to_message_id", "metadata", "env")


@lru_cache(maxsize=64)
def _sqlite_merged_insert(count: int) -> str:
    """The messages of `count` sends to known recipients, each with the id it was given; returns the ids stored."""
    columns = ", ".join(_SQLITE_MERGED_COLUMNS)
    rows = ", ".join(["(" + ", ".join(["?"] * len(_SQLITE_MERGED_COLUMNS)) + ")"] * count)
    return (f"WITH x({columns}) AS (VALUES {rows}) "
            "INSERT INTO message (id, recipient, sender, title, body, status, urgent, created_at, thread_id, "
            "reply_to_message_id, metadata, response_waiting) SELECT id, recipient, sender, title, body, 'unread', "
            "urgent, created_at, thread_id, reply_to_message_id, metadata, 0 FROM x WHERE "
            + known_sql("x.recipient", "x.env") + " RETURNING id")


@dataclass(frozen=True, slots=True)
class _Queued:
    """One queued send, its values as stored."""

    values: SendValues
    metadata: str | None
    to_environment_identity: bool


def _send_many(calls: list[tuple[Any, ...]]) -> list[Callable[[], JSONObject]]:
    """db.merges for `send`: the queued sends without a dedupeKey, stored together."""
    created = to_db(db.now())
    queued = [_Queued(_send_values(sender, recipient, fields), Message.metadata.db_value(fields.get("metadata")),
                      recipient in env_identities)
              for sender, recipient, fields, env_identities in calls]
    store = _stored_together_sqlite if db.is_sqlite(db.current_database()) else _stored_together_postgres
    ids, batch = store(queued, created)
    return [_finisher(send.values, created, send.metadata, ids.get(ordinal), batch)
            for ordinal, send in enumerate(queued)]


# Message and event ids by the ordinal of each send stored (a recipient that is not known stores none), and the
# batch's _Batch.
_Stored: TypeAlias = tuple[dict[int, tuple[int, int]], _Batch]


def _stored_together_postgres(queued: list[_Queued], created: datetime) -> _Stored:
    rows: list[list[Any]] = []
    marker = prefix = None
    for ordinal, send in enumerate(queued):
        recipient, sender, title, _body, urgent = send.values[:5]
        text, marker, prefix = log.id_filled(_event_data(recipient, sender, title, urgent), "messageId")
        rows.append([ordinal, *send.values[:5], created, *send.values[5:], send.metadata, text,
                     send.to_environment_identity])
    ids: dict[int, tuple[int, int]] = {}
    agents: set[str] = set()
    guard_rows = []
    for row in db.sql_rows(_merged_send_sql(), [json_rows_param(_MERGED_COLUMNS, rows), marker, prefix]):
        ordinal = row[0]
        if ordinal is None:
            guard_rows.append(row[5:])
            continue
        ids[ordinal] = (row[1], row[2])
        recipient, sender = queued[ordinal].values[:2]
        agents.update(identity for identity, agent in ((sender, row[3]), (recipient, row[4])) if agent)
    return ids, _Batch(agents, guards.view_of(guard_rows))


def _stored_together_sqlite(queued: list[_Queued], created: datetime) -> _Stored:
    """As _stored_together_postgres. Each send's message id is fixed by its place in the batch, so one to an
    unknown recipient leaves its id unused (as a sequence's gaps on PostgreSQL); events take no gaps."""
    highest_message, highest_event = db.highest_ids("message", "event")
    params: list[Any] = []
    for ordinal, send in enumerate(queued):
        params += [highest_message + 1 + ordinal, *send.values[:5], created, *send.values[5:], send.metadata,
                   send.to_environment_identity]
    stored = sorted(row[0] - highest_message - 1 for row in db.sql_rows(_sqlite_merged_insert(len(queued)), params))
    ids = {ordinal: (highest_message + 1 + ordinal, event_id)
           for event_id, ordinal in enumerate(stored, start=highest_event + 1)}
    events = []
    for ordinal, (message_id, event_id) in ids.items():
        recipient, sender, title, _body, urgent = queued[ordinal].values[:5]
        data = {**_event_data(recipient, sender, title, urgent), "messageId": message_id}
        events.append((event_id, "message", data, [recipient], created))
    if events:
        log.insert_numbered(events)
    return ids, _Batch.read({identity for send in queued for identity in send.values[:2]})


def _finisher(values: SendValues, created: datetime, metadata: str | None,
              ids: tuple[Any, ...] | None, batch: _Batch) -> Callable[[], JSONObject]:
    def finish() -> JSONObject:
        if ids is None:
            raise Invalid("Invalid recipient mailbox")
        message_id, event_id = ids
        recipient, sender, title, body, urgent, thread_id, reply_to = values
        db.note_event(event_id, "message")
        agents = _delivered(sender, recipient, batch)
        return _new_message_json(message_id, recipient, sender, title, body, urgent, created, thread_id, reply_to,
                                 None, metadata, sender in agents)
    return finish


def _without_dedupe_key(_sender: str, _recipient: str, fields: JSONObject, _env: frozenset[str]) -> bool:
    return fields.get("dedupe_key") is None


@db.merges(_send_many, when=_without_dedupe_key, on_sqlite=True)
def send(sender: str, recipient: str, fields: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    """`fields`: title, body, urgent, thread_id, reply_to_message_id, dedupe_key, metadata (already validated)."""
    key = fields.get("dedupe_key")
    values = (*_send_values(sender, recipient, fields), key, fields.get("metadata"))
    if key is None:
        return _store(*values, known=known_params(recipient, env_identities))
    if not is_known(recipient, env_identities):  # before a repeat is answered with the first message
        raise Invalid("Invalid recipient mailbox")
    first = _find_dedupe(sender, recipient, key)
    if first is not None:
        return first
    try:
        with _database().atomic():
            return _store(*values)
    except pw.IntegrityError:
        # A concurrent writer stored the same (sender, recipient, dedupeKey) first: its message wins.
        first = _find_dedupe(sender, recipient, key)
        if first is None:
            raise
        return first


def _own(message_id: int, identity: str) -> tuple[Any, ...]:
    rows = _rows(_SELECT + " WHERE id = ? AND recipient = ?", (message_id, identity))
    if not rows:
        raise NotFound("Message not found")
    return rows[0]


def reply(identity: str, message_id: int, body: str) -> JSONObject:
    original = message_json(_own(message_id, identity))
    if archived_among([original["sender"]]):
        raise Invalid("Invalid recipient mailbox")
    title = original["title"] if original["title"].startswith("Re: ") else f"Re: {original['title']}"
    thread = original["threadId"] if original["threadId"] is not None else str(original["id"])
    return _store(original["sender"], identity, title[:TITLE_MAX], body[:BODY_MAX], False, thread, original["id"],
                  None, None)


# --- acknowledging and pending ---------------------------------------------------------------

def _inbox_check(identity: str, action: str) -> None:
    if action == "ack":
        db.after_commit(EPHEMERAL, inbox_check_payload(identity, action))  # wakes change too
    else:  # a read or search: only the caller's own streams show it
        db.after_commit(STREAM_HINTS, inbox_check_payload(identity, action))


def inbox_check_payload(identity: str, action: str) -> EphemeralPayload:
    return {"type": "inbox_check", "to": [identity],
            "data": {"type": "inbox_check", "mailbox": identity, "action": action}}


def _mark_read(identity: str, ids: list[int]) -> None:
    """Idempotent: viewed_at keeps the first value (a conditional UPDATE, so racing acks agree)."""
    Message.update(status="read", viewed_at=pw.fn.COALESCE(Message.viewed_at, to_db(db.now()))).where(
        (Message.id.in_(ids)) & (Message.recipient == identity) & (Message.status != "read")).execute()


def ack(identity: str, message_id: int) -> JSONObject:
    _own(message_id, identity)
    _mark_read(identity, [message_id])
    _inbox_check(identity, "ack")
    return message_json(_own(message_id, identity))


def ack_many(identity: str, ids: list[int]) -> JSONObject:
    wanted = list(dict.fromkeys(ids))
    mine = {m.id for m in Message.select(Message.id).where(
        (Message.id.in_(wanted)) & (Message.recipient == identity))} if wanted else set()
    if mine:
        _mark_read(identity, sorted(mine))
    _inbox_check(identity, "ack")
    return {"success": [i for i in wanted if i in mine], "notFound": [i for i in wanted if i not in mine]}


def set_pending(identity: str, message_id: int, waiting: bool) -> JSONObject:
    _own(message_id, identity)
    if waiting:
        # Keep the first waitingSince if it is already pending.
        Message.update(response_waiting=True, waiting_responder=identity,
                       waiting_since=pw.fn.COALESCE(Message.waiting_since, to_db(db.now()))).where(
            Message.id == message_id).execute()
    else:
        Message.update(response_waiting=False, waiting_responder=None, waiting_since=None).where(
            Message.id == message_id).execute()
    changed: WakeChangedPayload = {"identity": identity}
    db.after_commit(WAKE_CHANGED, changed)  # pending replies are a wake source
    return message_json(_own(message_id, identity))


# --- listing ---------------------------------------------------------------------------------

# Orders: "unread" = urgent first, then oldest first; "newest" = newest first. A cursor is the last
# row's sort key (urgent, created_at at full stored precision, id), so pages never overlap or skip.
def _encode_cursor(order: str, row: tuple[Any, ...]) -> str:
    raw = json.dumps([order, int(bool(row[6])), str(row[7]), row[0]], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, order: str) -> tuple[int, datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        kind, urgent, created, message_id = jsonstrict.loads(base64.urlsafe_b64decode(padded.encode()))
        if kind != order or urgent not in (0, 1) or not isinstance(message_id, int) or isinstance(message_id, bool) \
                or not 0 <= message_id <= 2**31 - 1:  # the id column's range (PostgreSQL `integer`)
            raise ValueError
        return urgent, to_db(datetime.fromisoformat(created)), message_id
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError, OverflowError):
        raise Invalid("Invalid cursor") from None


def _wire_time_sql(column: str, sqlite: bool) -> str:
    """SQL for _wire_time: the same text, truncated (not rounded) to milliseconds."""
    if sqlite:
        # Stored text is 'YYYY-MM-DD HH:MM:SS' or 'YYYY-MM-DD HH:MM:SS.ffffff'; padding with '.000000'
        # covers both without CASE or length() (NULL stays NULL), which cost more (bench/RESULTS.md,
        # "Figures from code comments").
        return f"substr({column}, 1, 10) || 'T' || substr({column} || '.000000', 12, 12) || 'Z'"
    return f"""to_char({column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"""


# Metadata the database cannot encode (non-finite numbers stored before they were refused) becomes
# null in the database-encoded row, and the row is flagged: _repair then writes that row in Python,
# with loads_lenient's reading of the stored text. PostgreSQL's test may flag a good row (the word in
# a string); its repair gives the same answer, only slower.
_PG_SUSPECT = "(strpos(metadata, 'NaN') > 0 OR strpos(metadata, 'Infinity') > 0)"
_METADATA_SQL = {True: "json(CASE WHEN json_valid(metadata) THEN metadata END)",
                 False: f"CASE WHEN {_PG_SUSPECT} THEN NULL ELSE metadata::json END"}
# json_valid(NULL) is 0 on SQLite before 3.45 (NULL after): test NULL first, or every message without
# metadata is flagged and its page re-encoded in Python (bench/RESULTS.md, "Figures from code comments").
_SUSPECT_SQL = {True: "(metadata IS NOT NULL AND json_valid(metadata) = 0)", False: f"coalesce({_PG_SUSPECT}, false)"}


def _repair(encoded_rows: list[str], suspect_ids: list[int]) -> list[str]:
    """Re-encode the flagged rows of a page, reading their stored metadata leniently."""
    marks = ", ".join("?" * len(suspect_ids))
    stored: dict[int, str | None] = dict(_rows(f"SELECT id, metadata FROM message WHERE id IN ({marks})", suspect_ids))
    repaired = []
    for text in encoded_rows:
        row = json.loads(text)
        if row["id"] in stored:
            row["metadata"] = _metadata(stored[row["id"]])
            text = jsonstrict.dumps(row)
        repaired.append(text)
    return repaired


@lru_cache(maxsize=2)
def _message_json_sql(sqlite: bool) -> str:
    """Each row as the wire Message, encoded by the database: on SQLite one select-list expression (the
    JSON text), on PostgreSQL the wire fields as named columns, for the page to hand to row_to_json.

    The inbox is the hottest read: letting the database encode rows saves building and encoding 50
    dicts per request in Python (see bench/messages.py for the figures)."""
    def boolean(column: str) -> str:
        return f"json(CASE WHEN {column} THEN 'true' ELSE 'false' END)" if sqlite else column
    read: dict[str, Callable[[str], str]] = {
        PLAIN: lambda column: column, BOOL: boolean, TIME: lambda column: _wire_time_sql(column, sqlite),
        JSON: lambda _column: _METADATA_SQL[sqlite]}
    pairs = [(camel(column), read[kind](_DERIVED.get(column, column))) for column, kind in MESSAGE_WIRE]
    if sqlite:
        return "json_object(" + ", ".join(f"'{key}', {expression}" for key, expression in pairs) + ")"
    # A row of named columns for row_to_json, which encodes it from its cached row type; json_build_object
    # looks up the type of each of its 34 arguments on every call (page statement 723 -> 575 us, bench/RESULTS.md).
    return ", ".join(f'{expression} AS "{key}"' for key, expression in pairs)


def inbox_page(identity: str, status: str | None, limit: int, cursor: str | None) -> tuple[str, int, str | None]:
    """One inbox page as (JSON array text of Messages, total, nextCursor or None)."""
    where = "recipient = ?"
    params: list[Any] = [identity]
    if status is not None:
        where, params = where + " AND status = ?", params + [status]
    sqlite = db.is_sqlite(_database())
    count_where, count_params = where, list(params)
    if status == "unread":
        order, order_by = "unread", " ORDER BY urgent DESC, created_at, id LIMIT ?"
        if cursor:
            urgent, created, message_id = decode_cursor(cursor, order)
            if urgent:
                where += " AND (urgent = ? OR (urgent = ? AND (created_at, id) > (?, ?)))"
                params += [False, True, created, message_id]
            else:
                where += " AND urgent = ? AND (created_at, id) > (?, ?)"
                params += [False, created, message_id]
    else:
        order, order_by = "newest", " ORDER BY created_at DESC, id DESC LIMIT ?"
        if cursor:
            _urgent, created, message_id = decode_cursor(cursor, order)
            where += " AND (created_at, id) < (?, ?)"
            params += [created, message_id]
    page: _Page = _sqlite_page if sqlite else _postgres_page
    text, total, next_cursor = page(order, count_where, count_params, where, order_by, params, limit)
    _inbox_check(identity, "list")
    return jsonstrict.escape_terminal_active(text), total, next_cursor  # the database's JSON leaves them raw


# An inbox page's statement, per backend: (order, count_where, count_params, where, order_by, params, limit)
# -> (the JSON array text, total, nextCursor or None).
_Page: TypeAlias = Callable[[str, str, list[Any], str, str, list[Any], int], tuple[str, int, str | None]]
_OUTER_ORDER = {"unread": "p.urgent DESC, p.created_at, p.id", "newest": "p.created_at DESC, p.id DESC"}


def _postgres_page(order: str, count_where: str, count_params: list[Any], where: str, order_by: str, params: list[Any],
                   limit: int) -> tuple[str, int, str | None]:
    """The page and its total in ONE statement (one round trip; the uncorrelated count runs once).
    An empty page still returns the total: the page is LEFT JOINed to it."""
    wire = _message_json_sql(False)
    rows = _rows(f"SELECT p.*, t.total FROM (SELECT COUNT(*) AS total FROM message WHERE {count_where}) t "
                 f"LEFT JOIN LATERAL (SELECT row_to_json(w)::text AS j, m.id, m.urgent, m.created_at, m.s "
                 f"FROM (SELECT *, {_SUSPECT_SQL[False]} AS s FROM message WHERE {where}{order_by}) m, "
                 f"LATERAL (SELECT {wire}) w) p ON true ORDER BY {_OUTER_ORDER[order]}",
                 count_params + params + [limit + 1])
    total = rows[0][5]
    if rows[0][0] is None:
        rows = []
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = _encode_cursor(order, (last[1], None, None, None, None, None, last[2], last[3]))
    page = [r[0] for r in rows[:limit]]
    suspect = [r[1] for r in rows[:limit] if r[4]]
    return "[" + ",".join(_repair(page, suspect) if suspect else page) + "]", total, next_cursor


_SEPARATOR = "\x1e"  # cannot occur in JSON text (control characters are escaped in strings)


def _sqlite_page(order: str, count_where: str, count_params: list[Any], where: str, order_by: str, params: list[Any],
                 limit: int) -> tuple[str, int, str | None]:
    """The page in ONE statement returning one row: total, the encoded rows and their sort keys, each
    joined by the database. Python's sqlite3 releases and retakes the GIL for every row it steps, so
    51 rows meant 51 GIL hand-offs between the reader thread and the busy event loop; one row is one
    (bench/messages.md, round 2). group_concat keeps its
    input order: a LIMITed subquery is never flattened into an aggregate, so it feeds rows in ORDER BY
    order (the paging tests check the order)."""
    encoded = _message_json_sql(True)
    sql = (f"SELECT (SELECT COUNT(*) FROM message WHERE {count_where}), group_concat(j, char(30)), "
           f"group_concat(k, char(30)), group_concat(s) FROM (SELECT {encoded} AS j, "
           f"urgent || ' ' || id || ' ' || created_at AS k, CASE WHEN {_SUSPECT_SQL[True]} THEN id END AS s "
           f"FROM message WHERE {where}{order_by})")
    total, joined, keys, suspect = _rows(sql, count_params + params + [limit + 1])[0]
    rows = joined.split(_SEPARATOR) if joined else []
    next_cursor = None
    if len(rows) > limit:
        urgent, message_id, created = keys.split(_SEPARATOR)[limit - 1].split(" ", 2)
        next_cursor = _encode_cursor(order, (int(message_id), None, None, None, None, None, int(urgent), created))
    page = rows[:limit]
    if suspect:
        page = _repair(page, [int(i) for i in suspect.split(",")])
    return "[" + ",".join(page) + "]", total, next_cursor


def sent(identity: str, limit: int) -> JSONObject:
    rows = _rows(_SELECT + " WHERE sender = ? ORDER BY created_at DESC, id DESC LIMIT ?", (identity, limit))
    return {"messages": [message_json(r) for r in rows]}


# --- search ---------------------------------------------------------------------------------

_MESSAGE_DOCUMENT = "to_tsvector('simple', coalesce(title, '') || ' ' || coalesce(body, ''))"


def search(identity: str, q: str, limit: int) -> JSONObject:
    """Full text over title and body of the caller's received messages, newest first (all words must match)."""
    terms = fulltext.words(q)
    _inbox_check(identity, "search")
    if not terms:
        return {"messages": []}
    matching = fulltext.condition(Message, "message_fts", _MESSAGE_DOCUMENT, terms)
    rows = db.tuples(Message.select(*_COLUMNS).where((Message.recipient == identity) & matching)
                     .order_by(Message.created_at.desc(), Message.id.desc()).limit(limit))
    return {"messages": [search_row(m) for m in rows]}
