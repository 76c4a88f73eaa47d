"""The mailbox: send, inbox (keyset paging), ack, reply, pending and full-text search.

Every function runs inside a Store unit of work. Writes log their `message` event and queue the
recipient's wake pulse in the same unit, so a committed message is always announced and a failed
one never is.
"""
from __future__ import annotations

import base64
import json
from datetime import datetime

import peewee as pw

from .. import db
from ..errors import Invalid, NotFound
from ..events import log
from ..models import Message
from ..timeutil import from_db, iso, to_db
from . import fulltext
from .identities import is_known

TITLE_MAX = 255
BODY_MAX = 10_000
THREAD_MAX = 100
DEDUPE_MAX = 255
BATCH_ACK_MAX = 1000

_COLUMNS = (Message.id, Message.recipient, Message.sender, Message.title, Message.body, Message.status,
            Message.urgent, Message.created_at, Message.viewed_at, Message.thread_id,
            Message.reply_to_message_id, Message.dedupe_key, Message.metadata, Message.response_waiting,
            Message.waiting_responder, Message.waiting_since)


# --- wire shapes -----------------------------------------------------------------------------

def message_json(m: Message) -> dict:
    return {"id": m.id, "recipient": m.recipient, "sender": m.sender, "title": m.title, "body": m.body,
            "status": m.status, "urgent": bool(m.urgent), "createdAt": iso(m.created_at),
            "viewedAt": iso(m.viewed_at), "threadId": m.thread_id, "replyToMessageId": m.reply_to_message_id,
            "dedupeKey": m.dedupe_key, "metadata": m.metadata, "responseWaiting": bool(m.response_waiting),
            "waitingResponder": m.waiting_responder, "waitingSince": iso(m.waiting_since)}


def search_row(m: Message) -> dict:
    """The v1 snake_case row returned by search."""
    return {"id": m.id, "recipient": m.recipient, "sender": m.sender, "title": m.title, "body": m.body,
            "status": m.status, "urgent": bool(m.urgent), "created_at": iso(m.created_at),
            "viewed_at": iso(m.viewed_at), "thread_id": m.thread_id, "reply_to_message_id": m.reply_to_message_id,
            "dedupe_key": m.dedupe_key, "metadata": m.metadata, "response_waiting": bool(m.response_waiting),
            "waiting_responder": m.waiting_responder, "waiting_since": iso(m.waiting_since)}


def _event(m: Message) -> dict:
    return {"type": "message", "recipient": m.recipient, "sender": m.sender, "messageId": m.id,
            "title": m.title, "urgent": bool(m.urgent)}


# --- sending ---------------------------------------------------------------------------------

def _deliver(message: Message) -> None:
    """Announce a new message: logged event to the recipient, and a pulse of their wake."""
    log.append("message", _event(message), to=[message.recipient])
    db.after_commit("wake", {"identity": message.recipient})


def _find_dedupe(sender: str, recipient: str, key: str) -> Message | None:
    return Message.get_or_none((Message.sender == sender) & (Message.recipient == recipient)
                               & (Message.dedupe_key == key))


def send(sender: str, recipient: str, fields: dict, env_identities: frozenset[str]) -> dict:
    """`fields`: title, body, urgent, thread_id, reply_to_message_id, dedupe_key, metadata (already validated)."""
    if not is_known(recipient, env_identities):
        raise Invalid("Invalid recipient mailbox")
    key = fields.get("dedupe_key")
    if key is not None:
        first = _find_dedupe(sender, recipient, key)
        if first is not None:
            return message_json(first)
    row = dict(recipient=recipient, sender=sender, title=fields["title"], body=fields.get("body") or "",
               status="unread", urgent=bool(fields.get("urgent")), created_at=to_db(db.now()),
               thread_id=fields.get("thread_id"), reply_to_message_id=fields.get("reply_to_message_id"),
               dedupe_key=key, metadata=fields.get("metadata"))
    if key is None:
        message = Message.create(**row)
    else:
        try:
            with Message._meta.database.atomic():
                message = Message.create(**row)
        except pw.IntegrityError:
            # A concurrent writer stored the same (sender, recipient, dedupeKey) first: its message wins.
            first = _find_dedupe(sender, recipient, key)
            if first is None:
                raise
            return message_json(first)
    _deliver(message)
    return message_json(message)


def _own(message_id: int, identity: str) -> Message:
    message = Message.get_or_none((Message.id == message_id) & (Message.recipient == identity))
    if message is None:
        raise NotFound("Message not found")
    return message


def reply(identity: str, message_id: int, body: str) -> dict:
    original = _own(message_id, identity)
    title = original.title if original.title.startswith("Re: ") else f"Re: {original.title}"
    message = Message.create(
        recipient=original.sender, sender=identity, title=title[:TITLE_MAX], body=body[:BODY_MAX],
        status="unread", urgent=False, created_at=to_db(db.now()),
        thread_id=original.thread_id if original.thread_id is not None else str(original.id),
        reply_to_message_id=original.id)
    _deliver(message)
    return message_json(message)


