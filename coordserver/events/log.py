"""The event log: every change clients must hear about is appended here in the change's transaction.

Call these from inside a Store unit of work. Events addressed to everyone have no target rows; the
others have one EventTarget row per identity, so "what did bob miss since id N" is one indexed query.

Each event has a short tag derived from its id and the instant it was logged (`event_tag`). A stream
names an event `<id>.<tag>` (`tagged_id`); a resume from such an id checks the tag against the row, so
a log that was restored from a backup (and reuses ids for different events) is told apart from the one
the client read (realtime/sse.py answers `resync`). Integer ids are accepted unchecked, as in v1.
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Iterable, Sequence

import peewee as pw

from .. import db
from ..models import Event, EventTarget
from ..sql import insert_rows
from ..timeutil import to_db


_INSERT_EVENT = "INSERT INTO event (type, data, to_all, created_at) VALUES (?, ?, ?, ?)"


def append(type_: str, data: dict, to: Iterable[str] | None) -> int:
    """Log one event. `to=None` addresses everyone; otherwise the given identities.

    Fixed SQL rather than Model.create: every logged change pays this, and Peewee's query building
    cost more than the inserts themselves (bench/messages.md)."""
    event_id = db.sql_insert(_INSERT_EVENT, (type_, Event.data.db_value(data), to is None, to_db(db.now())))
    assert event_id is not None  # an INSERT ... VALUES always inserts its row
    if to is not None:
        targets = _audience(to)
        if targets:
            db.sql_execute("INSERT INTO event_target (identity, event) VALUES "
                        + ", ".join(["(?, ?)"] * len(targets)), [v for i in targets for v in (i, event_id)])
    db.note_event(event_id, type_)  # counted (coord_events_total) once the unit commits
    return event_id


def insert_numbered(events: Sequence[tuple[int, str, dict, Iterable[str] | None, datetime]]) -> None:
    """SQLite, for a merged batch (db.merges): events as (id, type, data, to, created_at as stored), their ids
    taken by the batch (sql.highest_ids); one INSERT for the rows and one for their targets. Each is noted
    (db.note_event) by the unit it belongs to, when that unit is finished."""
    insert_rows("event", ("id", "type", "data", "to_all", "created_at"),
                [(event_id, type_, Event.data.db_value(data), to is None, created)
                 for event_id, type_, data, to, created in events])
    targets = [(identity, event_id) for event_id, _type, _data, to, _created in events for identity in _audience(to)]
    if targets:
        insert_rows("event_target", ("identity", "event"), targets)


def _audience(to: Iterable[str] | None) -> list[str]:
    return [] if to is None else sorted({identity for identity in to if identity})


# Event text whose row id only the database knows yet: the text is encoded with a null `id_key` and
# SQL puts the id in its place. `"key":null` cannot occur inside a JSON string (a quote there is
# escaped), so the one match is the key itself.

def id_filled_sql(id_expr: str, text_expr: str = "?") -> str:
    """SQL for the event text with the id filled in; its parameters: id_filled's (the text's only
    when `text_expr` is a placeholder)."""
    return f"replace({text_expr}, ?, ? || {id_expr})"


def id_filled(data: dict, id_key: str) -> tuple[str, str, str]:
    """The event text, and the marker and prefix id_filled_sql replaces."""
    return Event.data.db_value({**data, id_key: None}), f'"{id_key}":null', f'"{id_key}":'


def insert_and_append(insert_sql: str, params: tuple | list, type_: str, data: dict, id_key: str,
                      to: Iterable[str] | None) -> int | None:
    """Run `insert_sql` (one fixed INSERT of one row, '?' placeholders, no RETURNING) and log an event
    whose `data[id_key]` is the new row's id; returns that id. A guarded insert (INSERT ... SELECT
    ... WHERE) that inserts nothing logs nothing and returns None.

    On PostgreSQL row, event and targets are ONE statement (one round trip instead of three, and one
    parse); the event's text gets the id there (id_filled_sql)."""
    database = db.current_database()
    if db.is_sqlite(database):
        row_id = db.sql_insert(insert_sql, params)
        if row_id is not None:
            append(type_, {**data, id_key: row_id}, to)
        return row_id
    targets = _audience(to)
    sql = (f"WITH r AS ({insert_sql} RETURNING id), "
           "e AS (INSERT INTO event (type, data, to_all, created_at) "
           f"SELECT ?, {id_filled_sql('r.id')}, ?, ? FROM r RETURNING id)")
    values = [*params, type_, *id_filled(data, id_key), to is None, to_db(db.now())]
    if targets:
        sql += (", t AS (INSERT INTO event_target (identity, event) SELECT v.i, e.id FROM e, (VALUES "
                + ", ".join(["(?)"] * len(targets)) + ") AS v(i))")
        values += targets
    rows = db.sql_rows(sql + " SELECT r.id, e.id FROM r, e", values)
    if not rows:
        return None
    row_id, event_id = rows[0]
    db.note_event(event_id, type_)
    return row_id


TAG_LETTERS = 6


