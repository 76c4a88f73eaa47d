"""Notebook pages over REST and the collaborative-editing WebSocket."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import notebook as pages
from ..domain.swarm import optional_timestamp
from .notebook_socket import notebook_socket
from ..schemas.common import Success
from ..domain import notebook_versions as versions
from ..schemas.notebook import (Checkpoint, CheckpointAnswer, CreatePage, PageAnswer, Pages, PagesQuery,
                                RestoreAnswer, UpdatePage, VersionAnswer, Versions, VersionsQuery, Viewers)
from .common import accepts, body, path_int, query

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
    rooms = _rooms()
    base = await rooms.read_base(page_id, principal.identity) if "content" in changes else None
    page = await _change(page_id, principal, changes, base)
    response = {"page": _with_live_content(page)}
    if "content" in changes:
        await rooms.remember_read(page_id, principal.identity, _stored_state(page))  # the same state
    return response


async def _change(page_id: str, principal, changes: dict, base: bytes | None):
    """A page change; content is merged as a diff against `base` (None: the current text) into the live
    room of this process, or else the stored document (rooms in other processes hear it on the bus)."""
    c, rooms = coord(), _rooms()
    result = await c.store.write(pages.update_page, page_id, principal, changes, _env_admins(),
                                 page_id not in rooms.rooms, base)
    content = result["merge"]
    if content is not None and not await rooms.merge_content(page_id, content, base):
        # The room was unloaded while the change committed: merge into the stored document instead.
        await c.store.write(pages.update_page, page_id, principal, {"content": content}, _env_admins(), True, base)
        result = {"page": await c.store.read(pages.get_page, page_id, principal)}
    return result["page"]


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


# --- versions --------------------------------------------------------------------------------

@bp.get("/notebook/<id>/versions")
@accepts(query=VersionsQuery, returns=Versions)
async def list_versions(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """A page's versions, newest first (who edited since the previous one, when, size, label)."""
    principal = require_identity()
    q: VersionsQuery = query()
    rows = await coord().store.read(versions.list_versions, id, principal, q.limit, q.offset)
    return {"versions": rows}


@bp.get("/notebook/<id>/versions/<rowid:version_id>")
@accepts(returns=VersionAnswer)
async def get_version(id: str, version_id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """One version of a page, with its text."""
    principal = require_identity()
    number = path_int(version_id)
    return {"version": await coord().store.read(versions.get_version, id, number, principal)}


@bp.post("/notebook/<id>/versions")
@accepts(Checkpoint, returns={201: CheckpointAnswer}, body_required=False)
async def checkpoint(id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Make a version of the page now (its live text), with an optional label."""
    page_id = id
    principal = require_identity()
    data: Checkpoint = await body()
    label = (data.label or "").strip() or None
    c, rooms = coord(), _rooms()
    await c.store.read(versions.check_editable, page_id, principal)
    await rooms.flush(page_id)
    version = await c.store.write(versions.checkpoint, page_id, principal, label, _env_admins(),
                                  rooms.live_text(page_id))
    return {"version": version}, 201


@bp.post("/notebook/<id>/versions/<rowid:version_id>/restore")
@accepts(returns=RestoreAnswer)
async def restore_version(id: str, version_id: str):  # noqa: A002 (the path parameter is {id}, as in the API)
    """Make the page's text that of an older version, as an ordinary edit of the live document (editors
    converge on it). The text replaced is kept as a version first; the restore is a version too."""
    page_id = id
    principal = require_identity()
    number = path_int(version_id)
    c, rooms = coord(), _rooms()
    text = await c.store.read(versions.restore_source, page_id, number, principal)
    await rooms.flush(page_id)
    current = rooms.live_text(page_id)
    if current is None:
        current = (await c.store.read(pages.get_page, page_id, principal)).content
    await c.store.write(versions.keep_before_restore, page_id, current, _env_admins())
    page = await _change(page_id, principal, {"content": text}, None)
    await rooms.flush(page_id)
    version = await c.store.write(versions.record_restore, page_id, principal, number, text, _env_admins())
    return {"version": version, "page": _with_live_content(page)}


bp.websocket("/notebook/ws")(notebook_socket)