# --- acknowledging and pending ---------------------------------------------------------------

def _inbox_check(identity: str, action: str) -> None:
    db.after_commit("ephemeral", inbox_check_payload(identity, action))


def inbox_check_payload(identity: str, action: str) -> dict:
    return {"type": "inbox_check", "to": [identity],
            "data": {"type": "inbox_check", "mailbox": identity, "action": action}}


def _mark_read(identity: str, ids: list[int]) -> None:
    """Idempotent: viewed_at keeps the first value (a conditional UPDATE, so racing acks agree)."""
    Message.update(status="read", viewed_at=pw.fn.COALESCE(Message.viewed_at, to_db(db.now()))).where(
        (Message.id.in_(ids)) & (Message.recipient == identity) & (Message.status != "read")).execute()


def ack(identity: str, message_id: int) -> dict:
    _own(message_id, identity)
    _mark_read(identity, [message_id])
    _inbox_check(identity, "ack")
    return message_json(_own(message_id, identity))


def ack_many(identity: str, ids: list[int]) -> dict:
    wanted = list(dict.fromkeys(ids))
    mine = {m.id for m in Message.select(Message.id).where(
        (Message.id.in_(wanted)) & (Message.recipient == identity))} if wanted else set()
    if mine:
        _mark_read(identity, sorted(mine))
    _inbox_check(identity, "ack")
    return {"success": [i for i in wanted if i in mine], "notFound": [i for i in wanted if i not in mine]}


def set_pending(identity: str, message_id: int, waiting: bool) -> dict:
    _own(message_id, identity)
    if waiting:
        # Keep the first waitingSince if it is already pending.
        Message.update(response_waiting=True, waiting_responder=identity,
                       waiting_since=pw.fn.COALESCE(Message.waiting_since, to_db(db.now()))).where(
            Message.id == message_id).execute()
    else:
        Message.update(response_waiting=False, waiting_responder=None, waiting_since=None).where(
            Message.id == message_id).execute()
    return message_json(_own(message_id, identity))


# --- listing ---------------------------------------------------------------------------------

# Orders: "unread" = urgent first, then oldest first; "newest" = newest first.
def _encode_cursor(order: str, m: Message) -> str:
    raw = json.dumps([order, int(bool(m.urgent)), iso(m.created_at), m.id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, order: str) -> tuple[int, datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        kind, urgent, created, message_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if kind != order or urgent not in (0, 1) or not isinstance(message_id, int):
            raise ValueError
        return urgent, to_db(from_db(datetime.fromisoformat(created.replace("Z", "+00:00")))), message_id
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError, json.JSONDecodeError):
        raise Invalid("Invalid cursor") from None


def _after_cursor(order: str, position: tuple[int, datetime, int]):
    urgent, created, message_id = position
    if order == "unread":
        later = (Message.created_at > created) | ((Message.created_at == created) & (Message.id > message_id))
        if urgent:
            return (Message.urgent == False) | ((Message.urgent == True) & later)  # noqa: E712
        return (Message.urgent == False) & later  # noqa: E712
    return (Message.created_at < created) | ((Message.created_at == created) & (Message.id < message_id))


def inbox(identity: str, status: str | None, limit: int, cursor: str | None) -> dict:
    order = "unread" if status == "unread" else "newest"
    where = Message.recipient == identity
    if status is not None:
        where &= Message.status == status
    total = Message.select(pw.fn.COUNT(Message.id)).where(where).scalar()
    query = Message.select(*_COLUMNS).where(where)
    if cursor:
        query = query.where(_after_cursor(order, decode_cursor(cursor, order)))
    if order == "unread":
        query = query.order_by(Message.urgent.desc(), Message.created_at, Message.id)
    else:
        query = query.order_by(Message.created_at.desc(), Message.id.desc())
    rows = list(query.limit(limit + 1))
    result = {"messages": [message_json(m) for m in rows[:limit]], "total": total}
    if len(rows) > limit:
        result["nextCursor"] = _encode_cursor(order, rows[limit - 1])
    return result


def sent(identity: str, limit: int) -> dict:
    rows = (Message.select(*_COLUMNS).where(Message.sender == identity)
            .order_by(Message.created_at.desc(), Message.id.desc()).limit(limit))
    return {"messages": [message_json(m) for m in rows]}


# --- search ---------------------------------------------------------------------------------

_MESSAGE_DOCUMENT = "to_tsvector('simple', coalesce(title, '') || ' ' || coalesce(body, ''))"


def search(identity: str, q: str, limit: int) -> dict:
    """Full text over title and body of the caller's received messages, newest first (all words must match)."""
    terms = fulltext.words(q)
    if not terms:
        return {"messages": []}
    matching = fulltext.condition(Message, "message_fts", _MESSAGE_DOCUMENT, terms)
    rows = (Message.select(*_COLUMNS).where((Message.recipient == identity) & matching)
            .order_by(Message.created_at.desc(), Message.id.desc()).limit(limit))
    return {"messages": [search_row(m) for m in rows]}
