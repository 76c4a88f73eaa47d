"""Mailbox endpoints: parse and authorise here, rules in domain/messages.py."""
from __future__ import annotations

from typing import Mapping

from quart import Blueprint, Response, request

from ..auth import require_identity
from ..principal import Principal
from ..context import coord
from ..domain import messages
from ..errors import Invalid
from .common import boolean, integer, json_object, path_int, query_limit, query_search, text

bp = Blueprint("messages", __name__, url_prefix="/api/mailboxes")


def _thread_id(body: dict) -> str | None:
    value = body.get("threadId")
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise Invalid("threadId must be a string")
    if len(value) > messages.THREAD_MAX:
        raise Invalid(f"threadId is longer than {messages.THREAD_MAX} characters")
    return value or None


@bp.post("/<other_than(me):recipient>/messages")
async def send(recipient: str):
    return await post_message(coord(), require_identity(), recipient, await json_object())


@bp.get("/me/messages")
async def inbox():
    principal = require_identity()
    return Response(await inbox_json(coord(), principal, request.args), content_type="application/json")


# The two handlers above are also served by hotpaths.py, straight from ASGI: everything they do
# past admission and transport lives in these two functions, which both paths call.
async def post_message(c, principal: Principal, recipient: str, body: dict) -> dict:
    fields = {
        "title": text(body, "title", required=True, max_len=messages.TITLE_MAX, cut=True),
        "body": text(body, "body", max_len=messages.BODY_MAX, cut=True, default=""),
        "urgent": boolean(body, "urgent", False),
        "thread_id": _thread_id(body),
        "reply_to_message_id": integer(body, "replyToMessageId", minimum=1),
        "dedupe_key": text(body, "dedupeKey", max_len=messages.DEDUPE_MAX) or None,
        "metadata": body.get("metadata"),
    }
    return await c.store.write(messages.send, principal.identity, recipient.strip().lower(), fields,
                               c.env_identities)


async def inbox_json(c, principal: Principal, args: Mapping[str, str]) -> str:
    """The inbox page as JSON text: the rows arrive JSON-encoded by the database; only the envelope is
    written here."""
    status = args.get("status") or None
    if status not in (None, "unread", "read"):
        raise Invalid("status must be unread or read")
    limit = query_limit(args=args)
    cursor = args.get("cursor") or None
    if cursor is not None:
        messages.decode_cursor(cursor, "unread" if status == "unread" else "newest")  # 400 before any work
    encoded, total, next_cursor = await c.store.read(messages.inbox_page, principal.identity, status, limit, cursor)
    tail = f',"nextCursor":"{next_cursor}"' if next_cursor else ""
    return f'{{"messages":{encoded},"total":{total}{tail}}}'


@bp.get("/me/sent")
async def sent():
    principal = require_identity()
    return await coord().store.read(messages.sent, principal.identity, query_limit())


@bp.get("/me/messages/search")
async def search():
    principal = require_identity()
    q = query_search()
    c = coord()
    return await c.store.read(messages.search, principal.identity, q, query_limit())


@bp.post("/me/messages/ack")
async def ack_many():
    principal = require_identity()
    body = await json_object()
    ids = body.get("ids")
    if not isinstance(ids, list):
        raise Invalid("ids must be an array of message ids")
    if len(ids) > messages.BATCH_ACK_MAX:
        raise Invalid(f"ids may hold at most {messages.BATCH_ACK_MAX} entries")
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2**62 for i in ids):
        raise Invalid("ids must be an array of message ids")
    return await coord().store.write(messages.ack_many, principal.identity, ids)


@bp.post("/me/messages/<message_id>/ack")
async def ack(message_id: str):
    principal = require_identity()
    return await coord().store.write(messages.ack, principal.identity, path_int(message_id))


@bp.post("/me/messages/<message_id>/reply")
async def reply(message_id: str):
    principal = require_identity()
    number = path_int(message_id)
    body = await json_object()
    content = text(body, "body", required=True, max_len=messages.BODY_MAX, cut=True)
    return await coord().store.write(messages.reply, principal.identity, number, content)


@bp.post("/me/messages/<message_id>/pending")
async def set_pending(message_id: str):
    principal = require_identity()
    return await coord().store.write(messages.set_pending, principal.identity, path_int(message_id), True)


@bp.delete("/me/messages/<message_id>/pending")
async def clear_pending(message_id: str):
    principal = require_identity()
    return await coord().store.write(messages.set_pending, principal.identity, path_int(message_id), False)
