"""The `chat` wake source (API.md §18 "Chat in wake"): one item per channel of the caller, not archived
by the caller, holding messages from others newer than the caller's read marker.

Two fixed queries whatever the number of channels: unread messages grouped by (channel, sender), and
the latest unread message of each DM. The first walks the caller's member rows (index on identity)
and each channel's messages through the (channel, id) index.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from .. import db
from ..jsonstrict import JSONObject
from ..models import ChatMessage
from ..timeutil import from_db

ACTION = "Read the conversation and answer; POST .../read marks it read."
LATEST_CHARS = 100


def _created(value: object) -> datetime:
    created: datetime = from_db(ChatMessage.created_at.python_value(value))  # python_value: Any in peewee's stubs
    return created


# Fixed SQL: wake is per request, and building this with Peewee cost more than running it.
_UNREAD_BY_SENDER = (
    "SELECT m.channel, c.type, c.name, m.sender, COUNT(m.id), MIN(m.id), MAX(m.id), MIN(m.created_at)"
    " FROM chat_member AS cm JOIN chat_channel AS c ON c.id = cm.channel"
    " JOIN chat_message AS m ON m.channel = cm.channel"
    " WHERE cm.identity = ? AND cm.archived_at IS NULL AND m.sender <> ? AND m.deleted_at IS NULL"
    " AND (cm.last_read_at IS NULL OR m.created_at > cm.last_read_at)"
    " GROUP BY m.channel, c.type, c.name, m.sender")


def _unread_by_sender(identity: str) -> list[tuple[Any, ...]]:
    """(channel, type, name, sender, count, first id, last id, oldest createdAt) of unread messages."""
    return db.sql_rows(_UNREAD_BY_SENDER, (identity, identity))


def _bodies(message_ids: list[int]) -> dict[int, str]:
    if not message_ids:
        return {}
    marks = ", ".join("?" * len(message_ids))
    return dict(db.sql_rows(f"SELECT id, body FROM chat_message WHERE id IN ({marks})", message_ids))


class _Unread(TypedDict):
    """One channel's unread messages, gathered from its (channel, sender) rows."""
    type: str
    name: str | None
    count: int
    last: int  # the latest message's id
    senders: list[tuple[str, int]]  # (sender, their first message's id)
    oldest: datetime | None


def _summary(channel: _Unread, latest: dict[int, str]) -> str:
    senders = [sender for sender, _first in sorted(channel["senders"], key=lambda s: s[1])]
    if channel["type"] == "dm":
        other = senders[0]
        return f'DM with {other} — {other}: "{latest.get(channel["last"], "")[:LATEST_CHARS]}"'
    count = channel["count"]
    noun = "message" if count == 1 else "messages"
    return f'{channel["name"] or "group chat"} — {count} {noun} from {", ".join(senders)}'


def chat_items(identity: str) -> list[JSONObject]:
    channels: dict[str, _Unread] = {}
    for channel_id, kind, name, sender, count, first_id, last_id, oldest in _unread_by_sender(identity):
        entry = channels.setdefault(channel_id, {"type": kind, "name": name, "count": 0, "last": 0,
                                                 "senders": [], "oldest": None})
        entry["count"] += count
        entry["last"] = max(entry["last"], last_id)
        entry["senders"].append((sender, first_id))
        created = _created(oldest)
        entry["oldest"] = created if entry["oldest"] is None else min(entry["oldest"], created)
    latest = _bodies([c["last"] for c in channels.values() if c["type"] == "dm"])
    return [{"source": "chat", "id": channel_id, "channelId": channel_id, "channelType": c["type"],
             "channelName": c["name"], "summary": _summary(c, latest), "action": ACTION, "priority": "normal",
             "ephemeral": False, "_at": c["oldest"]}
            for channel_id, c in channels.items()]
