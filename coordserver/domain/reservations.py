"""Resource reservations: advisory locks on paths, globs and service names (skill page `reservations`).

A reservation is held by one identity on one resource (resource_globs.py: `src/**`, `src/*.py`,
`service:postgres-main`) until it is released (DELETE, its holder or an admin) or its time runs out
(`expiresAt`; the holder may renew it). Nothing is enforced beyond the service: agents agree to ask first.
- Conflicts: a new reservation is refused (409, with the `conflicts` in force) when it overlaps (some path
  matches both) a live reservation of ANOTHER identity in the same scope (the same projectId, or both none)
  and either of the two is exclusive. Shared ones coexist with shared ones. A holder's own reservations never
  conflict with each other.
- No two creates can both win: the check and the insert run in one unit under one lock, the writer thread's on
  SQLite (one writer) and a transaction-scoped advisory lock on PostgreSQL (RESERVE_LOCK_KEY).
- Visibility: a reservation with a projectId exists only for those who may see that project
  (project_access.py); to anyone else it is 404 and left out of lists, conflicts (which are in the same
  project, so visible) and events.
- Expiry: a reservation past `expiresAt` is no longer in force at once (left out of lists and conflicts); the
  timer pass (`expire_due`, every process, a conditional UPDATE so exactly one of them) marks it expired and
  logs `reservation_changed` (change `expired`), which the holder hears as a stream event and a webhook push;
  the holder's wake has a `reservation_expired` item until they release it or reserve the resource again.
- Before that, the holder hears it coming: in a reservation's last stretch (leases.warn_from, the lead time of a
  task lease's warning: the last 20 % of its length, at most 5 minutes) the holder's wake has a `high`
  `reservation_expiring` item asking them to renew or release it (`expiring_items`).
Every change logs `reservation_changed` {reservationId, change (created, renewed, released, expired),
reservation, by} to those who may see it, in the same unit.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import peewee as pw

from .. import db
from ..errors import Conflict, Forbidden, Invalid, NotFound
from ..events import log
from ..events.channels import LEASES, WAKE, DuePayload, WakePayload
from ..jsonstrict import JSONObject
from ..models import Reservation
from ..principal import Principal
from ..timeutil import from_db, iso, to_db
from . import leases, project_access, resource_globs

TTL_MIN, TTL_MAX = 10, 86_400  # seconds
REASON_MAX = 500
EXPIRE_BATCH = 100
RESERVE_LOCK_KEY = 0x72657365  # "rese": serialises reservation creates on PostgreSQL
NOT_FOUND = "Reservation not found"


def _stamp() -> datetime:
    now = to_db(db.now())
    assert now is not None
    return now


def reservation_json(r: Reservation) -> JSONObject:
    return {"id": r.id, "resource": r.resource, "exclusive": bool(r.exclusive), "holder": r.holder,
            "reason": r.reason, "projectId": r.project_id, "ttlSeconds": r.ttl_seconds,
            "createdAt": iso(r.created_at), "expiresAt": iso(r.expires_at), "expired": r.expired_at is not None}


def conflict_json(r: Reservation) -> JSONObject:
    return {"id": r.id, "holder": r.holder, "resource": r.resource, "exclusive": bool(r.exclusive),
            "expiresAt": iso(r.expires_at)}


def _event(change: str, r: Reservation, by: str | None) -> None:
    data = {"type": "reservation_changed", "reservationId": r.id, "change": change,
            "reservation": reservation_json(r), "by": by}
    log.append("reservation_changed", data, to=project_access.audience(r.project_id))


def _live(now: datetime) -> pw.Expression:
    return Reservation.expired_at.is_null() & (Reservation.expires_at > now)


def _visible_to(viewer: Principal) -> pw.ColumnBase:
    if viewer.is_admin:
        return pw.SQL("1 = 1")
    return Reservation.project_id.is_null() | Reservation.project_id.not_in(
        project_access.hidden_projects(viewer.identity, viewer.is_admin))


def valid_ttl(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not TTL_MIN <= value <= TTL_MAX:
        raise Invalid(f"ttlSeconds must be an integer from {TTL_MIN} to {TTL_MAX}")
    return value


def _reason(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > REASON_MAX:
        raise Invalid(f"reason must be a string of at most {REASON_MAX} characters")
    return value


def _lock_scope() -> None:
    """Serialise creates: the check for conflicts and the insert are one decision (see the module doc)."""
    database = db.current_database()
    if not db.is_sqlite(database):
        database.execute_sql("SELECT pg_advisory_xact_lock(%s)", (RESERVE_LOCK_KEY,))


# --- reserve ---------------------------------------------------------------------------------

def create(viewer: Principal, fields: dict[str, Any]) -> JSONObject:
    """`fields`: resource, exclusive (default true), ttl_seconds, reason, project_id (schemas/reservations.py)."""
    resource = resource_globs.normalise(fields.get("resource"))
    exclusive = fields.get("exclusive", True)
    if not isinstance(exclusive, bool):
        raise Invalid("exclusive must be true or false")
    ttl = valid_ttl(fields.get("ttl_seconds"))
    reason = _reason(fields.get("reason"))
    project_id = fields.get("project_id")
    if project_id is not None:
        project_id = project_access.visible_project(project_id, viewer.identity, viewer.is_admin).id
    _lock_scope()
    now = _stamp()
    scope = Reservation.project_id.is_null() if project_id is None else Reservation.project_id == project_id
    candidates = Reservation.select().where(_live(now) & scope & (Reservation.holder != viewer.identity))
    if not exclusive:
        candidates = candidates.where(Reservation.exclusive == True)  # noqa: E712 (shared ones coexist)
    conflicts = [r for r in candidates.order_by(Reservation.id) if resource_globs.overlaps(resource, r.resource)]
    if conflicts:
        raise Conflict(f"{resource} overlaps {_plural(len(conflicts))} held by others",
                       conflicts=[conflict_json(r) for r in conflicts])
    # The holder's expired reservations of this resource (kept for their wake) are done with now.
    Reservation.delete().where((Reservation.holder == viewer.identity) & Reservation.expired_at.is_null(False)
                               & (Reservation.resource == resource) & scope).execute()
    expires = now + timedelta(seconds=ttl)
    row = Reservation.create(resource=resource, exclusive=exclusive, holder=viewer.identity, reason=reason,
                             project_id=project_id, ttl_seconds=ttl, created_at=now, expires_at=expires)
    _event("created", row, viewer.identity)
    db.after_commit(LEASES, DuePayload(dueAt=iso(expires)))
    return reservation_json(row)


def _plural(count: int) -> str:
    return "a reservation" if count == 1 else f"{count} reservations"


# --- read ------------------------------------------------------------------------------------

def list_reservations(viewer: Principal, resource: str | None, holder: str | None,
                      project_id: str | None) -> list[JSONObject]:
    """Reservations in force that the caller may see, soonest to end first; `resource`: those overlapping it."""
    query = Reservation.select().where(_live(_stamp()) & _visible_to(viewer))
    holder = (holder or "").strip().lower()  # (identities are lowercase slugs; blank: anyone)
    if holder:
        query = query.where(Reservation.holder == holder)
    if project_id:
        query = query.where(Reservation.project_id == project_id)
    rows = list(query.order_by(Reservation.expires_at, Reservation.id))
    if resource and resource.strip():
        wanted = resource_globs.normalise(resource)
        rows = [r for r in rows if resource_globs.overlaps(wanted, r.resource)]
    return [reservation_json(r) for r in rows]


def _visible(viewer: Principal, reservation_id: int) -> Reservation:
    row: Reservation | None = Reservation.select().where(
        (Reservation.id == reservation_id) & _visible_to(viewer)).first()
    if row is None:
        raise NotFound(NOT_FOUND)
    return row


# --- renew, release --------------------------------------------------------------------------

def renew(viewer: Principal, reservation_id: int, ttl: int | None) -> JSONObject:
    row = _visible(viewer, reservation_id)
    if row.holder != viewer.identity:
        raise Forbidden(f"Only its holder ({row.holder}) may renew a reservation")
    now = _stamp()
    if row.expired_at is not None or from_db(row.expires_at) <= from_db(now):
        raise Conflict("The reservation has expired: reserve the resource again")
    length = valid_ttl(ttl if ttl is not None else row.ttl_seconds)
    expires = now + timedelta(seconds=length)
    won = Reservation.update(expires_at=expires, ttl_seconds=length).where(
        (Reservation.id == reservation_id) & _live(now)).execute()
    if not won:
        raise Conflict("The reservation has expired: reserve the resource again")
    row = Reservation.get_by_id(reservation_id)
    _event("renewed", row, viewer.identity)
    db.after_commit(LEASES, DuePayload(dueAt=iso(expires)))
    return reservation_json(row)


def release(viewer: Principal, reservation_id: int) -> None:
    row = _visible(viewer, reservation_id)
    if row.holder != viewer.identity and not viewer.is_admin:
        raise Forbidden(f"Only its holder ({row.holder}) or an admin may release a reservation")
    if not Reservation.delete().where(Reservation.id == reservation_id).execute():
        raise NotFound(NOT_FOUND)
    _event("released", row, viewer.identity)


# --- expiry ----------------------------------------------------------------------------------

def expire_due(limit: int = EXPIRE_BATCH) -> int:
    """One expiry unit (Store.write_alone): reservations past their end are marked expired, each with its
    event. Returns how many this unit expired (one another process expired first is skipped)."""
    now = _stamp()
    due = [r.id for r in Reservation.select(Reservation.id).where(
        Reservation.expired_at.is_null() & (Reservation.expires_at <= now))
        .order_by(Reservation.expires_at, Reservation.id).limit(limit)]
    expired = 0
    for reservation_id in due:
        won = Reservation.update(expired_at=now).where(
            (Reservation.id == reservation_id) & Reservation.expired_at.is_null()
            & (Reservation.expires_at <= now)).execute()
        if won:
            row = Reservation.get_by_id(reservation_id)
            _event("expired", row, None)
            db.after_commit(WAKE, WakePayload(identity=row.holder))
            expired += 1
    return expired


def next_due() -> datetime | None:
    value: datetime | str | None = Reservation.select(pw.fn.MIN(Reservation.expires_at)).where(
        Reservation.expired_at.is_null()).scalar()
    return from_db(value)


# --- wake ------------------------------------------------------------------------------------

def expired_items(identity: str, limit: int) -> tuple[list[JSONObject], int]:
    """The identity's reservations that ran out and are not released yet, oldest first."""
    where = (Reservation.holder == identity) & Reservation.expired_at.is_null(False)
    rows = list(Reservation.select().where(where).order_by(Reservation.expired_at, Reservation.id).limit(limit + 1))
    total = len(rows) if len(rows) <= limit else Reservation.select().where(where).count()
    return [{"source": "reservation_expired", "id": r.id, "summary": r.resource,
             "action": f"Your reservation ran out: reserve it again (POST /api/reservations) if you still need it, "
                       f"or release it (DELETE /api/reservations/{r.id}) to clear this.",
             "priority": "normal", "projectId": r.project_id, "ephemeral": False, "_at": from_db(r.expired_at)}
            for r in rows[:limit]], total


