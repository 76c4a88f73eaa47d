"""Chat: DM and group channels, messages, read markers, archive and search.

Functions run inside Store units of work. A posted message logs `chat_message` to every member
(sender included) in the same unit; typing is ephemeral: announced after its (read) unit, never logged.
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol, cast

import peewee as pw

from .. import db
from ..jsonstrict import JSONObject
from ..errors import Forbidden, Invalid, NotFound
from ..events import log
from ..models import ChatChannel, ChatMember, ChatMessage
from ..timeutil import iso, to_db
from . import fulltext, guards, kinds
from .identities import archived_among, is_known, valid_identity
from ..events.channels import EPHEMERAL, WAKE_CHANGED, EphemeralPayload, WakeChangedPayload
from . import wake_signal

NAME_MAX = 100
BODY_MAX = 10_000
MEMBERS_MAX = 100
_SUBSTRING_BELOW = 3  # queries shorter than this are substring matches, not full text
_CHAT_DOCUMENT = "to_tsvector('simple', body)"


# --- wire shapes -----------------------------------------------------------------------------

def message_json(m: ChatMessage, agents: set[str] | None = None) -> JSONObject:
    """The wire chat message; `isAgent`: its sender's kind (`agents`: looked up by the caller for many)."""
    if agents is None:
        agents = kinds.agents_among([m.sender])
    return {"id": m.id, "channelId": m.channel, "sender": m.sender, "body": m.body,
            "createdAt": iso(m.created_at), "editedAt": iso(m.edited_at), "deletedAt": iso(m.deleted_at),
            "isAgent": m.sender in agents}


def _event_message(m: ChatMessage, is_agent: bool) -> JSONObject:
    return {"id": m.id, "sender": m.sender, "body": m.body, "createdAt": iso(m.created_at), "isAgent": is_agent}


# --- membership ------------------------------------------------------------------------------

def _membership(channel_id: str, identity: str) -> ChatMember:
    """The caller's member row: 404 for an unknown channel, 403 for a channel they are not in."""
    member = ChatMember.get_or_none((ChatMember.channel == channel_id) & (ChatMember.identity == identity))
    if member is not None:
        return member
    if not ChatChannel.select().where(ChatChannel.id == channel_id).exists():
        raise NotFound("Channel not found")
    raise Forbidden("Not a member")


def members_of(channel_id: str) -> list[str]:
    return [m.identity for m in ChatMember.select(ChatMember.identity)
            .where(ChatMember.channel == channel_id).order_by(ChatMember.identity)]


def typing(channel_id: str, identity: str) -> None:
    """Tell the channel's other members (not logged: a typing indicator is worth nothing later)."""
    _membership(channel_id, identity)
    others = [m for m in members_of(channel_id) if m != identity]
    if others:
        typing_now: EphemeralPayload = {"type": "chat_typing", "to": others, "data": {
            "type": "chat_typing", "channelId": channel_id, "identity": identity}}
        db.after_commit(EPHEMERAL, typing_now)


def _known(identity: object, env_identities: frozenset[str]) -> str:
    name = valid_identity(identity)
    if not is_known(name, env_identities):
        raise Invalid(f"Unknown identity: {name}")
    return name


# --- channels --------------------------------------------------------------------------------

def _add_members(channel_id: str, identities: list[str], now: datetime) -> None:
    ChatMember.insert_many([{"channel": channel_id, "identity": i, "joined_at": now} for i in identities]) \
        .on_conflict_ignore().execute()


def open_dm(identity: str, other: object, env_identities: frozenset[str]) -> JSONObject:
    peer = _known(other, env_identities)
    if peer == identity:
        raise Invalid("A DM needs another identity")
    key = ":".join(sorted((identity, peer)))
    channel = ChatChannel.get_or_none(ChatChannel.dm_key == key)
    if channel is None:
        now = to_db(db.now())
        try:
            with ChatChannel._meta.database.atomic():
                channel = ChatChannel.create(type="dm", name=None, dm_key=key, created_by=identity, created_at=now)
                _add_members(channel.id, [identity, peer], now)
        except pw.IntegrityError:
            # Both sides opened the DM at once: the first channel stored is the DM.
            channel = ChatChannel.get_or_none(ChatChannel.dm_key == key)
            if channel is None:
                raise
    return {"channelId": channel.id, "type": "dm"}


