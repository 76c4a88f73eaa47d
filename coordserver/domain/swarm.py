"""Swarm: projects, tasks, the task status state machine, task history and notebook-page links.

Plain functions run inside Store units of work. Every write of one request happens in one unit, and
status moves are conditional UPDATEs on the status (and assignee) the move was decided on, so two
concurrent moves of one task can never both apply.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import peewee as pw

from .. import db
from ..errors import Conflict, Forbidden, Invalid, NotFound
from ..events import log
from ..models import NotebookPage, Project, Task, TaskEvent, TaskPageLink
from ..timeutil import iso, parse_iso, to_db
from .identities import is_known, valid_identity
from .task_rules import require_lead_change, require_reassign
from .visibility import can_see

# Canonical order (used for `allowed` lists) and the order tasks are listed in.
STATUSES = ("queued", "ready", "in_progress", "holding", "review", "complete")
LIST_RANK = ("in_progress", "review", "ready", "queued", "holding", "complete")
WAKEABLE = frozenset({"ready", "in_progress", "review"})

TRANSITIONS: dict[str, tuple[str, ...]] = {
    "queued": ("ready", "holding"),
    "ready": ("in_progress", "holding"),
    "in_progress": ("holding", "review"),
    "holding": ("ready", "in_progress"),
    "review": ("in_progress", "holding", "complete"),
    "complete": ("ready",),
}
# Moves whose body may carry assigneeUserId to hand the task over (typically to the reviewer).
REASSIGNING_MOVES = frozenset({("in_progress", "review"), ("review", "in_progress")})

DEFAULT_TIMEZONE = "America/Chicago"
COLOR_RE = re.compile(r"^#[0-9a-fA-F]{6}$")
URL_MAX, TITLE_MAX, TEXT_MAX, REASON_MAX = 500, 255, 20_000, 1000


# --- shared field checks ---------------------------------------------------------------------

def valid_status(value: object, field: str = "status") -> str:
    if not isinstance(value, str) or value not in STATUSES:
        raise Invalid(f"Unknown {field}: {value}", allowed=list(STATUSES))
    return value


def valid_timezone(value: object, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 64:
        raise Invalid(f"{field} must be an IANA timezone name such as America/Chicago")
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory such as "America"
        raise Invalid(f"Unknown timezone: {value}") from None
    return value


def known_identity(value: object, field: str, env_identities: frozenset[str]) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{field} must be an identity")
    identity = valid_identity(value)
    if not is_known(identity, env_identities):
        raise Invalid(f"Unknown identity for {field}: {identity}")
    return identity


def optional_text(value: object, field: str, max_len: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"{field} must be a string")
    if len(value) > max_len:
        raise Invalid(f"{field} is longer than {max_len} characters")
    return value


def required_title(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("title is required")
    if len(value) > TITLE_MAX:
        raise Invalid(f"title is longer than {TITLE_MAX} characters")
    return value.strip()


def existing_project_id(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not Project.select().where(Project.id == value).exists():
        raise Invalid(f"Unknown projectId: {value}")
    return value


# --- projects --------------------------------------------------------------------------------

def project_json(p: Project) -> dict:
    return {"id": p.id, "title": p.title, "description": p.description, "websiteUrl": p.website_url,
            "onedevUrl": p.onedev_url, "githubUrl": p.github_url, "dokployDeployUrl": p.dokploy_deploy_url,
            "color": p.color, "projectLeadUserId": p.project_lead_user_id,
            "developerLeadUserId": p.developer_lead_user_id, "workHoursStart": p.work_hours_start,
            "workHoursEnd": p.work_hours_end, "workHoursTimezone": p.work_hours_timezone,
            "blockingMode": p.blocking_mode, "archivedAt": iso(p.archived_at), "createdAt": iso(p.created_at),
            "updatedAt": iso(p.updated_at)}


_PROJECT_TEXT = {"description": ("description", TEXT_MAX), "websiteUrl": ("website_url", URL_MAX),
                 "onedevUrl": ("onedev_url", URL_MAX), "githubUrl": ("github_url", URL_MAX),
                 "dokployDeployUrl": ("dokploy_deploy_url", URL_MAX)}
_PROJECT_LEADS = {"projectLeadUserId": "project_lead_user_id", "developerLeadUserId": "developer_lead_user_id"}


def _project_columns(body: dict, env_identities: frozenset[str]) -> dict[str, Any]:
    """The columns a create or PATCH body sets, validated. Only keys present in the body appear."""
    columns: dict[str, Any] = {}
    if "title" in body:
        columns["title"] = required_title(body["title"])
    if "color" in body:
        color = body["color"]
        if not isinstance(color, str) or not COLOR_RE.match(color):
            raise Invalid("color must look like #rrggbb")
        columns["color"] = color.lower()
    for key, (column, max_len) in _PROJECT_TEXT.items():
        if key in body:
            columns[column] = optional_text(body[key], key, max_len)
    for key, column in _PROJECT_LEADS.items():
        if key in body:
            columns[column] = None if body[key] is None else known_identity(body[key], key, env_identities)
    for key, column in (("workHoursStart", "work_hours_start"), ("workHoursEnd", "work_hours_end")):
        if key in body:
            hour = body[key]
            if hour is not None and (isinstance(hour, bool) or not isinstance(hour, int) or not 0 <= hour <= 23):
                raise Invalid(f"{key} must be an hour from 0 to 23 (or null)")
            columns[column] = hour
    if "workHoursTimezone" in body:
        value = body["workHoursTimezone"]
        columns["work_hours_timezone"] = (DEFAULT_TIMEZONE if value is None
                                          else valid_timezone(value, "workHoursTimezone"))
    if "blockingMode" in body:
        if not isinstance(body["blockingMode"], bool):
            raise Invalid("blockingMode must be true or false")
        columns["blocking_mode"] = body["blockingMode"]
    return columns


def list_projects(include_archived: bool) -> list[dict]:
    query = Project.select()
    if not include_archived:
        query = query.where(Project.archived_at.is_null())
    return [project_json(p) for p in query.order_by(Project.title, Project.created_at, Project.id)]


def create_project(caller: str, body: dict, env_identities: frozenset[str]) -> dict:
    title, color = body.get("title"), body.get("color")
    if not isinstance(title, str) or not title.strip() or not isinstance(color, str) or not color:
        raise Invalid("title and color are required")
    columns = {"project_lead_user_id": caller, "developer_lead_user_id": caller,
               "work_hours_timezone": DEFAULT_TIMEZONE}
    columns.update(_project_columns(body, env_identities))
    now = to_db(db.now())
    project = Project.create(created_at=now, updated_at=now, **columns)
    return project_json(project)


def _project(project_id: str, lock: bool = False) -> Project:
    query = Project.select().where(Project.id == project_id)
    project = (db.locked(query) if lock else query).first()
    if project is None:
        raise NotFound("Project not found")
    return project


def update_project(caller: str, is_admin: bool, project_id: str, body: dict, env_identities: frozenset[str]) -> dict:
    project = _project(project_id, lock=True)
    columns = _project_columns(body, env_identities)
    if any(column in columns and columns[column] != getattr(project, column) for column in _PROJECT_LEADS.values()):
        require_lead_change(project, caller, is_admin)
    if columns:
        columns["updated_at"] = to_db(db.now())
        Project.update(**columns).where(Project.id == project_id).execute()
        db.after_commit("wake_changed", {"identity": None})  # work hours decide which tasks wake
    return project_json(_project(project_id))


def archive_project(project_id: str) -> dict:
    _project(project_id)
    now = to_db(db.now())
    Project.update(archived_at=now, updated_at=now).where(
        (Project.id == project_id) & Project.archived_at.is_null()).execute()
    db.after_commit("wake_changed", {"identity": None})
    return project_json(_project(project_id))


# --- tasks: reading --------------------------------------------------------------------------

def task_json(t: Task) -> dict:
    return {"id": t.id, "projectId": t.project_id, "title": t.title, "detail": t.detail, "followUp": t.follow_up,
            "creatorUserId": t.creator_user_id, "assigneeUserId": t.assignee_user_id, "status": t.status,
            "issueUrl": t.issue_url, "onOrAfterAt": iso(t.on_or_after_at),
            "mustBeDoneAfterTaskId": t.must_be_done_after_task_id, "sortKey": t.sort_key,
            "nextTaskId": t.next_task_id, "nextTaskAssigneeUserId": t.next_task_assignee_user_id,
            "recurringTemplateId": t.recurring_template_id, "recurringInstanceAt": iso(t.recurring_instance_at),
            "linkedNotebookPages": t.linked_notebook_pages, "createdAt": iso(t.created_at),
            "updatedAt": iso(t.updated_at), "completedAt": iso(t.completed_at)}


def _task(task_id: str, lock: bool = False) -> Task:
    query = Task.select().where(Task.id == task_id)
    task = (db.locked(query) if lock else query).first()
    if task is None:
        raise NotFound("Task not found")
    return task


def get_task(task_id: str) -> dict:
    return task_json(_task(task_id))


def list_tasks(statuses: list[str] | None, assignee: str | None, project_id: str | None,
               include_completed: bool) -> list[dict]:
    query = Task.select()
    if statuses:
        query = query.where(Task.status.in_(statuses))
    elif not include_completed:
        query = query.where(Task.status != "complete")
    if assignee:
        query = query.where(Task.assignee_user_id == assignee)
    if project_id:
        query = query.where(Task.project_id == project_id)
    rank = pw.Case(Task.status, [(status, i) for i, status in enumerate(LIST_RANK)], len(LIST_RANK))
    unsorted_last = pw.Case(None, [(Task.sort_key.is_null(), 1)], 0)
    query = query.order_by(rank, unsorted_last, Task.sort_key, Task.created_at, Task.id)
    return [task_json(t) for t in query]


# --- tasks: history --------------------------------------------------------------------------

def record_event(task_id: str, actor: str, kind: str, before: dict | None, after: dict | None) -> None:
    """Append to a task's history. Callers have already written the task row in this unit, which
    holds its row lock on PostgreSQL, so the per-task sequence number cannot be taken twice."""
    seq = (TaskEvent.select(pw.fn.COALESCE(pw.fn.MAX(TaskEvent.seq), 0)).where(TaskEvent.task_id == task_id)
           .scalar() or 0) + 1
    TaskEvent.create(task_id=task_id, actor_user_id=actor, kind=kind, before_state=before, after_state=after,
                     created_at=to_db(db.now()), seq=seq)


def task_event_json(e: TaskEvent) -> dict:
    return {"id": e.id, "taskId": e.task_id, "actorUserId": e.actor_user_id, "kind": e.kind,
            "beforeState": e.before_state, "afterState": e.after_state, "createdAt": iso(e.created_at)}


def list_task_events(task_id: str, limit: int) -> list[dict]:
    _task(task_id)
    query = (TaskEvent.select().where(TaskEvent.task_id == task_id)
             .order_by(TaskEvent.seq.desc(), TaskEvent.created_at.desc()).limit(limit))
    return [task_event_json(e) for e in query]


def _announce(task: Task, kind: str, actor: str, previous_status: str | None = None) -> None:
    data = {"type": kind, "taskId": task.id, "title": task.title, "status": task.status}
    if previous_status is not None:
        data["previousStatus"] = previous_status
    data["actor"] = actor
    log.append(kind, data, to=None)


def _pulse_if_wakeable(task: Task) -> None:
    if task.assignee_user_id and task.status in WAKEABLE:
        db.after_commit("wake", {"identity": task.assignee_user_id})


# --- tasks: create and field PATCH -----------------------------------------------------------

def _other_task_id(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not Task.select().where(Task.id == value).exists():
        raise Invalid(f"Unknown task for {field}: {value}")
    return value


def _task_columns(body: dict, env_identities: frozenset[str]) -> dict[str, Any]:
    """Validated columns for the writable Task fields present in the body (status excluded)."""
    columns: dict[str, Any] = {}
    if "title" in body:
        columns["title"] = required_title(body["title"])
    if "projectId" in body:
        columns["project_id"] = existing_project_id(body["projectId"])
    for key, column in (("detail", "detail"), ("followUp", "follow_up")):
        if key in body:
            columns[column] = optional_text(body[key], key, TEXT_MAX)
    if "issueUrl" in body:
        columns["issue_url"] = optional_text(body["issueUrl"], "issueUrl", URL_MAX)
    for key, column in (("assigneeUserId", "assignee_user_id"),
                        ("nextTaskAssigneeUserId", "next_task_assignee_user_id")):
        if key in body:
            columns[column] = None if body[key] is None else known_identity(body[key], key, env_identities)
    for key, column in (("mustBeDoneAfterTaskId", "must_be_done_after_task_id"), ("nextTaskId", "next_task_id")):
        if key in body:
            columns[column] = _other_task_id(body[key], key)
    if "onOrAfterAt" in body:
        columns["on_or_after_at"] = to_db(_timestamp(body["onOrAfterAt"], "onOrAfterAt"))
    if "sortKey" in body:
        value = body["sortKey"]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(float(value) if abs(value) < 1e300 else math.inf)):
            raise Invalid("sortKey must be a number")
        columns["sort_key"] = value
    if "linkedNotebookPages" in body:
        pages = body["linkedNotebookPages"]
        if pages is not None and (not isinstance(pages, list) or len(pages) > 100
                                  or not all(isinstance(p, str) and 0 < len(p) <= 36 for p in pages)):
            raise Invalid("linkedNotebookPages must be an array of page ids")
        columns["linked_notebook_pages"] = pages or None
    return columns


def _timestamp(value: object, field: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_iso(value)
    except (ValueError, TypeError):
        raise Invalid(f"{field} must be an ISO-8601 timestamp") from None


def insert_task(actor: str, columns: dict[str, Any]) -> Task:
    """Insert a task with its `created` history entry, log `swarm_task_created` and pulse the assignee."""
    now = to_db(db.now())
    columns.setdefault("status", "ready")
    if columns["status"] == "complete":
        columns.setdefault("completed_at", now)
    task = Task.create(creator_user_id=actor, created_at=now, updated_at=now, **columns)
    record_event(task.id, actor, "created", None,
                 {"status": task.status, "assigneeUserId": task.assignee_user_id, "title": task.title})
    _announce(task, "swarm_task_created", actor)
    _pulse_if_wakeable(task)
    return task


def create_task(caller: str, body: dict, env_identities: frozenset[str]) -> dict:
    if not isinstance(body.get("title"), str) or not body["title"].strip():
        raise Invalid("title is required")
    columns = _task_columns(body, env_identities)
    if body.get("status") is not None:
        columns["status"] = valid_status(body["status"])
    return task_json(insert_task(caller, columns))


_EVENT_FIELDS = {"title": "title", "project_id": "projectId", "detail": "detail", "follow_up": "followUp",
                 "issue_url": "issueUrl", "next_task_assignee_user_id": "nextTaskAssigneeUserId",
                 "must_be_done_after_task_id": "mustBeDoneAfterTaskId", "next_task_id": "nextTaskId",
                 "on_or_after_at": "onOrAfterAt", "sort_key": "sortKey", "linked_notebook_pages": "linkedNotebookPages"}


def update_task(caller: str, is_admin: bool, task_id: str, body: dict, env_identities: frozenset[str]) -> dict:
    task = _task(task_id, lock=True)  # the holder the rule is checked against stays the holder until commit
    columns = _task_columns(body, env_identities)
    changed = {c: v for c, v in columns.items() if getattr(task, c) != v}
    if not changed:
        return task_json(task)
    if "assignee_user_id" in changed:
        require_reassign(task, caller, is_admin)
    if "project_id" in changed:  # a project's leads may reassign, so moving the task is the same decision
        require_reassign(task, caller, is_admin, "move it to another project")
    # Only the changed columns are written, so concurrent PATCHes of different fields both survive.
    Task.update(updated_at=to_db(db.now()), **changed).where(Task.id == task_id).execute()
    if "assignee_user_id" in changed:
        record_event(task_id, caller, "assigned", {"assigneeUserId": task.assignee_user_id},
                     {"assigneeUserId": changed["assignee_user_id"]})
    others = {c: v for c, v in changed.items() if c != "assignee_user_id"}
    if others:
        record_event(task_id, caller, "updated",
                     {_EVENT_FIELDS[c]: _event_value(getattr(task, c)) for c in others},
                     {_EVENT_FIELDS[c]: _event_value(v) for c, v in others.items()})
    task = _task(task_id)
    _announce(task, "swarm_task_updated", caller)
    if "assignee_user_id" in changed:
        _pulse_if_wakeable(task)
    return task_json(task)


def _event_value(value: Any) -> Any:
    return iso(value) if isinstance(value, datetime) else value


# --- tasks: status moves (the state table, API.md §6) -----------------------------------------

def move_task(caller: str, is_admin: bool, task_id: str, new_status: str, reason: str | None,
              new_assignee: str | None) -> dict:
    task = _task(task_id)
    old_status, old_assignee = task.status, task.assignee_user_id
    if new_status == old_status:
        if new_status == "in_progress" and old_assignee and old_assignee != caller:
            # A claim that lost the race (or came late) must not look like success.
            raise Conflict(f"Task is already in progress under {old_assignee}", allowed=_allowed(old_status))
        return task_json(task)
    if new_status not in TRANSITIONS[old_status]:
        raise Conflict(f"Cannot move task from {old_status} to {new_status}", allowed=_allowed(old_status))
    if new_status == "holding" and not (isinstance(reason, str) and reason.strip()):
        raise Invalid("reason is required to put a task on hold")

    assignee = old_assignee
    claiming = False
    if (old_status, new_status) == ("ready", "in_progress"):
        if old_assignee is None:
            assignee, claiming = caller, True
        elif old_assignee != caller:
            raise Forbidden(f"Task is assigned to {old_assignee}; only {old_assignee} can start it")
    elif (old_status, new_status) in REASSIGNING_MOVES and new_assignee not in (None, old_assignee):
        require_reassign(task, caller, is_admin)
        assignee = new_assignee

    now = to_db(db.now())
    columns: dict[str, Any] = {"status": new_status, "assignee_user_id": assignee, "updated_at": now}
    if new_status == "complete":
        columns["completed_at"] = now
    elif old_status == "complete":
        columns["completed_at"] = None
    applied = (Task.update(**columns)
               .where((Task.id == task_id) & (Task.status == old_status) & _assignee_is(old_assignee))
               .execute())
    if not applied:
        raise _lost_race(task_id, claiming)

    before: dict[str, Any] = {"status": old_status}
    after: dict[str, Any] = {"status": new_status}
    if reason is not None:
        after["reason"] = reason
    if assignee != old_assignee:
        before["assigneeUserId"], after["assigneeUserId"] = old_assignee, assignee
    record_event(task_id, caller, "status_changed", before, after)
    task = _task(task_id)
    _announce(task, "swarm_task_updated", caller, previous_status=old_status)
    _pulse_if_wakeable(task)
    return task_json(task)


def _assignee_is(identity: str | None):
    return Task.assignee_user_id.is_null() if identity is None else Task.assignee_user_id == identity


def _allowed(status: str) -> list[str]:
    return [s for s in STATUSES if s in TRANSITIONS[status]]


def _lost_race(task_id: str, claiming: bool) -> Conflict:
    now = _task(task_id)
    if claiming and now.assignee_user_id:
        return Conflict(f"Task was claimed by {now.assignee_user_id} first", allowed=_allowed(now.status))
    return Conflict(f"Task changed while moving it (now {now.status}); reload and retry",
                    allowed=_allowed(now.status))


# --- notebook-page links ---------------------------------------------------------------------

def _visible_page(page_id: object, identity: str, is_admin: bool) -> NotebookPage:
    if not isinstance(page_id, str) or not page_id:
        raise Invalid("notebookPageId required")
    page = NotebookPage.get_or_none(NotebookPage.id == page_id)
    if page is None or not can_see(page.created_by, page.tagged_users, identity, is_admin):
        raise NotFound("Page not found")
    return page


def link_page(task_id: str, page_id: object, identity: str, is_admin: bool) -> None:
    _task(task_id)
    page = _visible_page(page_id, identity, is_admin)
    (TaskPageLink.insert(task_id=task_id, notebook_page_id=page.id, created_at=to_db(db.now()))
     .on_conflict_ignore().execute())


def unlink_page(task_id: str, page_id: object, identity: str, is_admin: bool) -> None:
    _task(task_id)
    page = _visible_page(page_id, identity, is_admin)
    TaskPageLink.delete().where((TaskPageLink.task_id == task_id)
                                & (TaskPageLink.notebook_page_id == page.id)).execute()


def linked_pages(task_id: str, identity: str, is_admin: bool) -> list[dict]:
    _task(task_id)
    rows = (TaskPageLink.select(TaskPageLink, NotebookPage)
            .join(NotebookPage, on=(TaskPageLink.notebook_page_id == NotebookPage.id), attr="page")
            .where(TaskPageLink.task_id == task_id)
            .order_by(TaskPageLink.created_at, TaskPageLink.notebook_page_id))
    return [{"taskId": link.task_id, "notebookPageId": link.notebook_page_id, "createdAt": iso(link.created_at),
             "pageTitle": link.page.title, "pageCreatedBy": link.page.created_by,
             "pageUpdatedAt": iso(link.page.updated_at)}
            for link in rows if can_see(link.page.created_by, link.page.tagged_users, identity, is_admin)]
