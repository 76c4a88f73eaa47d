"""Chat endpoints: parse and authorise here, rules in domain/chat.py."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import chat
from ..domain.swarm import optional_timestamp
from ..schemas.chat import (ChannelOpened, Channels, ChannelsQuery, ChatMessages, ChatMessagesQuery, PostedChatMessage,
                            ChatPost, ChatSearchQuery, ChatSearchResults, CreateChannel)
from ..schemas.common import Ok
from .common import accepts, body, query

bp = Blueprint("chat", __name__, url_prefix="/api/chat")


@bp.get("/channels")
@accepts(query=ChannelsQuery, returns=Channels)
async def list_channels():
    """The caller's channels (archived ones with archived=true)."""
    principal = require_identity()
    return await coord().store.read(chat.list_channels, principal.identity, query().archived)


@bp.post("/channels")
@accepts(CreateChannel, returns=ChannelOpened)
async def create_channel():
    """Open a DM or create a group channel."""
    principal = require_identity()
    data: CreateChannel = await body()
    c = coord()
    if data.type == "dm":
        return await c.store.write(chat.open_dm, principal.identity, data.identity, c.env_identities)
    return await c.store.write(chat.create_group, principal.identity, data.name, data.members, c.env_identities)


@bp.get("/channels/<channel_id>/messages")
@accepts(query=ChatMessagesQuery, returns=ChatMessages)
async def list_messages(channel_id: str):
    """A channel's messages, newest first, older than `before`."""
    principal = require_identity()
    q = query()
    return await coord().store.read(chat.messages, principal.identity, channel_id, q.limit, q.before)


@bp.post("/channels/<channel_id>/messages")
@accepts(ChatPost, returns=PostedChatMessage)
async def post_message(channel_id: str):
    """Post to a channel."""
    principal = require_identity()
    return await coord().store.write(chat.post, principal.identity, channel_id, (await body()).body)


@bp.post("/channels/<channel_id>/read")
@accepts(returns=Ok)
async def mark_read(channel_id: str):
    principal = require_identity()
    return await coord().store.write(chat.mark_read, principal.identity, channel_id)


@bp.post("/channels/<channel_id>/typing")
@accepts(returns=Ok)
async def typing(channel_id: str):
    principal = require_identity()
    await coord().store.read(chat.typing, channel_id, principal.identity)
    return {"ok": True}


@bp.post("/channels/<channel_id>/archive")
@accepts(returns=Ok)
async def archive(channel_id: str):
    principal = require_identity()
    return await coord().store.write(chat.set_archived, principal.identity, channel_id, True)


@bp.post("/channels/<channel_id>/unarchive")
@accepts(returns=Ok)
async def unarchive(channel_id: str):
    principal = require_identity()
    return await coord().store.write(chat.set_archived, principal.identity, channel_id, False)


@bp.get("/search")
@accepts(query=ChatSearchQuery, returns=ChatSearchResults)
async def search():
    """Search the caller's channels."""
    principal = require_identity()
    q: ChatSearchQuery = query()
    filters = (q.channel_id, q.sender, optional_timestamp(q.before, "before"), optional_timestamp(q.after, "after"))
    return await coord().store.read(chat.search, principal.identity, q.q, *filters, q.limit)
