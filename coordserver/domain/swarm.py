"""Swarm tasks: fields, the status moves (state table in task_rules.py), history and notebook-page links.
Projects are in projects.py; who may see a project's tasks is project_access.py.

Plain functions run inside Store units of work. Every write of one request happens in one unit, and
status moves are conditional UPDATEs on the status (and assignee) the move was decided on, so two
concurrent moves of one task can never both apply.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from collections.abc import Iterable
from typing import Any, Protocol, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import peewee as pw

from .. import db
from ..jsonstrict import JSONObject
from ..errors import Conflict, Forbidden, Invalid, NotFound
from ..events import log
from ..models import NotebookPage, Task, TaskEvent, TaskPageLink
from ..principal import Principal
from ..timeutil import iso, parse_iso, to_db
from . import leases, project_access
from .fields import WS
from .identities import is_known, valid_identity
from .task_rules import FINISHED, LIST_RANK, REASSIGNING_MOVES, STATUSES, TRANSITIONS, WAKEABLE, allowed_from, \
    require_reassign
from .visibility import can_see
from . import wake_signal


class _LinkRow(Protocol):
    """A TaskPageLink row with its page joined (`attr="page"`)."""
    task_id: str
    notebook_page_id: str
    created_at: datetime
    page: NotebookPage

DEFAULT_TIMEZONE = "America/Chicago"
COLOR_RE = re.compile(r"^#[0-9a-fA-F]{6}$")
URL_MAX, TITLE_MAX, TEXT_MAX, REASON_MAX = 500, 255, 20_000, 1000
TIMEZONE_MAX = 64


# --- shared field checks ---------------------------------------------------------------------

def valid_status(value: object, field: str = "status") -> str:
    if not isinstance(value, str) or value not in STATUSES:
        raise Invalid(f"Unknown {field}: {value}", allowed=list(STATUSES))
    return value


_ONE_OF = "(?:" + "|".join(STATUSES) + ")"
# `statuses=a,b`: comma-separated, each entry trimmed, blank entries skipped (what status_filter reads).
STATUS_LIST_PATTERN = rf"^{WS}*{_ONE_OF}?{WS}*(?:,{WS}*{_ONE_OF}?{WS}*)*$"


def status_filter(statuses: str | None, status: str | None) -> list[str] | None:
    """`statuses=a,b` for the task list, or its alias `status=a,b` (statuses wins when both are given; an
    unknown status in either is refused)."""
    if statuses is not None and statuses.strip() and status is not None:
        status_filter(status, None)
    raw = statuses if statuses is not None and statuses.strip() else status
    if raw is None or not raw.strip():
        return None
    return [valid_status(s.strip()) for s in raw.split(",") if s.strip()]


def valid_timezone(value: object, field: str) -> str:
    if not isinstance(value, str) or not value or len(value) > TIMEZONE_MAX:
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


def existing_project_id(value: object, identity: str) -> str | None:
    """For recurring templates: 400 when the project is absent or `identity` may not see it."""
    if value is None:
        return None
    if not isinstance(value, str) or not project_access.sees_project(identity, value):
        raise Invalid(f"Unknown projectId: {value}")
    return value


def visible_project_id(value: object, viewer: Principal) -> str | None:
    """A projectId the caller may put a task in: 404 `Project not found` when absent or invisible."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid("projectId must be a string")
    return project_access.visible_project(value, viewer.identity, viewer.is_admin).id


# --- tasks: reading --------------------------------------------------------------------------

def task_json(t: Task) -> JSONObject:
    return {"id": t.id, "projectId": t.project_id, "title": t.title, "detail": t.detail, "followUp": t.follow_up,
            "creatorUserId": t.creator_user_id, "assigneeUserId": t.assignee_user_id, "status": t.status,
            "issueUrl": t.issue_url, "onOrAfterAt": iso(t.on_or_after_at),
            "mustBeDoneAfterTaskId": t.must_be_done_after_task_id, "sortKey": t.sort_key,
            "nextTaskId": t.next_task_id, "nextTaskAssigneeUserId": t.next_task_assignee_user_id,
            "recurringTemplateId": t.recurring_template_id, "recurringInstanceAt": iso(t.recurring_instance_at),
            "linkedNotebookPages": t.linked_notebook_pages, "createdAt": iso(t.created_at),
            "updatedAt": iso(t.updated_at), "completedAt": iso(t.completed_at), **leases.lease_json(t)}


def _task(task_id: str, viewer: Principal | None, lock: bool = False) -> Task:
    """The task, 404 when absent or (with a viewer) in a project the viewer may not see."""
    query = Task.select().where(Task.id == task_id)
    if viewer is not None:
        query = query.where(project_access.task_visible(viewer.identity, viewer.is_admin))
    task: Task | None = (db.locked(query) if lock else query).first()
    if task is None:
        raise NotFound("Task not found")
    return task