def expiring_items(identity: str, now: datetime, limit: int) -> tuple[list[JSONObject], int, datetime | None]:
    """The identity's reservations in force and in their last stretch (leases.warning: the same lead time as a
    task lease's), soonest to end first; how many there are; and when this changes with nothing written (a
    warning starts or a reservation ends: the wake cache's expiry). One indexed read of the holder's own."""
    rows = db.sql_rows("SELECT id, resource, project_id, expires_at, ttl_seconds FROM reservation "
                       "WHERE holder = ? AND expired_at IS NULL AND expires_at > ? ORDER BY expires_at, id",
                       (identity, to_db(now)))
    held = [(r_id, resource, project, from_db(expires), ttl) for r_id, resource, project, expires, ttl in rows]
    warned = [row for row in held if leases.warning(row[3], row[4], now)]
    items: list[JSONObject] = [
        {"source": "reservation_expiring", "id": r_id, "summary": resource, "expiresAt": iso(expires),
         "action": f"Your reservation runs out at {iso(expires)}: renew it (POST /api/reservations/{r_id}/renew) if "
                   f"you still need it, or release it (DELETE /api/reservations/{r_id}).",
         "priority": "high", "projectId": project, "ephemeral": False, "_at": leases.warn_from(expires, ttl)}
        for r_id, resource, project, expires, ttl in warned[:limit]]
    return items, len(warned), leases.warnings_change_at([(row[3], row[4]) for row in held], now)
