"""Workflows HTTP (API.md §18): CRUD and attaching workflows to tasks."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import workflows
from ..schemas.common import Ok
from ..schemas.swarm import DisabledQuery
from ..schemas.workflows import AttachWorkflow, NewWorkflow, TaskWorkflow, Workflow, WorkflowFields, Workflows
from .common import accepts, body, query

bp = Blueprint("workflows", __name__, url_prefix="/api/swarm")


@bp.get("/workflows")
@accepts(query=DisabledQuery, returns=Workflows)
async def list_workflows():
    """Workflows the caller may see, by title; disabled ones only with includeDisabled=true."""
    principal = require_identity()
    return {"workflows": await coord().store.read(workflows.list_workflows, principal, query().include_disabled)}


@bp.get("/workflows/<id>")
@accepts(returns=Workflow)
async def get_workflow(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    principal = require_identity()
    return await coord().store.read(workflows.get_workflow, principal, id)


@bp.post("/workflows")
@accepts(NewWorkflow, returns=Workflow)
async def create_workflow():
    """Create a workflow (title required); visible like a notebook page."""
    principal = require_identity()
    fields: NewWorkflow = await body()
    c = coord()
    return await c.store.write(workflows.create_workflow, principal, fields.changes(), c.env_identities,
                               c.env_admins)


@bp.patch("/workflows/<id>")
@accepts(WorkflowFields, returns=Workflow)
async def update_workflow(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change a workflow (creator or admin); null clears nullable fields."""
    principal = require_identity()
    fields: WorkflowFields = await body()
    c = coord()
    return await c.store.write(workflows.update_workflow, principal, id, fields.changes(), c.env_identities,
                               c.env_admins)


@bp.delete("/workflows/<id>")
@accepts(returns=Ok)
async def delete_workflow(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Delete a workflow (creator or admin); it is detached from every task."""
    principal = require_identity()
    c = coord()
    await c.store.write(workflows.delete_workflow, principal, id, c.env_admins)
    return {"ok": True}


@bp.get("/tasks/<id>/workflows")
@accepts(returns=Workflows)
async def task_workflows(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """The workflows attached to a task that the caller may see, disabled ones included."""
    principal = require_identity()
    return {"workflows": await coord().store.read(workflows.task_workflows, principal, id)}


@bp.post("/tasks/<id>/workflows")
@accepts(AttachWorkflow, returns=TaskWorkflow)
async def attach_workflow(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Attach a workflow to a task (attaching twice returns the first attachment)."""
    principal = require_identity()
    workflow_id = (await body()).workflow_id
    return await coord().store.write(workflows.attach, principal, id, workflow_id)


@bp.delete("/tasks/<id>/workflows/<workflow_id>")
@accepts(returns=Ok)
async def detach_workflow(id: str, workflow_id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Detach a workflow from a task."""
    principal = require_identity()
    await coord().store.write(workflows.detach, principal, id, workflow_id)
    return {"ok": True}
