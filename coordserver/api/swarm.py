"""Swarm HTTP: projects, tasks, status moves, task history and notebook-page links (API.md §6)."""
from __future__ import annotations

from quart import Blueprint, request

from ..auth import require_identity
from ..context import coord
from ..domain import projects, swarm
from ..errors import Invalid
from .common import json_object, query_bool, query_limit

bp = Blueprint("swarm", __name__, url_prefix="/api/swarm")


# --- projects --------------------------------------------------------------------------------

@bp.get("/projects")
async def list_projects():
    """Projects the caller may see, by title; archived ones only with includeArchived=true."""
    principal = require_identity()
    return {"projects": await coord().store.read(projects.list_projects, principal, query_bool("includeArchived"))}


@bp.post("/projects")
async def create_project():
    """Create a project (title and color required; leads default to the caller; taggedUsers restricts it)."""
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(projects.create_project, principal, body, c.env_identities)


@bp.patch("/projects/<id>")
async def update_project(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change project fields; null clears nullable ones."""
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(projects.update_project, principal, id, body, c.env_identities)


@bp.post("/projects/<id>/archive")
async def archive_project(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Archive a project (sets archivedAt; no hard delete)."""
    principal = require_identity()
    return await coord().store.write(projects.archive_project, principal, id)


# --- tasks -----------------------------------------------------------------------------------

@bp.get("/tasks")
async def list_tasks():
    """Tasks filtered by statuses (or its alias status), assignee (me = the caller) and project."""
    principal = require_identity()
    statuses = swarm.status_filter(request.args.get("statuses"), request.args.get("status"))
    assignee = request.args.get("assignee") or None
    if assignee == "me":
        assignee = principal.identity
    tasks = await coord().store.read(swarm.list_tasks, principal, statuses, assignee,
                                     request.args.get("projectId") or None, query_bool("includeCompleted"))
    return {"tasks": tasks}


@bp.post("/tasks")
async def create_task():
    """Create a task (status defaults to ready); announced to those who can see its project."""
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(swarm.create_task, principal, body, c.env_identities)


@bp.patch("/tasks/<id>")
async def update_task(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change task fields other than status; null clears."""
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(swarm.update_task, principal, id, body, c.env_identities)


@bp.patch("/tasks/<id>/status")
async def move_task(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Move a task to another status by the state table (claims are atomic)."""
    principal = require_identity()
    body = await json_object()
    status = body.get("status")
    if status is None or status == "":
        raise Invalid("status required")
    status = swarm.valid_status(status)
    reason = body.get("reason")
    if reason is not None and (not isinstance(reason, str) or len(reason) > swarm.REASON_MAX):
        raise Invalid(f"reason must be a string of at most {swarm.REASON_MAX} characters")
    c = coord()
    assignee = body.get("assigneeUserId")
    if assignee is not None:
        assignee = await c.store.read(swarm.known_identity, assignee, "assigneeUserId", c.env_identities)
    return await c.store.write(swarm.move_task, principal, id, status, reason, assignee)


@bp.get("/tasks/<id>/events")
async def task_events(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """A task's history, newest first."""
    principal = require_identity()
    return {"events": await coord().store.read(swarm.list_task_events, principal, id, query_limit())}


# --- notebook-page links ---------------------------------------------------------------------

@bp.get("/tasks/<id>/notebook-pages")
async def list_page_links(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Notebook pages linked to a task that the caller may see."""
    principal = require_identity()
    pages = await coord().store.read(swarm.linked_pages, id, principal.identity, principal.is_admin)
    return {"pages": pages}


@bp.post("/tasks/<id>/notebook-pages")
async def link_page(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Link a notebook page to a task (linking twice is harmless)."""
    principal = require_identity()
    body = await json_object()
    await coord().store.write(swarm.link_page, id, _page_id(body), principal.identity, principal.is_admin)
    return {"ok": True}


@bp.delete("/tasks/<id>/notebook-pages")
async def unlink_page(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Unlink a notebook page from a task (JSON body names the page)."""
    principal = require_identity()
    body = await json_object()
    await coord().store.write(swarm.unlink_page, id, _page_id(body), principal.identity, principal.is_admin)
    return {"ok": True}


def _page_id(body: dict) -> str:
    page_id = body.get("notebookPageId")
    if not isinstance(page_id, str) or not page_id.strip():
        raise Invalid("notebookPageId required")
    return page_id
