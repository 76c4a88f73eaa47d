"""The `chat` wake source (API.md §18 "Chat in wake"): one item per channel of the caller, not archived
by the caller, holding messages from others newer than the caller's read marker.

Two fixed queries whatever the number of channels: unread messages grouped by (channel, sender), and
the latest unread message of each DM. The first walks the caller's member rows (index on identity)
and each channel's messages through the (channel, id) index.
"""
from __future__ import annotations

import peewee as pw

from ..models import ChatChannel, ChatMember, ChatMessage
from ..timeutil import from_db

ACTION = "Read the conversation and answer; POST .../read marks it read."
LATEST_CHARS = 100


def _created(value):
    return from_db(ChatMessage.created_at.python_value(value))


def _unread_by_sender(identity: str) -> list[tuple]:
    """(channel, type, name, sender, count, first id, last id, oldest createdAt) of unread messages."""
    unread = ((ChatMessage.channel == ChatMember.channel) & (ChatMessage.sender != identity)
              & ChatMessage.deleted_at.is_null()
              & (ChatMember.last_read_at.is_null() | (ChatMessage.created_at > ChatMember.last_read_at)))
    query = (ChatMember.select(ChatMember.channel, ChatChannel.type, ChatChannel.name, ChatMessage.sender,
                               pw.fn.COUNT(ChatMessage.id), pw.fn.MIN(ChatMessage.id), pw.fn.MAX(ChatMessage.id),
                               pw.fn.MIN(ChatMessage.created_at))
             .join(ChatChannel, on=(ChatChannel.id == ChatMember.channel))
             .join(ChatMessage, on=unread)
             .where((ChatMember.identity == identity) & ChatMember.archived_at.is_null())
             .group_by(ChatMember.channel, ChatChannel.type, ChatChannel.name, ChatMessage.sender))
    return list(query.tuples())


def _summary(channel: dict, latest: dict[int, str]) -> str:
    senders = [sender for sender, _first in sorted(channel["senders"], key=lambda s: s[1])]
    if channel["type"] == "dm":
        other = senders[0]
        return f'DM with {other} — {other}: "{latest.get(channel["last"], "")[:LATEST_CHARS]}"'
    count = channel["count"]
    noun = "message" if count == 1 else "messages"
    return f'{channel["name"] or "group chat"} — {count} {noun} from {", ".join(senders)}'


def chat_items(identity: str) -> list[dict]:
    channels: dict[str, dict] = {}
    for channel_id, kind, name, sender, count, first_id, last_id, oldest in _unread_by_sender(identity):
        entry = channels.setdefault(channel_id, {"type": kind, "name": name, "count": 0, "last": 0,
                                                 "senders": [], "oldest": None})
        entry["count"] += count
        entry["last"] = max(entry["last"], last_id)
        entry["senders"].append((sender, first_id))
        created = _created(oldest)
        entry["oldest"] = created if entry["oldest"] is None else min(entry["oldest"], created)
    dm_latest = [c["last"] for c in channels.values() if c["type"] == "dm"]
    latest = dict(ChatMessage.select(ChatMessage.id, ChatMessage.body)
                  .where(ChatMessage.id.in_(dm_latest)).tuples()) if dm_latest else {}
    return [{"source": "chat", "id": channel_id, "channelId": channel_id, "channelType": c["type"],
             "channelName": c["name"], "summary": _summary(c, latest), "action": ACTION, "priority": "normal",
             "ephemeral": False, "_at": c["oldest"]}
            for channel_id, c in channels.items()]
