"""Mailbox endpoints: parse and authorise here, rules in domain/messages.py."""
from __future__ import annotations

from quart import Blueprint, Response

from ..auth import require_identity
from ..principal import Principal
from ..context import coord
from ..domain import messages
from ..schemas.common import Identity
from ..schemas.messages import (AckMany, AckResult, InboxQuery, Message, MessagePage, Messages, Reply, SearchQuery,
                                SearchResults, SendMessage, SentQuery)
from .common import accepts, body, path_int, query

bp = Blueprint("messages", __name__, url_prefix="/api/mailboxes")


@bp.post("/<other_than(me):recipient>/messages")
@accepts(SendMessage, returns=Message, path={"recipient": Identity})
async def send(recipient: str):
    """Send a message to a mailbox."""
    principal = require_identity()
    return await post_message(coord(), principal, recipient, await body())


@bp.get("/me/messages")
@accepts(query=InboxQuery, returns=MessagePage)
async def inbox():
    """The caller's inbox, newest first (unread first with status=unread), paged by cursor."""
    principal = require_identity()
    return Response(await inbox_json(coord(), principal, query()), content_type="application/json")


# The two handlers above are also served by hotpaths.py, straight from ASGI: everything they do
# past admission and transport lives in these two functions, which both paths call.
async def post_message(c, principal: Principal, recipient: str, data: SendMessage) -> dict:
    return await c.store.write(messages.send, principal.identity, recipient.strip().lower(), data.kwargs(),
                               c.env_identities)


async def inbox_json(c, principal: Principal, q: InboxQuery) -> str:
    """The inbox page as JSON text: the rows arrive JSON-encoded by the database, or the whole page from a
    kept answer (realtime/inbox_cache.py)."""
    if q.cursor is not None:
        messages.decode_cursor(q.cursor, "unread" if q.status == "unread" else "newest")  # 400 before any work
    return await c.services.inbox_cache.page(principal.identity, q.status, q.limit, q.cursor)


@bp.get("/me/sent")
@accepts(query=SentQuery, returns=Messages)
async def sent():
    """Messages the caller sent, newest first."""
    principal = require_identity()
    return await coord().store.read(messages.sent, principal.identity, query().limit)


@bp.get("/me/messages/search")
@accepts(query=SearchQuery, returns=SearchResults)
async def search():
    """Full-text search over the caller's inbox."""
    principal = require_identity()
    q = query()
    c = coord()
    return await c.store.read(messages.search, principal.identity, q.q, q.limit)


@bp.post("/me/messages/ack")
@accepts(AckMany, returns=AckResult)
async def ack_many():
    """Mark many messages read."""
    principal = require_identity()
    return await coord().store.write(messages.ack_many, principal.identity, (await body()).ids)


@bp.post("/me/messages/<rowid:message_id>/ack")
@accepts(returns=Message)
async def ack(message_id: str):
    principal = require_identity()
    return await coord().store.write(messages.ack, principal.identity, path_int(message_id))


@bp.post("/me/messages/<rowid:message_id>/reply")
@accepts(Reply, returns=Message)
async def reply(message_id: str):
    principal = require_identity()
    number = path_int(message_id)
    return await coord().store.write(messages.reply, principal.identity, number, (await body()).body)


@bp.post("/me/messages/<rowid:message_id>/pending")
@accepts(returns=Message)
async def set_pending(message_id: str):
    principal = require_identity()
    return await coord().store.write(messages.set_pending, principal.identity, path_int(message_id), True)


@bp.delete("/me/messages/<rowid:message_id>/pending")
@accepts(returns=Message)
async def clear_pending(message_id: str):
    principal = require_identity()
    return await coord().store.write(messages.set_pending, principal.identity, path_int(message_id), False)
