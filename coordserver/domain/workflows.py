"""Workflows (API.md §18): procedure documents agents follow for a task; the server stores, never runs them.

Visible like notebook pages (visibility.can_see); only the creator or an admin changes or deletes one.
Changes log `workflow_updated` to those who can see the workflow; attaching and detaching log
`swarm_task_updated` for the task (to those who can see its project), in the unit of the change.
"""
from __future__ import annotations

from typing import Any

from .. import db
from ..jsonstrict import JSONObject
from ..errors import Forbidden, Invalid, NotFound
from ..events import log
from ..models import Task, TaskWorkflow, Workflow
from ..principal import Principal
from ..timeutil import iso, to_db
from . import swarm
from .fields import flag, optional_http_url
from .projects import tagged_users
from .visibility import audience, can_see, is_owner

TITLE_MAX, URL_MAX, TEXT_MAX = 255, 500, 20_000
EVENT_TYPE = "workflow_updated"


def workflow_json(w: Workflow) -> JSONObject:
    return {"id": w.id, "title": w.title, "description": w.description, "documentUrl": w.document_url,
            "document": w.document, "enabled": w.enabled, "taggedUsers": w.tagged_users,
            "expiresAt": iso(w.expires_at), "reviewAt": iso(w.review_at), "createdBy": w.created_by,
            "updatedAt": iso(w.updated_at), "createdAt": iso(w.created_at)}


def attachment_json(link: TaskWorkflow) -> JSONObject:
    return {"taskId": link.task_id, "workflowId": link.workflow_id, "attachedBy": link.attached_by,
            "attachedAt": iso(link.attached_at)}


# --- fields ----------------------------------------------------------------------------------

