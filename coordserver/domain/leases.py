"""Task leases: a claim that runs out unless its holder renews it (skill page `swarm`, "Leases").

A move into `in_progress` (a claim, a resume, a hand-over to a reviewer's rework; PATCH .../status) and the
creation of a task in `in_progress` may carry `leaseSeconds` (LEASE_MIN..LEASE_MAX): the task then holds
`lease_expires_at`, shown as `leaseExpiresAt`. Without it nothing changes from v1: no lease, no field.
- Renew (`POST /api/swarm/tasks/{id}/renew`, `renew`): the holder only (403 for others); 409 when the task
  is not in progress, has no lease, or its lease has already run out. Without `leaseSeconds` the lease's
  own length is used again.
- Any other move, and a change of assignee, ends the lease (swarm.py writes LEASE_CLEARED with the move).
- Expiry (`expire_due`, run by the scheduler's timer pass on every process): a conditional UPDATE on
  (status in_progress, the holder, lease_expires_at <= now), so of racing passes exactly one returns the task
  to `ready` and unassigned. In that unit: a `lease_expired` history entry (actor: the former holder), the
  `swarm_task_updated` event to those who see the task, and `task_lease_expired` to the former holder and the
  creator (stream event and webhook push), and wake pulses for both.
- Wake: the holder's swarm item carries `leaseExpiresAt` and turns `high` with a renew action in the lease's
  last WARN_FRACTION (at most WARN_MAX_SECONDS); after an expiry the former holder and the creator have a
  `lease_expired` item until the task moves or is assigned again (the lapse columns are cleared then).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import peewee as pw

from .. import db
from ..errors import Conflict, Forbidden, Invalid
from ..events import log
from ..events.channels import LEASES, WAKE, DuePayload, WakePayload
from ..jsonstrict import JSONObject
from ..models import Task
from ..principal import Principal
from ..timeutil import from_db, iso, to_db
from . import project_access

LEASE_MIN, LEASE_MAX = 60, 86_400  # seconds
WARN_FRACTION, WARN_MAX_SECONDS = 0.2, 300  # the holder's wake warns in the lease's last 20 %, at most 5 min
EXPIRE_BATCH = 100
# Columns a move or reassignment writes: no lease, no lapse left over.
LEASE_CLEARED: dict[str, Any] = {"lease_expires_at": None, "lease_seconds": None, "lease_lapsed_by": None,
                                 "lease_lapsed_at": None}
RENEW_ACTION = "Your lease on it runs out soon: renew it (POST /api/swarm/tasks/{id}/renew) or it returns to ready."


def _stamp() -> datetime:
    now = to_db(db.now())
    assert now is not None
    return now


def valid_lease_seconds(value: object) -> int:
    """The domain's own check (the request models state the same bounds)."""
    if isinstance(value, bool) or not isinstance(value, int) or not LEASE_MIN <= value <= LEASE_MAX:
        raise Invalid(f"leaseSeconds must be an integer from {LEASE_MIN} to {LEASE_MAX}")
    return value


def lease_columns(seconds: int) -> dict[str, Any]:
    """Columns of a new lease of `seconds` from now (and no lapse left over); tells the timer pass."""
    expires = db.now() + timedelta(seconds=seconds)
    db.after_commit(LEASES, DuePayload(dueAt=iso(expires)))
    return {**LEASE_CLEARED, "lease_expires_at": to_db(expires), "lease_seconds": seconds}


def lease_json(task: Task) -> JSONObject:
    """The lease fields of the wire Task: present only while the task holds a lease (v1 shape otherwise)."""
    return {} if task.lease_expires_at is None else {"leaseExpiresAt": iso(task.lease_expires_at)}


def warn_from(expires_at: datetime, seconds: int | None) -> datetime:
    """When the holder's wake starts warning of a lease ending at `expires_at`."""
    window = min(WARN_MAX_SECONDS, WARN_FRACTION * (seconds or WARN_MAX_SECONDS))
    return expires_at - timedelta(seconds=window)


# --- renew -----------------------------------------------------------------------------------

def renew(viewer: Principal, task_id: str, seconds: int | None) -> JSONObject:
    """POST /api/swarm/tasks/{id}/renew: the holder extends a lease in force (by `seconds`, else its own length)."""
    from . import swarm  # swarm.py writes leases with its moves; this module reads its task helpers

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


def retake(viewer: Principal, task_id: str, seconds: int) -> JSONObject:
    """The holder of an in-progress task claims it again with leaseSeconds: the lease starts (or restarts) now."""
    return _set_lease(viewer, task_id, seconds)


def _set_lease(viewer: Principal, task_id: str, seconds: object) -> JSONObject:
    from . import swarm

    columns = lease_columns(valid_lease_seconds(seconds))
    applied = Task.update(updated_at=_stamp(), **columns).where(
        (Task.id == task_id) & (Task.status == "in_progress") & (Task.assignee_user_id == viewer.identity)).execute()
    if not applied:
        raise Conflict("Task changed meanwhile; reload and retry")
    task = Task.get_by_id(task_id)
    swarm.announce_change(task, viewer.identity)
    return swarm.task_json(task)


# --- expiry ----------------------------------------------------------------------------------

def expire_due(limit: int = EXPIRE_BATCH) -> int:
    """One expiry unit (Store.write_alone): leases that ran out return their tasks to ready. Returns how many
    this unit expired; a task another process expired first (or its holder renewed) is skipped."""
    now = _stamp()
    due = [t.id for t in Task.select(Task.id).where((Task.status == "in_progress") & (Task.lease_expires_at <= now)
                                                    & Task.assignee_user_id.is_null(False))
           .order_by(Task.lease_expires_at, Task.id).limit(limit)]
    expired = 0
    for task_id in due:
        with db.current_database().atomic():  # a savepoint: one failing task never spoils the others
            expired += _expire(task_id, now)
    return expired


def _expire(task_id: str, now: datetime) -> int:
    from . import swarm

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


# --- wake ------------------------------------------------------------------------------------

def lapsed_items(identity: str, limit: int) -> tuple[list[JSONObject], int]:
    """Tasks whose lease ran out while `identity` held them, or that `identity` created, still back in ready
    and unassigned: oldest lapse first."""
    where = (Task.lease_lapsed_at.is_null(False) & (Task.status == "ready") & Task.assignee_user_id.is_null()
             & ((Task.lease_lapsed_by == identity) | (Task.creator_user_id == identity))
             & project_access.task_visible_fast(identity))
    rows = list(Task.select(Task.id, Task.title, Task.project_id, Task.lease_lapsed_by, Task.lease_lapsed_at)
                .where(where).order_by(Task.lease_lapsed_at, Task.id).limit(limit + 1))
    total = len(rows) if len(rows) <= limit else Task.select().where(where).count()
    items = []
    for task in rows[:limit]:
        if task.lease_lapsed_by == identity:
            action = ("Your lease ran out and the task is back in ready, unassigned: claim it again (PATCH its "
                      "status to in_progress) if you are still on it.")
        else:
            action = ("The lease on your task ran out and it is back in ready, unassigned: find someone for it "
                      "or claim it.")
        items.append({"source": "lease_expired", "id": task.id, "summary": task.title,
                      "action": action, "priority": "normal", "formerHolder": task.lease_lapsed_by,
                      "projectId": task.project_id, "ephemeral": False, "_at": from_db(task.lease_lapsed_at)})
    return items, total
