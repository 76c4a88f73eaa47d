"""Task leases: a claim that runs out unless its holder renews it (skill page `swarm`, "Leases"). This module
holds the rules swarm.py applies with its moves (lease columns, bounds) and the wake's view of leases; renewing
and expiring, which are task changes of their own, are lease_changes.py's.

A move into `in_progress` (a claim, a resume, a hand-over to a reviewer's rework; PATCH .../status) and the
creation of a task in `in_progress` may carry `leaseSeconds` (LEASE_MIN..LEASE_MAX): the task then holds
`lease_expires_at`, shown as `leaseExpiresAt`. Without it nothing changes from v1: no lease, no field.
- Renew (`POST /api/swarm/tasks/{id}/renew`, lease_changes.renew): the holder only (403 for others); 409 when the task
  is not in progress, has no lease, or its lease has already run out. Without `leaseSeconds` the lease's
  own length is used again.
- Any other move, and a change of assignee, ends the lease (swarm.py writes LEASE_CLEARED with the move).
- Expiry (lease_changes.expire_due, run by the scheduler's timer pass on every process): a conditional UPDATE on
  (status in_progress, the holder, lease_expires_at <= now), so of racing passes exactly one returns the task
  to `ready` and unassigned. In that unit: a `lease_expired` history entry (actor: the former holder), the
  `swarm_task_updated` event to those who see the task, and `task_lease_expired` to the former holder and the
  creator (stream event and webhook push), and wake pulses for both.
- Wake: the holder's swarm item carries `leaseExpiresAt` and turns `high` with a renew action in the lease's
  last WARN_FRACTION (at most WARN_MAX_SECONDS; `warn_from`, the rule reservations' warnings follow too); after an expiry the former holder and the creator have a
  `lease_expired` item until the task moves or is assigned again (the lapse columns are cleared then).
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from .. import db
from ..errors import Conflict, Invalid
from ..events.channels import LEASES, DuePayload
from ..jsonstrict import JSONObject
from ..models import Task
from ..timeutil import from_db, iso, to_db
from . import project_access

LEASE_MIN, LEASE_MAX = 60, 86_400  # seconds
WARN_FRACTION, WARN_MAX_SECONDS = 0.2, 300  # the holder's wake warns in the lease's last 20 %, at most 5 min
EXPIRE_BATCH = 100
# Columns a move or reassignment writes: no lease, no lapse left over.
LEASE_CLEARED: dict[str, Any] = {"lease_expires_at": None, "lease_seconds": None, "lease_lapsed_by": None,
                                 "lease_lapsed_at": None}
RENEW_ACTION = "Your lease on it runs out soon: renew it (POST /api/swarm/tasks/{id}/renew) or it returns to ready."


def stamp() -> datetime:
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
    """When the holder's wake starts warning of a lease ending at `expires_at`. The one lead-time rule of the
    wake's warnings: task leases (wake._task_item) and reservations (reservations.expiring_items) alike."""
    window = min(WARN_MAX_SECONDS, WARN_FRACTION * (seconds or WARN_MAX_SECONDS))
    return expires_at - timedelta(seconds=window)


def warning(expires_at: datetime, seconds: int | None, now: datetime) -> bool:
    """Whether the holder's wake warns now of a hold ending at `expires_at` (`seconds` long when taken)."""
    return now >= warn_from(expires_at, seconds)


def warnings_change_at(ends: Iterable[tuple[datetime, int | None]], now: datetime) -> datetime | None:
    """When a wake showing warnings of these holds (end, length) next changes with nothing written: the soonest
    future start of a warning, or end of a hold (the wake cache's expiry)."""
    future = [at for expires, seconds in ends for at in (warn_from(expires, seconds), expires) if at > now]
    return min(future, default=None)


def set_lease(task_id: str, holder: str, seconds: object) -> None:
    """A lease of `seconds` from now on the in-progress task `holder` holds (409 when that changed meanwhile)."""
    columns = lease_columns(valid_lease_seconds(seconds))
    applied = Task.update(updated_at=stamp(), **columns).where(
        (Task.id == task_id) & (Task.status == "in_progress") & (Task.assignee_user_id == holder)).execute()
    if not applied:
        raise Conflict("Task changed meanwhile; reload and retry")


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
