"""Notebook pages over REST and the collaborative-editing WebSocket."""
from __future__ import annotations

from quart import Blueprint, request

from ..auth import require_identity
from ..context import coord
from ..domain import notebook as pages
from ..errors import Invalid
from ..realtime.notebook_peer import MAX_PAGE_CHARS
from ..realtime.notebook_socket import notebook_socket
from .common import boolean, json_object, query_int, query_limit, string_list, text, timestamp

bp = Blueprint("notebook", __name__, url_prefix="/api")

MAX_CONTENT_CHARS = MAX_PAGE_CHARS  # REST content and the live document share one cap


def _rooms():
    return coord().services.notebook


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


bp.websocket("/notebook/ws")(notebook_socket)
