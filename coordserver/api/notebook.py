"""Notebook pages over REST and the collaborative-editing WebSocket."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import notebook as pages
from ..domain.swarm import optional_timestamp
from .notebook_socket import notebook_socket
from ..schemas.common import Success
from ..schemas.notebook import CreatePage, PageAnswer, Pages, PagesQuery, UpdatePage, Viewers
from .common import accepts, body, query

bp = Blueprint("notebook", __name__, url_prefix="/api")



def _rooms():
    return coord().services.notebook


def _env_admins() -> frozenset[str]:
    return _rooms().env_admins


def _with_live_content(page) -> dict:
    return pages.page_json(page, _rooms().live_text(page.id))


@bp.get("/notebook")
@accepts(query=PagesQuery, returns=Pages)
async def list_pages():
    """List visible, unarchived pages, most recently updated first."""
    principal = require_identity()
    q: PagesQuery = query()
    rows = await coord().store.read(pages.list_pages, principal, q.q, q.limit, q.offset)
    return {"pages": rows}


@bp.post("/notebook")
@accepts(CreatePage, returns=PageAnswer)
async def create_page():
    """Create a page."""
    principal = require_identity()
    data: CreatePage = await body()
    fields = _domain_values({"title": data.title, "content": data.content, "taggedUsers": data.tagged_users,
                             "tags": data.tags, "expiresAt": data.expires_at, "reviewAt": data.review_at})
    page = await coord().store.write(pages.create_page, principal, fields, _env_admins())
    return {"page": page}


@bp.get("/notebook/<other_than(ws):id>")
@accepts(returns=PageAnswer)
async def get_page(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Read a page (live text while it is being edited)."""
    page_id = id
    principal = require_identity()
    page = await coord().store.read(pages.get_page, page_id, principal)
    response = {"page": _with_live_content(page)}
    await _rooms().remember_read(page_id, principal.identity, _stored_state(page))  # the same state
    return response


def _stored_state(page) -> bytes | None:
    return bytes(page.ydoc) if page.ydoc is not None else None


def _domain_values(fields: dict) -> dict:
    """Model values as the domain takes them: the title through its rule, times parsed, no content as ""."""
    if "title" in fields:
        fields["title"] = pages.require_title(fields["title"])
    if "content" in fields:
        fields["content"] = fields["content"] or ""
    for key in ("expiresAt", "reviewAt"):
        if key in fields:
            fields[key] = optional_timestamp(fields[key], key)
    return fields


@bp.patch("/notebook/<other_than(ws):id>")
@accepts(UpdatePage, returns=PageAnswer)
async def update_page(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Change a page; content is merged into the live document as a diff."""
    page_id = id
    principal = require_identity()
    changes = _domain_values((await body()).changes())
    c, rooms = coord(), _rooms()
    base = await rooms.read_base(page_id, principal.identity) if "content" in changes else None
    result = await c.store.write(pages.update_page, page_id, principal, changes, _env_admins(),
                                 page_id not in rooms.rooms, base)
    content = result["merge"]
    if content is not None and not await rooms.merge_content(page_id, content, base):
        # The room was unloaded while the change committed: merge into the stored document instead.
        await c.store.write(pages.update_page, page_id, principal, {"content": content}, _env_admins(), True, base)
        result = {"page": await c.store.read(pages.get_page, page_id, principal)}
    page = result["page"]
    response = {"page": _with_live_content(page)}
    if "content" in changes:
        await rooms.remember_read(page_id, principal.identity, _stored_state(page))  # the same state
    return response


@bp.delete("/notebook/<other_than(ws):id>")
@accepts(returns=Success)
async def archive_page(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Archive a page (owner)."""
    page_id = id
    principal = require_identity()
    await coord().store.write(pages.archive_page, page_id, principal, _env_admins())
    return {"success": True}


@bp.post("/notebook/<id>/presence")
@accepts(returns=Viewers)
async def page_presence(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Viewer heartbeat; returns who is viewing the page."""
    page_id = id
    principal = require_identity()
    await coord().store.read(pages.get_page, page_id, principal)
    return {"viewers": _rooms().heartbeat(page_id, principal.identity)}


bp.websocket("/notebook/ws")(notebook_socket)
