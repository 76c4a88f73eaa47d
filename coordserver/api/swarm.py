"""Swarm HTTP: projects, tasks, status moves, task history and notebook-page links (API.md §6)."""
from __future__ import annotations

from quart import Blueprint, request

from ..auth import require_identity
from ..context import coord
from ..domain import swarm
from ..errors import Invalid
from .common import json_object, query_bool, query_limit

bp = Blueprint("swarm", __name__, url_prefix="/api/swarm")


# --- projects --------------------------------------------------------------------------------

@bp.get("/projects")
async def list_projects():
    require_identity()
    return {"projects": await coord().store.read(swarm.list_projects, query_bool("includeArchived"))}


@bp.post("/projects")
async def create_project():
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(swarm.create_project, principal.identity, body, c.env_identities)


@bp.patch("/projects/<project_id>")
async def update_project(project_id: str):
    require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(swarm.update_project, project_id, body, c.env_identities)


@bp.post("/projects/<project_id>/archive")
async def archive_project(project_id: str):
    require_identity()
    return await coord().store.write(swarm.archive_project, project_id)


# --- tasks -----------------------------------------------------------------------------------

def _status_filter() -> list[str] | None:
    raw = request.args.get("statuses")
    if raw is None or not raw.strip():
        return None
    return [swarm.valid_status(s.strip()) for s in raw.split(",") if s.strip()]


@bp.get("/tasks")
async def list_tasks():
    require_identity()
    statuses = _status_filter()
    tasks = await coord().store.read(swarm.list_tasks, statuses, request.args.get("assignee") or None,
                                     request.args.get("projectId") or None, query_bool("includeCompleted"))
    return {"tasks": tasks}


@bp.post("/tasks")
async def create_task():
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(swarm.create_task, principal.identity, body, c.env_identities)


@bp.patch("/tasks/<task_id>")
async def update_task(task_id: str):
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(swarm.update_task, principal.identity, task_id, body, c.env_identities)


@bp.patch("/tasks/<task_id>/status")
async def move_task(task_id: str):
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
    return await c.store.write(swarm.move_task, principal.identity, task_id, status, reason, assignee)


@bp.get("/tasks/<task_id>/events")
async def task_events(task_id: str):
    require_identity()
    return {"events": await coord().store.read(swarm.list_task_events, task_id, query_limit())}


# --- notebook-page links ---------------------------------------------------------------------

@bp.get("/tasks/<task_id>/notebook-pages")
async def list_page_links(task_id: str):
    principal = require_identity()
    pages = await coord().store.read(swarm.linked_pages, task_id, principal.identity, principal.is_admin)
    return {"pages": pages}


@bp.post("/tasks/<task_id>/notebook-pages")
async def link_page(task_id: str):
    principal = require_identity()
    body = await json_object()
    await coord().store.write(swarm.link_page, task_id, _page_id(body), principal.identity, principal.is_admin)
    return {"ok": True}


@bp.delete("/tasks/<task_id>/notebook-pages")
async def unlink_page(task_id: str):
    principal = require_identity()
    body = await json_object()
    await coord().store.write(swarm.unlink_page, task_id, _page_id(body), principal.identity, principal.is_admin)
    return {"ok": True}


def _page_id(body: dict) -> str:
    page_id = body.get("notebookPageId")
    if not isinstance(page_id, str) or not page_id.strip():
        raise Invalid("notebookPageId required")
    return page_id