def create_group(identity: str, name: str, members: list[object], env_identities: frozenset[str]) -> JSONObject:
    wanted = [identity] + [_known(m, env_identities) for m in members]
    now = to_db(db.now())
    channel = ChatChannel.create(type="group", name=name, dm_key=None, created_by=identity, created_at=now)
    _add_members(channel.id, list(dict.fromkeys(wanted)), now)
    return {"channelId": channel.id, "type": "group"}


def list_channels(identity: str, archived: bool) -> JSONObject:
    mine = ChatMember.select().where(
        (ChatMember.identity == identity)
        & (ChatMember.archived_at.is_null(False) if archived else ChatMember.archived_at.is_null()))
    memberships = {m.channel: m for m in mine}
    if not memberships:
        return {"channels": []}
    ids = list(memberships)
    channels = list(ChatChannel.select().where(ChatChannel.id.in_(ids)))
    roster: dict[str, list[JSONObject]] = {}
    for m in (ChatMember.select(ChatMember.channel, ChatMember.identity)
              .where(ChatMember.channel.in_(ids)).order_by(ChatMember.joined_at, ChatMember.identity)):
        roster.setdefault(m.channel, []).append({"identity": m.identity})
    last_ids = [c.last_message_id for c in channels if c.last_message_id is not None]
    last = {m.id: m for m in ChatMessage.select().where(ChatMessage.id.in_(last_ids))} if last_ids else {}
    unread = _unread_counts(identity, ids)

    rows: list[JSONObject] = []
    for channel in channels:
        member = memberships[channel.id]
        message = None if channel.last_message_id is None else last.get(channel.last_message_id)
        rows.append({
            "id": channel.id, "type": channel.type, "name": channel.name, "created_by": channel.created_by,
            "created_at": iso(channel.created_at), "last_read_at": iso(member.last_read_at),
            "archived_at": iso(member.archived_at), "members": roster.get(channel.id, []),
            "last_message": None if message is None else {
                "id": message.id, "sender": message.sender, "body": message.body,
                "created_at": iso(message.created_at)},
            "unread_count": unread.get(channel.id, 0),
        })
    # Latest message first; channels without messages last (newest created first among them).
    with_messages = sorted((r for r in rows if r["last_message"]),
                           key=lambda r: (r["last_message"]["created_at"], r["last_message"]["id"]), reverse=True)
    empty = sorted((r for r in rows if not r["last_message"]), key=lambda r: (r["created_at"], r["id"]), reverse=True)
    return {"channels": with_messages + empty}


def _unread_counts(identity: str, channel_ids: list[str]) -> dict[str, int]:
    """Per channel: others' messages newer than the caller's read marker, in one grouped query."""
    query = (ChatMessage.select(ChatMessage.channel, pw.fn.COUNT(ChatMessage.id))
             .join(ChatMember, on=((ChatMember.channel == ChatMessage.channel) & (ChatMember.identity == identity)))
             .where(ChatMessage.channel.in_(channel_ids) & (ChatMessage.sender != identity)
                    & ChatMessage.deleted_at.is_null()
                    & (ChatMember.last_read_at.is_null() | (ChatMessage.created_at > ChatMember.last_read_at)))
             .group_by(ChatMessage.channel))
    return dict(db.tuples(query))


# --- messages --------------------------------------------------------------------------------

def messages(identity: str, channel_id: str, limit: int, before: int | None) -> JSONObject:
    """The newest `limit` messages older than `before`, returned oldest first. Reading moves no marker."""
    _membership(channel_id, identity)
    query = ChatMessage.select().where(ChatMessage.channel == channel_id)
    if before is not None:
        query = query.where(ChatMessage.id < before)
    rows = list(query.order_by(ChatMessage.id.desc()).limit(limit))
    agents = kinds.agents_among(m.sender for m in rows)
    return {"messages": [message_json(m, agents) for m in reversed(rows)]}