def _title(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("title is required")
    if len(value.strip()) > TITLE_MAX:
        raise Invalid(f"title is longer than {TITLE_MAX} characters")
    return value.strip()


def _columns(body: JSONObject, env_identities: frozenset[str]) -> dict[str, Any]:
    """Validated columns for the fields present in the body."""
    columns: dict[str, Any] = {}
    if "title" in body:
        columns["title"] = _title(body["title"])
    if "description" in body:
        columns["description"] = swarm.optional_text(body["description"], "description", TEXT_MAX)
    if "documentUrl" in body:
        columns["document_url"] = optional_http_url(body["documentUrl"], "documentUrl", URL_MAX)
    if "document" in body:
        columns["document"] = body["document"]
    if "enabled" in body:
        columns["enabled"] = flag(body["enabled"], "enabled")
    if "taggedUsers" in body:
        columns["tagged_users"] = tagged_users(body["taggedUsers"], env_identities)
    for key, column in (("expiresAt", "expires_at"), ("reviewAt", "review_at")):
        if key in body:
            columns[column] = to_db(swarm.optional_timestamp(body[key], key))
    return columns


# --- reading ---------------------------------------------------------------------------------

def _workflow(workflow_id: object, viewer: Principal, message: str = "Not found") -> Workflow:
    workflow = Workflow.get_or_none(Workflow.id == workflow_id) if isinstance(workflow_id, str) else None
    if workflow is None or not can_see(workflow.created_by, workflow.tagged_users, viewer.identity, viewer.is_admin):
        raise NotFound(message)
    return workflow


def get_workflow(viewer: Principal, workflow_id: str) -> JSONObject:
    return workflow_json(_workflow(workflow_id, viewer))


def list_workflows(viewer: Principal, include_disabled: bool) -> list[JSONObject]:
    query = Workflow.select()
    if not include_disabled:
        query = query.where(Workflow.enabled == True)  # noqa: E712
    rows = query.order_by(Workflow.title, Workflow.created_at, Workflow.id)
    return [workflow_json(w) for w in rows
            if can_see(w.created_by, w.tagged_users, viewer.identity, viewer.is_admin)]


# --- writing ---------------------------------------------------------------------------------

def _emit(workflow: Workflow, action: str, env_admins: frozenset[str]) -> None:
    log.append(EVENT_TYPE, {"type": EVENT_TYPE, "workflowId": workflow.id, "action": action},
               to=audience(workflow.created_by, workflow.tagged_users, env_admins))


def create_workflow(viewer: Principal, body: JSONObject, env_identities: frozenset[str],
                    env_admins: frozenset[str]) -> JSONObject:
    if "title" not in body:
        raise Invalid("title is required")
    columns = {"enabled": True}
    columns.update(_columns(body, env_identities))
    now = to_db(db.now())
    workflow = Workflow.create(created_by=viewer.identity, created_at=now, updated_at=now, **columns)
    _emit(workflow, "created", env_admins)
    return workflow_json(workflow)


def _owned(workflow_id: str, viewer: Principal) -> Workflow:
    workflow = _workflow(workflow_id, viewer)
    if not is_owner(workflow.created_by, viewer.identity, viewer.is_admin):
        raise Forbidden("Only the workflow's creator or an admin may change or delete it")
    return workflow


def update_workflow(viewer: Principal, workflow_id: str, body: JSONObject, env_identities: frozenset[str],
                    env_admins: frozenset[str]) -> JSONObject:
    columns = _columns(body, env_identities)
    workflow = _owned(workflow_id, viewer)
    if not columns:
        return workflow_json(workflow)
    was_seen_by = audience(workflow.created_by, workflow.tagged_users, env_admins)
    Workflow.update(updated_at=to_db(db.now()), **columns).where(Workflow.id == workflow.id).execute()
    workflow = Workflow.get_by_id(workflow.id)
    now_seen_by = audience(workflow.created_by, workflow.tagged_users, env_admins)
    # Those who lost sight of it hear of the change too, so their lists drop it.
    to = None if was_seen_by is None or now_seen_by is None else sorted(set(was_seen_by) | set(now_seen_by))
    log.append(EVENT_TYPE, {"type": EVENT_TYPE, "workflowId": workflow.id, "action": "updated"}, to=to)
    return workflow_json(workflow)


def delete_workflow(viewer: Principal, workflow_id: str, env_admins: frozenset[str]) -> None:
    workflow = _owned(workflow_id, viewer)
    attached = [link.task_id for link in TaskWorkflow.select(TaskWorkflow.task_id)
                .where(TaskWorkflow.workflow_id == workflow.id)]
    TaskWorkflow.delete().where(TaskWorkflow.workflow_id == workflow.id).execute()
    Workflow.delete().where(Workflow.id == workflow.id).execute()
    _emit(workflow, "deleted", env_admins)
    for task in Task.select().where(Task.id.in_(attached)) if attached else ():
        swarm.announce_change(task, viewer.identity)


# --- attachments -----------------------------------------------------------------------------

def task_workflows(viewer: Principal, task_id: str) -> list[JSONObject]:
    swarm.visible_task(task_id, viewer)
    rows = (Workflow.select().join(TaskWorkflow, on=(TaskWorkflow.workflow_id == Workflow.id))
            .where(TaskWorkflow.task_id == task_id).order_by(Workflow.title, Workflow.id))
    return [workflow_json(w) for w in rows if can_see(w.created_by, w.tagged_users, viewer.identity, viewer.is_admin)]


def attach(viewer: Principal, task_id: str, workflow_id: object) -> JSONObject:
    if not isinstance(workflow_id, str) or not workflow_id.strip():
        raise Invalid("workflowId required")
    task = swarm.visible_task(task_id, viewer)
    workflow = _workflow(workflow_id, viewer, "Workflow not found")
    where = (TaskWorkflow.task_id == task.id) & (TaskWorkflow.workflow_id == workflow.id)
    first = TaskWorkflow.get_or_none(where)
    if first is not None:  # attaching twice is harmless and returns the first attachment
        return attachment_json(first)
    (TaskWorkflow.insert(task_id=task.id, workflow_id=workflow.id, attached_by=viewer.identity,
                         attached_at=to_db(db.now())).on_conflict_ignore().execute())
    swarm.announce_change(task, viewer.identity)
    return attachment_json(TaskWorkflow.get(where))


def detach(viewer: Principal, task_id: str, workflow_id: str) -> None:
    task = swarm.visible_task(task_id, viewer)
    removed = TaskWorkflow.delete().where((TaskWorkflow.task_id == task.id)
                                          & (TaskWorkflow.workflow_id == workflow_id)).execute()
    if removed:
        swarm.announce_change(task, viewer.identity)
