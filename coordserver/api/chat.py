"""Chat endpoints: parse and authorise here, rules in domain/chat.py."""
from __future__ import annotations

from quart import Blueprint, request

from ..auth import require_identity
from ..context import coord
from ..domain import chat
from ..errors import Invalid
from .common import json_object, path_int, query_bool, query_limit, query_search, query_time, text

bp = Blueprint("chat", __name__, url_prefix="/api/chat")


@bp.get("/channels")
async def list_channels():
    principal = require_identity()
    return await coord().store.read(chat.list_channels, principal.identity, query_bool("archived"))


@bp.post("/channels")
async def create_channel():
    principal = require_identity()
    body = await json_object()
    kind = body.get("type")
    c = coord()
    if kind == "dm":
        other = body.get("identity")
        if not isinstance(other, str) or not other.strip():
            raise Invalid("identity required for DM")
        return await c.store.write(chat.open_dm, principal.identity, other, c.env_identities)
    if kind == "group":
        name, members = body.get("name"), body.get("members")
        if not isinstance(name, str) or not name.strip() or not isinstance(members, list) or not members:
            raise Invalid("name and members required for group chat")
        name = name.strip()
        if len(name) > chat.NAME_MAX:
            raise Invalid(f"name is longer than {chat.NAME_MAX} characters")
        if len(members) > chat.MEMBERS_MAX:
            raise Invalid(f"members may hold at most {chat.MEMBERS_MAX} identities")
        return await c.store.write(chat.create_group, principal.identity, name, members, c.env_identities)
    raise Invalid('type must be "dm" or "group"')


@bp.get("/channels/<channel_id>/messages")
async def list_messages(channel_id: str):
    principal = require_identity()
    raw_before = request.args.get("before")
    before = path_int(raw_before, "before") if raw_before else None
    return await coord().store.read(chat.messages, principal.identity, channel_id, query_limit(), before)


@bp.post("/channels/<channel_id>/messages")
async def post_message(channel_id: str):
    principal = require_identity()
    body = await json_object()
    content = text(body, "body", required=True, strip=True, message="body required")
    if len(content) > chat.BODY_MAX:
        raise Invalid(f"body is longer than {chat.BODY_MAX} characters")
    return await coord().store.write(chat.post, principal.identity, channel_id, content)


@bp.post("/channels/<channel_id>/read")
async def mark_read(channel_id: str):
    principal = require_identity()
    return await coord().store.write(chat.mark_read, principal.identity, channel_id)


@bp.post("/channels/<channel_id>/typing")
async def typing(channel_id: str):
    principal = require_identity()
    await coord().store.read(chat.typing, channel_id, principal.identity)
    return {"ok": True}


@bp.post("/channels/<channel_id>/archive")
async def archive(channel_id: str):
    principal = require_identity()
    return await coord().store.write(chat.set_archived, principal.identity, channel_id, True)


@bp.post("/channels/<channel_id>/unarchive")
async def unarchive(channel_id: str):
    principal = require_identity()
    return await coord().store.write(chat.set_archived, principal.identity, channel_id, False)


@bp.get("/search")
async def search():
    principal = require_identity()
    q = query_search()
    filters = (request.args.get("channelId") or None, (request.args.get("sender") or "").strip().lower() or None,
               query_time("before"), query_time("after"))
    return await coord().store.read(chat.search, principal.identity, q, *filters, query_limit())
