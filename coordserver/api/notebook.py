"""Notebook pages over REST and the collaborative-editing WebSocket."""
from __future__ import annotations

import asyncio

from quart import Blueprint, request, websocket

from ..auth import require_identity
from ..principal import Principal
from .. import jsonstrict
from ..context import coord
from ..domain import notebook as pages
from ..errors import Invalid, RateLimited
from ..ratelimit import route_class
from ..realtime.notebook_peer import (CLOSE_INVALID_DATA, CLOSE_NOT_FOUND, CLOSE_TRY_AGAIN, CLOSE_UNKNOWN_TOKEN,
                                      MAX_PAGE_CHARS, Peer, frame)
from .common import boolean, json_object, query_int, query_limit, string_list, text, timestamp

bp = Blueprint("notebook", __name__, url_prefix="/api")

CLOSE_MISSING = 4000
MAX_CONTENT_CHARS = MAX_PAGE_CHARS  # REST content and the live document share one cap


def _rooms():
    return coord().services["notebook"]


def _env_admins() -> frozenset[str]:
    return _rooms().env_admins


def _with_live_content(page) -> dict:
    return pages.page_json(page, _rooms().live_text(page.id))


@bp.get("/notebook")
async def list_pages():
    """List visible, unarchived pages, most recently updated first."""
    principal = require_identity()
    q = (request.args.get("q") or "").strip() or None
    rows = await coord().store.read(pages.list_pages, principal, q, query_limit(), query_int("offset", 0))
    return {"pages": rows}


@bp.post("/notebook")
async def create_page():
    """Create a page."""
    principal = require_identity()
    body = await json_object()
    fields = {
        "title": pages.require_title(body.get("title")),
        "content": text(body, "content", max_len=MAX_CONTENT_CHARS) or "",
        "taggedUsers": string_list(body, "taggedUsers", max_len=50),
        "tags": string_list(body, "tags"),
        "expiresAt": timestamp(body, "expiresAt"),
        "reviewAt": timestamp(body, "reviewAt"),
    }
    page = await coord().store.write(pages.create_page, principal, fields, _env_admins())
    return {"page": page}


