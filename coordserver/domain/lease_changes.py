"""Task lease changes: renew (POST /api/swarm/tasks/{id}/renew) and expiry (the timer pass). The rules and the
module's full account are in leases.py; these are ordinary task changes (history, events) through swarm.py."""
from __future__ import annotations

from datetime import datetime

import peewee as pw

from .. import db
from ..errors import Conflict, Forbidden
from ..events import log
from ..events.channels import WAKE, WakePayload
from ..jsonstrict import JSONObject
from ..models import Task
from ..principal import Principal
from ..timeutil import from_db, iso
from . import project_access, swarm
from .leases import EXPIRE_BATCH, set_lease, stamp


# --- renew -----------------------------------------------------------------------------------

def renew(viewer: Principal, task_id: str, seconds: int | None) -> JSONObject:
    """POST /api/swarm/tasks/{id}/renew: the holder extends a lease in force (by `seconds`, else its own length)."""
    task = swarm.lock_visible_task(task_id, viewer)
    if task.assignee_user_id != viewer.identity:
        raise Forbidden(f"Only the task's holder ({task.assignee_user_id or 'nobody'}) may renew its lease")
    if task.status != "in_progress":
        raise Conflict(f"Task is {task.status}, not in progress: there is no lease to renew")
    if task.lease_expires_at is None:
        raise Conflict("Task has no lease: claim it with leaseSeconds to take one")
    if from_db(task.lease_expires_at) <= db.now():
        raise Conflict("The lease has run out; the task returns to ready")
    return _set_lease(viewer, task_id, seconds if seconds is not None else task.lease_seconds)


def _set_lease(viewer: Principal, task_id: str, seconds: object) -> JSONObject:
    set_lease(task_id, viewer.identity, seconds)
    task = Task.get_by_id(task_id)
    swarm.announce_change(task, viewer.identity)
    return swarm.task_json(task)


# --- expiry ----------------------------------------------------------------------------------

def expire_due(limit: int = EXPIRE_BATCH) -> int:
    """One expiry unit (Store.write_alone): leases that ran out return their tasks to ready. Returns how many
    this unit expired; a task another process expired first (or its holder renewed) is skipped."""
    now = stamp()
    due = [t.id for t in Task.select(Task.id).where((Task.status == "in_progress") & (Task.lease_expires_at <= now)
                                                    & Task.assignee_user_id.is_null(False))
           .order_by(Task.lease_expires_at, Task.id).limit(limit)]
    expired = 0
    for task_id in due:
        with db.current_database().atomic():  # a savepoint: one failing task never spoils the others
            expired += _expire(task_id, now)
    return expired


def _expire(task_id: str, now: datetime) -> int:
    task = Task.get_or_none(Task.id == task_id)
    if task is None or task.assignee_user_id is None:
        return 0
    holder, ran_out = task.assignee_user_id, task.lease_expires_at
    won = Task.update(status="ready", assignee_user_id=None, updated_at=now, lease_expires_at=None, lease_seconds=None,
                      lease_lapsed_by=holder, lease_lapsed_at=now).where(
        (Task.id == task_id) & (Task.status == "in_progress") & (Task.assignee_user_id == holder)
        & (Task.lease_expires_at <= now)).execute()
    if not won:
        return 0
    task = Task.get_by_id(task_id)
    swarm.record_event(task_id, holder, "lease_expired",
                       {"status": "in_progress", "assigneeUserId": holder, "leaseExpiresAt": iso(ran_out)},
                       {"status": "ready", "assigneeUserId": None})
    swarm.announce_move(task, holder, "in_progress")
    told = _told(task, holder)
    log.append("task_lease_expired", {"type": "task_lease_expired", "taskId": task.id, "title": task.title,
                                      "holder": holder, "creator": task.creator_user_id,
                                      "leaseExpiresAt": iso(ran_out)}, to=told)
    for identity in told:
        db.after_commit(WAKE, WakePayload(identity=identity))
    return 1


def _told(task: Task, holder: str) -> list[str]:
    """The former holder and the creator, if they may still see the task's project."""
    return sorted({i for i in (holder, task.creator_user_id) if project_access.sees_project(i, task.project_id)})


def next_due() -> datetime | None:
    """The earliest end of a lease in force (the timer pass sleeps until then)."""
    value: datetime | str | None = Task.select(pw.fn.MIN(Task.lease_expires_at)).where(
        (Task.status == "in_progress") & Task.lease_expires_at.is_null(False)
        & Task.assignee_user_id.is_null(False)).scalar()
    return from_db(value)