def visible_task(task_id: str, viewer: Principal) -> Task:
    return _task(task_id, viewer)


def lock_visible_task(task_id: str, viewer: Principal) -> Task:
    """The task (404 when absent or not visible), its row locked until the unit commits on PostgreSQL."""
    return _task(task_id, viewer, lock=True)


def list_tasks(viewer: Principal, statuses: list[str] | None, assignee: str | None, project_id: str | None,
               include_completed: bool) -> list[JSONObject]:
    query = Task.select().where(project_access.task_visible(viewer.identity, viewer.is_admin))
    if statuses:
        query = query.where(Task.status.in_(statuses))
    elif not include_completed:
        query = query.where(Task.status.not_in(FINISHED))
    if assignee:
        query = query.where(Task.assignee_user_id == assignee)
    if project_id:
        query = query.where(Task.project_id == project_id)
    rank = pw.Case(Task.status, [(status, i) for i, status in enumerate(LIST_RANK)], len(LIST_RANK))
    unsorted_last = pw.Case(None, [(Task.sort_key.is_null(), 1)], 0)
    query = query.order_by(rank, unsorted_last, Task.sort_key, Task.created_at, Task.id)
    return [task_json(t) for t in query]


# --- tasks: history --------------------------------------------------------------------------

def record_event(task_id: str, actor: str, kind: str, before: JSONObject | None, after: JSONObject | None) -> None:
    """Append to a task's history. Callers have already written the task row in this unit, which
    holds its row lock on PostgreSQL, so the per-task sequence number cannot be taken twice."""
    seq = (TaskEvent.select(pw.fn.COALESCE(pw.fn.MAX(TaskEvent.seq), 0)).where(TaskEvent.task_id == task_id)
           .scalar() or 0) + 1
    TaskEvent.create(task_id=task_id, actor_user_id=actor, kind=kind, before_state=before, after_state=after,
                     created_at=to_db(db.now()), seq=seq)


def task_event_json(e: TaskEvent) -> JSONObject:
    return {"id": e.id, "taskId": e.task_id, "actorUserId": e.actor_user_id, "kind": e.kind,
            "beforeState": e.before_state, "afterState": e.after_state, "createdAt": iso(e.created_at)}


def list_task_events(viewer: Principal, task_id: str, limit: int) -> list[JSONObject]:
    _task(task_id, viewer)
    query = (TaskEvent.select().where(TaskEvent.task_id == task_id)
             .order_by(TaskEvent.seq.desc(), TaskEvent.created_at.desc()).limit(limit))
    return [task_event_json(e) for e in query]


def _announce(task: Task, kind: str, actor: str, previous_status: str | None = None) -> None:
    data = {"type": kind, "taskId": task.id, "title": task.title, "status": task.status}
    if previous_status is not None:
        data["previousStatus"] = previous_status
    data["actor"] = actor
    log.append(kind, data, to=project_access.audience(task.project_id))


def announce_change(task: Task, actor: str) -> None:
    """A change beside the task's own fields (a workflow attached or detached, a lease renewed):
    swarm_task_updated."""
    _announce(task, "swarm_task_updated", actor)


def announce_move(task: Task, actor: str, previous_status: str) -> None:
    """A status move made outside move_task (a lease that ran out): swarm_task_updated with previousStatus."""
    _announce(task, "swarm_task_updated", actor, previous_status=previous_status)


def _pulse_if_wakeable(task: Task, actor: str | None) -> None:
    """The task entered its assignee's wake; a task `actor` assigns itself (or moves itself) wakes nobody."""
    if task.assignee_user_id and task.status in WAKEABLE:
        wake_signal.enters_wake(task.assignee_user_id, actor)


# --- tasks: create and field PATCH -----------------------------------------------------------

def _other_task_id(value: object, field: str, viewer: Principal) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not Task.select().where(
            (Task.id == value) & project_access.task_visible(viewer.identity, viewer.is_admin)).exists():
        raise Invalid(f"Unknown task for {field}: {value}")
    return value


def _task_columns(viewer: Principal, body: JSONObject, env_identities: frozenset[str]) -> dict[str, Any]:
    """Validated columns for the writable Task fields present in the body (status excluded)."""
    columns: dict[str, Any] = {}
    if "title" in body:
        columns["title"] = required_title(body["title"])
    if "projectId" in body:
        columns["project_id"] = visible_project_id(body["projectId"], viewer)
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
            columns[column] = _other_task_id(body[key], key, viewer)
    if "onOrAfterAt" in body:
        columns["on_or_after_at"] = to_db(optional_timestamp(body["onOrAfterAt"], "onOrAfterAt"))
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