@bp.get("/notebook/<other_than(ws):id>")
async def get_page(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Read a page (live text while it is being edited)."""
    page_id = id
    principal = require_identity()
    page = await coord().store.read(pages.get_page, page_id, principal)
    _rooms().remember_read(page_id, principal.identity, _stored_state(page))
    return {"page": _with_live_content(page)}


def _stored_state(page) -> bytes | None:
    return bytes(page.ydoc) if page.ydoc is not None else None


def _patch_changes(body: dict) -> dict:
    changes: dict = {}
    if "title" in body:
        changes["title"] = pages.require_title(body["title"])
    if "content" in body:
        changes["content"] = text(body, "content", max_len=MAX_CONTENT_CHARS) or ""
    if "taggedUsers" in body:
        changes["taggedUsers"] = string_list(body, "taggedUsers", max_len=50)
    if "tags" in body:
        changes["tags"] = string_list(body, "tags")
    for key in ("expiresAt", "reviewAt"):
        if key in body:
            changes[key] = timestamp(body, key)
    if "locked" in body:
        changes["locked"] = _required_bool(body, "locked")
    if "archived" in body:
        changes["archived"] = _required_bool(body, "archived")
    return changes


def _required_bool(body: dict, key: str) -> bool:
    value = boolean(body, key)
    if value is None:
        raise Invalid(f"{key} must be true or false")
    return value


@bp.patch("/notebook/<other_than(ws):id>")
async def update_page(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Change a page; content is merged into the live document as a diff."""
    page_id = id
    principal = require_identity()
    changes = _patch_changes(await json_object())
    c, rooms = coord(), _rooms()
    base = rooms.read_base(page_id, principal.identity) if "content" in changes else None
    result = await c.store.write(pages.update_page, page_id, principal, changes, _env_admins(),
                                 page_id not in rooms.rooms, base)
    content = result["merge"]
    if content is not None and not await rooms.merge_content(page_id, content, base):
        # The room was unloaded while the change committed: merge into the stored document instead.
        await c.store.write(pages.update_page, page_id, principal, {"content": content}, _env_admins(), True, base)
        result = {"page": await c.store.read(pages.get_page, page_id, principal)}
    page = result["page"]
    if "content" in changes:
        rooms.remember_read(page_id, principal.identity, _stored_state(page))
    return {"page": _with_live_content(page)}


@bp.delete("/notebook/<other_than(ws):id>")
async def archive_page(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Archive a page (owner)."""
    page_id = id
    principal = require_identity()
    await coord().store.write(pages.archive_page, page_id, principal, _env_admins())
    return {"success": True}


@bp.post("/notebook/<id>/presence")
async def page_presence(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Viewer heartbeat; returns who is viewing the page."""
    page_id = id
    principal = require_identity()
    await coord().store.read(pages.get_page, page_id, principal)
    return {"viewers": _rooms().heartbeat(page_id, principal.identity)}


# --- WebSocket -------------------------------------------------------------------------------

def _socket_token() -> str | None:
    token = websocket.args.get("token")
    if token:
        return token
    header = websocket.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return None


async def _refuse(code: int, message: str) -> None:
    await websocket.send(frame("error", message=message))
    await websocket.close(code, message)


def _rate_limited(principal: Principal) -> bool:
    c = coord()
    if not c.settings.rate_limits:
        return False
    try:
        c.services["ratelimit"].check(route_class("GET", "/api/notebook/ws"), principal.identity)
    except RateLimited:
        return True
    return False


@bp.websocket("/notebook/ws")
async def notebook_socket():
    """See the skill doc: JSON frames carrying Yjs v1 updates as arrays of byte values."""
    c = coord()
    await websocket.accept()
    page_id, token = websocket.args.get("page"), _socket_token()
    if not page_id or not token:
        return await _refuse(CLOSE_MISSING, "page and token are required")
    principal = await c.services["tokens"].resolve(token)
    if principal is None:
        return await _refuse(CLOSE_UNKNOWN_TOKEN, "Invalid token")
    if _rate_limited(principal):
        return await _refuse(CLOSE_TRY_AGAIN, "Too many requests; retry later")
    c.services["presence"].touch(principal.identity, "api")
    peer = Peer(principal.identity, principal.is_admin, principal.token_id, principal.expires_at)
    room = await _rooms().join(page_id, peer) if "\x00" not in page_id else None
    if room is None:
        return await _refuse(CLOSE_NOT_FOUND, "Page not found")
    presence, guard = c.services["presence"], c.services["tokens_guard"]
    presence.connection_opened(principal.identity, "api")  # an open editor keeps its identity online
    guard.admit(peer)  # ends when its token is revoked or expires
    sender = asyncio.ensure_future(_send_frames(peer))
    receiver = asyncio.ensure_future(_receive_frames(room, peer))
    try:
        await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        room.leave(peer)
        guard.release(peer)
        presence.connection_closed(principal.identity, "api")
        for task in (sender, receiver):
            task.cancel()
        await asyncio.gather(sender, receiver, return_exceptions=True)


async def _send_frames(peer: Peer) -> None:
    while True:
        item = await peer.next_item()
        if isinstance(item, tuple):
            code, message = item
            await _refuse(code, message)
            return
        await websocket.send(item)


async def _receive_frames(room, peer: Peer) -> None:
    while not peer.closing:
        data = await websocket.receive()
        try:
            message = jsonstrict.loads(data)
            if not isinstance(message, dict):
                raise ValueError
        except (ValueError, UnicodeDecodeError):
            peer.close(CLOSE_INVALID_DATA, "Frames must be JSON objects")
            return
        if message.get("type") != "update":
            continue  # unknown client frames are ignored (forward compatibility)
        raw = message.get("update")
        try:
            if not isinstance(raw, list):
                raise TypeError
            update = bytes(raw)
        except (TypeError, ValueError):
            peer.close(CLOSE_INVALID_DATA, "update must be an array of byte values")
            return
        room.receive(peer, update)