def post(identity: str, channel_id: str, body: str) -> JSONObject:
    """Post a message; the answer is the message with `woke`: how many members this post pulsed."""
    _membership(channel_id, identity)
    members = members_of(channel_id)
    archived = archived_among(members)
    is_group = ChatChannel.select(ChatChannel.type).where(ChatChannel.id == channel_id).scalar() == "group"
    if archived:  # archived identities receive no new chat: a DM with one is refused, a group skips them
        if not is_group:
            raise Invalid(f"Unknown identity: {sorted(archived)[0]}")
        members = [m for m in members if m not in archived]
    message = ChatMessage.create(channel=channel_id, sender=identity, body=body, created_at=to_db(db.now()))
    ChatChannel.update(last_message_id=message.id).where(ChatChannel.id == channel_id).execute()
    agents = kinds.agents_among(members)
    sender_agent = identity in agents
    log.append("chat_message", {"type": "chat_message", "channelId": channel_id,
                                "message": _event_message(message, sender_agent)}, to=members)
    guards.after_chat(identity, channel_id, members, sender_agent)
    others = [m for m in members if m != identity]
    # The chat fan-out guard: a group channel wakes each agent member at most once per cooldown.
    held = set(others) & agents
    if is_group and held:
        held -= set(guards.chat_wakes(channel_id, sorted(held)))
    else:
        held = set()
    woke = 0
    for member in others:  # the message enters the others' wake (chat source); never its sender's
        if member in held:  # still in its wake (GET /api/wake shows it), only not pulsed again
            changed: WakeChangedPayload = {"identity": member}
            db.after_commit(WAKE_CHANGED, changed)
        elif wake_signal.enters_wake(member, identity):
            woke += 1
    return {**message_json(message, {identity} if sender_agent else set()), "woke": woke}


def mark_read(identity: str, channel_id: str) -> JSONObject:
    _membership(channel_id, identity)
    ChatMember.update(last_read_at=to_db(db.now())).where(
        (ChatMember.channel == channel_id) & (ChatMember.identity == identity)).execute()
    changed: WakeChangedPayload = {"identity": identity}
    db.after_commit(WAKE_CHANGED, changed)  # its chat item leaves wake, in every process
    return {"ok": True}


def set_archived(identity: str, channel_id: str, archived: bool) -> JSONObject:
    _membership(channel_id, identity)
    ChatMember.update(archived_at=to_db(db.now()) if archived else None).where(
        (ChatMember.channel == channel_id) & (ChatMember.identity == identity)).execute()
    changed: WakeChangedPayload = {"identity": identity}
    db.after_commit(WAKE_CHANGED, changed)  # archived channels are not in wake
    return {"ok": True}


# --- search ----------------------------------------------------------------------------------

class _FoundRow(Protocol):
    """A ChatMessage row with its channel joined (as `chatchannel`, peewee's name for the join)."""
    id: int
    channel: str
    sender: str
    body: str
    created_at: datetime
    chatchannel: ChatChannel


def search(identity: str, q: str, channel_id: str | None, sender: str | None, before: datetime | None,
           after: datetime | None, limit: int) -> JSONObject:
    mine = ChatMember.select(ChatMember.channel).where(ChatMember.identity == identity)
    where = ChatMessage.channel.in_(mine) & ChatMessage.deleted_at.is_null()
    if len(q.strip()) < _SUBSTRING_BELOW:
        where &= ChatMessage.body.contains(q.strip())  # ILIKE, wildcards escaped
    else:
        terms = fulltext.words(q)
        if not terms:
            return {"messages": []}
        where &= fulltext.condition(ChatMessage, "chat_message_fts", _CHAT_DOCUMENT, terms)
    if channel_id:
        where &= ChatMessage.channel == channel_id
    if sender:
        where &= ChatMessage.sender == sender
    if before is not None:
        where &= ChatMessage.created_at < to_db(before)
    if after is not None:
        where &= ChatMessage.created_at > to_db(after)
    query = cast(Iterable[_FoundRow], ChatMessage.select(ChatMessage, ChatChannel.type, ChatChannel.name)
                 .join(ChatChannel, on=(ChatChannel.id == ChatMessage.channel))
                 .where(where).order_by(ChatMessage.created_at.desc(), ChatMessage.id.desc()).limit(limit))
    rows = [{"id": m.id, "channel_id": m.channel, "sender": m.sender, "body": m.body,
             "created_at": iso(m.created_at), "channel_type": m.chatchannel.type, "channel_name": m.chatchannel.name}
            for m in query]
    return {"messages": rows}