def optional_timestamp(value: object, field: str) -> datetime | None:
    """An ISO-8601 body field, or None: the one parser of timestamps that arrive in requests."""
    if value is None:
        return None
    try:
        return parse_iso(value)
    except (ValueError, TypeError):
        raise Invalid(f"{field} must be an ISO-8601 timestamp") from None


def insert_task(actor: str, columns: dict[str, Any], scheduled: bool = False) -> Task:
    """Insert a task with its `created` history entry, log `swarm_task_created` and pulse the assignee.
    `scheduled`: made by a recurring template when due, so it wakes its assignee even when that is the
    template's creator (time did it, not the identity's own action now)."""
    now = to_db(db.now())
    columns.setdefault("status", "ready")
    if columns["status"] in FINISHED:
        columns.setdefault("completed_at", now)
    task = Task.create(creator_user_id=actor, created_at=now, updated_at=now, **columns)
    record_event(task.id, actor, "created", None,
                 {"status": task.status, "assigneeUserId": task.assignee_user_id, "title": task.title})
    _announce(task, "swarm_task_created", actor)
    _pulse_if_wakeable(task, None if scheduled else actor)
    return task


def create_task(viewer: Principal, body: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    if not isinstance(body.get("title"), str) or not body["title"].strip():
        raise Invalid("title is required")
    columns = _task_columns(viewer, body, env_identities)
    if body.get("status") is not None:
        columns["status"] = valid_status(body["status"])
    if body.get("leaseSeconds") is not None:  # honoured on a task created in_progress with an assignee only
        seconds = leases.valid_lease_seconds(body["leaseSeconds"])
        if columns.get("status") == "in_progress" and columns.get("assignee_user_id"):
            columns.update(leases.lease_columns(seconds))
    project_access.require_assignable(columns.get("assignee_user_id"), columns.get("project_id"))
    return task_json(insert_task(viewer.identity, columns))


_EVENT_FIELDS = {"title": "title", "project_id": "projectId", "detail": "detail", "follow_up": "followUp",
                 "issue_url": "issueUrl", "next_task_assignee_user_id": "nextTaskAssigneeUserId",
                 "must_be_done_after_task_id": "mustBeDoneAfterTaskId", "next_task_id": "nextTaskId",
                 "on_or_after_at": "onOrAfterAt", "sort_key": "sortKey", "linked_notebook_pages": "linkedNotebookPages"}


def update_task(viewer: Principal, task_id: str, body: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    caller, is_admin = viewer.identity, viewer.is_admin
    task = _task(task_id, viewer, lock=True)  # the holder the rule is checked against stays the holder until commit
    columns = _task_columns(viewer, body, env_identities)
    changed = {c: v for c, v in columns.items() if getattr(task, c) != v}
    if not changed:
        return task_json(task)
    if "assignee_user_id" in changed or "project_id" in changed:
        project_access.require_assignable(columns.get("assignee_user_id", task.assignee_user_id),
                                          columns.get("project_id", task.project_id))
    if "assignee_user_id" in changed:
        require_reassign(task, caller, is_admin)
    if "project_id" in changed:  # a project's leads may reassign, so moving the task is the same decision
        require_reassign(task, caller, is_admin, "move it to another project")
    # Only the changed columns are written, so concurrent PATCHes of different fields both survive. A new
    # holder does not inherit the old one's lease (nor a lapse notice).
    ended = leases.LEASE_CLEARED if "assignee_user_id" in changed else {}
    Task.update(updated_at=to_db(db.now()), **changed, **ended).where(Task.id == task_id).execute()
    if "assignee_user_id" in changed:
        record_event(task_id, caller, "assigned", {"assigneeUserId": task.assignee_user_id},
                     {"assigneeUserId": changed["assignee_user_id"]})
    others = {c: v for c, v in changed.items() if c != "assignee_user_id"}
    if others:
        record_event(task_id, caller, "updated",
                     {_EVENT_FIELDS[c]: _event_value(getattr(task, c)) for c in others},
                     {_EVENT_FIELDS[c]: _event_value(v) for c, v in others.items()})
    task = _task(task_id, None)
    _announce(task, "swarm_task_updated", caller)
    if "assignee_user_id" in changed:
        _pulse_if_wakeable(task, caller)
    return task_json(task)


def _event_value(value: Any) -> Any:
    return iso(value) if isinstance(value, datetime) else value


# --- tasks: status moves (the state table, API.md §6) -----------------------------------------

def move_task(viewer: Principal, task_id: str, new_status: str, reason: str | None,
              new_assignee: str | None, lease_seconds: int | None = None) -> JSONObject:
    """A move by the state table. `lease_seconds` (a move to in_progress only) gives the holder a lease
    (leases.py); every other move ends the task's lease."""
    caller, is_admin = viewer.identity, viewer.is_admin
    if lease_seconds is not None:  # honoured on a move to in_progress (with a holder) only, like assigneeUserId
        lease_seconds = leases.valid_lease_seconds(lease_seconds) if new_status == "in_progress" else None
    task = _task(task_id, viewer)
    old_status, old_assignee = task.status, task.assignee_user_id
    if new_status == old_status:
        if new_status == "in_progress" and old_assignee and old_assignee != caller:
            # A claim that lost the race (or came late) must not look like success.
            raise Conflict(f"Task is already in progress under {old_assignee}", allowed=allowed_from(old_status))
        if lease_seconds is not None and old_assignee == caller:  # the holder claims again: a lease from now
            leases.set_lease(task_id, caller, lease_seconds)
            task = _task(task_id, None)
            announce_change(task, caller)
        return task_json(task)
    if new_status not in TRANSITIONS[old_status]:
        raise Conflict(f"Cannot move task from {old_status} to {new_status}", allowed=allowed_from(old_status))
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
        project_access.require_assignable(new_assignee, task.project_id)
        assignee = new_assignee
    if assignee is None:
        lease_seconds = None

    now = to_db(db.now())
    lease = leases.LEASE_CLEARED if lease_seconds is None else leases.lease_columns(lease_seconds)
    columns: dict[str, Any] = {"status": new_status, "assignee_user_id": assignee, "updated_at": now, **lease}
    if new_status in FINISHED:
        columns["completed_at"] = now
    elif old_status in FINISHED:
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
    if lease_seconds is not None:
        after["leaseSeconds"] = lease_seconds
    if assignee != old_assignee:
        before["assigneeUserId"], after["assigneeUserId"] = old_assignee, assignee
    record_event(task_id, caller, "status_changed", before, after)
    task = _task(task_id, None)
    _announce(task, "swarm_task_updated", caller, previous_status=old_status)
    _pulse_if_wakeable(task, caller)
    return task_json(task)


def _assignee_is(identity: str | None) -> pw.Expression:
    return Task.assignee_user_id.is_null() if identity is None else Task.assignee_user_id == identity


def _lost_race(task_id: str, claiming: bool) -> Conflict:
    now = _task(task_id, None)
    if claiming and now.assignee_user_id:
        return Conflict(f"Task was claimed by {now.assignee_user_id} first", allowed=allowed_from(now.status))
    return Conflict(f"Task changed while moving it (now {now.status}); reload and retry",
                    allowed=allowed_from(now.status))


# --- notebook-page links ---------------------------------------------------------------------

def _visible_page(page_id: object, identity: str, is_admin: bool) -> NotebookPage:
    if not isinstance(page_id, str) or not page_id:
        raise Invalid("notebookPageId required")
    page = NotebookPage.get_or_none(NotebookPage.id == page_id)
    if page is None or not can_see(page.created_by, page.tagged_users, identity, is_admin):
        raise NotFound("Page not found")
    return page


def link_page(task_id: str, page_id: object, identity: str, is_admin: bool) -> None:
    _task(task_id, Principal(identity, is_admin))
    page = _visible_page(page_id, identity, is_admin)
    (TaskPageLink.insert(task_id=task_id, notebook_page_id=page.id, created_at=to_db(db.now()))
     .on_conflict_ignore().execute())


def unlink_page(task_id: str, page_id: object, identity: str, is_admin: bool) -> None:
    _task(task_id, Principal(identity, is_admin))
    page = _visible_page(page_id, identity, is_admin)
    TaskPageLink.delete().where((TaskPageLink.task_id == task_id)
                                & (TaskPageLink.notebook_page_id == page.id)).execute()


def linked_pages(task_id: str, identity: str, is_admin: bool) -> list[JSONObject]:
    _task(task_id, Principal(identity, is_admin))
    rows = cast(Iterable[_LinkRow], TaskPageLink.select(TaskPageLink, NotebookPage)
                .join(NotebookPage, on=(TaskPageLink.notebook_page_id == NotebookPage.id), attr="page")
                .where(TaskPageLink.task_id == task_id)
                .order_by(TaskPageLink.created_at, TaskPageLink.notebook_page_id))  # rows with `page`
    return [{"taskId": link.task_id, "notebookPageId": link.notebook_page_id, "createdAt": iso(link.created_at),
             "pageTitle": link.page.title, "pageCreatedBy": link.page.created_by,
             "pageUpdatedAt": iso(link.page.updated_at)}
            for link in rows if can_see(link.page.created_by, link.page.tagged_users, identity, is_admin)]