def event_tag(event_id: int, created_at: datetime | str) -> str:
    """Six lowercase letters from the event's id and logging instant: a restored log's new event with a
    reused id gets another tag. Letters only, so `<id>.<tag>` never reads as a decimal number."""
    stamp = created_at.isoformat() if isinstance(created_at, datetime) else str(created_at)
    digest = hashlib.blake2b(f"{event_id}|{stamp}".encode(), digest_size=TAG_LETTERS).digest()
    return "".join(chr(97 + byte % 26) for byte in digest)


def tagged_id(event_id: int, created_at: datetime | str) -> str:
    """The id a stream gives an event (`8536.kqzvbf`)."""
    return f"{event_id}.{event_tag(event_id, created_at)}"


def parse_event_id(raw: str) -> tuple[int, str | None]:
    """A Last-Event-ID: `8536` (v1: unchecked) or `8536.kqzvbf` -> (8536, tag or None). ValueError if neither."""
    number, dot, tag = raw.strip().partition(".")
    if not number.isdigit() or (dot and not (len(tag) == TAG_LETTERS and tag.isalpha() and tag.islower())):
        raise ValueError(raw)
    return int(number), tag or None


def tag_of(event_id: int) -> str | None:
    """The tag of logged event `event_id`, None if there is no such row (pruned, or never logged)."""
    row = Event.select(Event.id, Event.created_at).where(Event.id == event_id).first()
    return None if row is None else event_tag(row.id, row.created_at)


def head() -> tuple[int, str]:
    """The newest event's id and stream id ((0, "0") for an empty log): where a new client resumes from."""
    row = Event.select(Event.id, Event.created_at).order_by(Event.id.desc()).first()
    return (0, "0") if row is None else (row.id, tagged_id(row.id, row.created_at))


def latest_id() -> int:
    return Event.select(pw.fn.MAX(Event.id)).scalar() or 0


def oldest_id() -> int | None:
    return Event.select(pw.fn.MIN(Event.id)).scalar()


def range_after(after_id: int, upto_id: int | None = None, limit: int = 1000,
                tagged: bool = False) -> list[tuple]:
    """Events with after_id < id <= upto_id, oldest first, each (id, type, data, to_all, audience);
    `tagged`: each with its stream id (tagged_id) last."""
    query = Event.select().where(Event.id > after_id)
    if upto_id is not None:
        query = query.where(Event.id <= upto_id)
    rows = list(query.order_by(Event.id).limit(limit))
    targets: dict[int, list[str]] = {}
    addressed = [row.id for row in rows if not row.to_all]
    if addressed:
        for target in EventTarget.select().where(EventTarget.event.in_(addressed)):
            targets.setdefault(target.event, []).append(target.identity)
    if tagged:
        return [(row.id, row.type, row.data, row.to_all, targets.get(row.id, []), tagged_id(row.id, row.created_at))
                for row in rows]
    return [(row.id, row.type, row.data, row.to_all, targets.get(row.id, [])) for row in rows]


def heads_after(after_id: int, load: frozenset[str], limit: int = 1000) -> list[tuple]:
    """range_after's tagged rows without audiences or stream ids, and with data only for the types in
    `load`: for a reader that only needs to move past rows (an SSE hub with no stream open), one small query."""
    rows = db.sql_rows("SELECT id, type, CASE WHEN type IN (" + ", ".join("?" * len(load)) + ") THEN data END, "
                       "to_all FROM event WHERE id > ? ORDER BY id LIMIT ?", [*sorted(load), after_id, limit])
    return [(event_id, type_, Event.data.python_value(data), to_all, [], None)
            for event_id, type_, data, to_all in rows]


def for_identity_after(identity: str, after_id: int, limit: int = 1000, tagged: bool = False) -> list[tuple]:
    """What `identity` is entitled to with id > after_id, oldest first (SSE resume): (id, type, data),
    `tagged`: with the stream id (tagged_id) last."""
    mine = EventTarget.select(EventTarget.event).where(
        (EventTarget.identity == identity) & (EventTarget.event > after_id))
    query = (Event.select(Event.id, Event.type, Event.data, Event.created_at)
             .where((Event.id > after_id) & (Event.to_all | Event.id.in_(mine)))
             .order_by(Event.id).limit(limit))
    if tagged:
        return [(row.id, row.type, row.data, tagged_id(row.id, row.created_at)) for row in query]
    return [(row.id, row.type, row.data) for row in query]


PRUNE_CHUNK = 5_000  # ids per pruning unit: a short transaction, so the one writer serves others in between


def prune(retention: timedelta, chunk: int = PRUNE_CHUNK) -> int:
    """Drop the oldest events older than the retention window, at most `chunk` ids' worth. Returns how
    many were removed; run it until that is 0 (Store.write_until_done).

    The newest event always stays: SQLite reuses the highest rowid once it is deleted, and ids must
    only grow (stream resume points and worker cursors compare them)."""
    cutoff = to_db(db.now() - retention)
    newest_old = Event.select(pw.fn.MAX(Event.id)).where(Event.created_at < cutoff).scalar()
    if newest_old is not None:
        newest_old = min(newest_old, latest_id() - 1)
    if newest_old is None or newest_old < 1:
        return 0
    upto = min(newest_old, (oldest_id() or 0) + chunk - 1)
    EventTarget.delete().where(EventTarget.event <= upto).execute()
    return Event.delete().where(Event.id <= upto).execute()
