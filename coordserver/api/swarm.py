"""Swarm HTTP: projects, tasks, status moves, task history and notebook-page links (API.md §6)."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import lease_changes, projects, swarm
from ..schemas.common import Ok
from ..schemas.swarm import (MoveTask, NewProject, NewTask, PageLink, Project, ProjectFields, Projects, ProjectsQuery, RenewLease, Task,
                             TaskEvents, TaskEventsQuery, TaskFields, TaskPageLinks, Tasks, TasksQuery)
from .common import accepts, body, query

bp = Blueprint("swarm", __name__, url_prefix="/api/swarm")


# --- projects --------------------------------------------------------------------------------

@bp.get("/projects")
@accepts(query=ProjectsQuery, returns=Projects)
async def list_projects():
    """Projects the caller may see, by title; archived ones only with includeArchived=true."""
    principal = require_identity()
    return {"projects": await coord().store.read(projects.list_projects, principal, query().include_archived)}


@bp.post("/projects")
@accepts(NewProject, returns=Project)
async def create_project():
    """Create a project (title and color required; leads default to the caller; taggedUsers restricts it)."""
    principal = require_identity()
    fields: NewProject = await body()
    c = coord()
    return await c.store.write(projects.create_project, principal, fields.changes(), c.env_identities)


@bp.patch("/projects/<id>")
@accepts(ProjectFields, returns=Project)
async def update_project(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change project fields; null clears nullable ones."""
    principal = require_identity()
    fields: ProjectFields = await body()
    c = coord()
    return await c.store.write(projects.update_project, principal, id, fields.changes(), c.env_identities)


@bp.post("/projects/<id>/archive")
@accepts(returns=Project)
async def archive_project(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Archive a project (sets archivedAt; no hard delete)."""
    principal = require_identity()
    return await coord().store.write(projects.archive_project, principal, id)


# --- tasks -----------------------------------------------------------------------------------

@bp.get("/tasks")
@accepts(query=TasksQuery, returns=Tasks)
async def list_tasks():
    """Tasks filtered by statuses (or its alias status), assignee (me = the caller) and project."""
    principal = require_identity()
    q: TasksQuery = query()
    statuses = swarm.status_filter(q.statuses, q.status)
    assignee = principal.identity if q.assignee == "me" else q.assignee
    tasks = await coord().store.read(swarm.list_tasks, principal, statuses, assignee, q.project_id,
                                     q.include_completed)
    return {"tasks": tasks}


@bp.post("/tasks")
@accepts(NewTask, returns=Task)
async def create_task():
    """Create a task (status defaults to ready); announced to those who can see its project."""
    principal = require_identity()
    fields: NewTask = await body()
    c = coord()
    return await c.store.write(swarm.create_task, principal, fields.changes(), c.env_identities)


@bp.patch("/tasks/<id>")
@accepts(TaskFields, returns=Task)
async def update_task(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change task fields other than status; null clears."""
    principal = require_identity()
    fields: TaskFields = await body()
    c = coord()
    return await c.store.write(swarm.update_task, principal, id, fields.changes(), c.env_identities)


@bp.patch("/tasks/<id>/status")
@accepts(MoveTask, returns=Task)
async def move_task(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Move a task to another status by the state table (claims are atomic)."""
    principal = require_identity()
    data: MoveTask = await body()
    status = swarm.valid_status(data.status)
    c = coord()
    assignee = data.assignee_user_id
    if assignee is not None:
        assignee = await c.store.read(swarm.known_identity, assignee, "assigneeUserId", c.env_identities)
    return await c.store.write(swarm.move_task, principal, id, status, data.reason, assignee, data.lease_seconds)


@bp.post("/tasks/<id>/renew")
@accepts(RenewLease, returns=Task, body_required=False)
async def renew_lease(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Extend the lease of a task you hold (by leaseSeconds, else the lease's own length)."""
    principal = require_identity()
    data: RenewLease = await body()
    return await coord().store.write(lease_changes.renew, principal, id, data.lease_seconds)


@bp.get("/tasks/<id>/events")
@accepts(query=TaskEventsQuery, returns=TaskEvents)
async def task_events(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """A task's history, newest first."""
    principal = require_identity()
    return {"events": await coord().store.read(swarm.list_task_events, principal, id, query().limit)}


# --- notebook-page links ---------------------------------------------------------------------

@bp.get("/tasks/<id>/notebook-pages")
@accepts(returns=TaskPageLinks)
async def list_page_links(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Notebook pages linked to a task that the caller may see."""
    principal = require_identity()
    pages = await coord().store.read(swarm.linked_pages, id, principal.identity, principal.is_admin)
    return {"pages": pages}


@bp.post("/tasks/<id>/notebook-pages")
@accepts(PageLink, returns=Ok)
async def link_page(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Link a notebook page to a task (linking twice is harmless)."""
    principal = require_identity()
    page_id = (await body()).notebook_page_id
    await coord().store.write(swarm.link_page, id, page_id, principal.identity, principal.is_admin)
    return {"ok": True}


@bp.delete("/tasks/<id>/notebook-pages")
@accepts(PageLink, returns=Ok)
async def unlink_page(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Unlink a notebook page from a task (JSON body names the page)."""
    principal = require_identity()
    page_id = (await body()).notebook_page_id
    await coord().store.write(swarm.unlink_page, id, page_id, principal.identity, principal.is_admin)
    return {"ok": True}
