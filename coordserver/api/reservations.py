"""Reservation endpoints under /api/reservations (skill page `reservations`): parse and authorise here, rules
in domain/reservations.py."""
from __future__ import annotations

from typing import Any

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import reservations
from ..schemas.common import Ok
from ..schemas.reservations import NewReservation, RenewReservation, Reservation, Reservations, ReservationsQuery
from .common import accepts, body, path_int, query

bp = Blueprint("reservations", __name__, url_prefix="/api/reservations")


@bp.get("")
@accepts(query=ReservationsQuery, returns=Reservations)
async def list_reservations() -> dict[str, Any]:
    """Reservations in force that the caller may see, soonest to end first; filters: resource (those overlapping
    it), holder, projectId."""
    principal = require_identity()
    q: ReservationsQuery = query()
    rows = await coord().store.read(reservations.list_reservations, principal, q.resource, q.holder, q.project_id)
    return {"reservations": rows}


@bp.post("")
@accepts(NewReservation, returns={201: Reservation})
async def reserve() -> tuple[dict[str, Any], int]:
    """Reserve a resource (exclusive unless exclusive=false) for ttlSeconds; 409 with `conflicts` when it
    overlaps others' reservations in force."""
    principal = require_identity()
    fields: NewReservation = await body()
    changes = {"resource": fields.resource, "exclusive": fields.exclusive, "ttl_seconds": fields.ttl_seconds,
               "reason": fields.reason, "project_id": fields.project_id}
    return await coord().store.write(reservations.create, principal, changes), 201


@bp.post("/<rowid:reservation_id>/renew")
@accepts(RenewReservation, returns=Reservation, body_required=False)
async def renew(reservation_id: str) -> dict[str, Any]:
    """The holder extends a reservation in force (by ttlSeconds, else its own length)."""
    principal = require_identity()
    number = path_int(reservation_id)
    data: RenewReservation = await body()
    return await coord().store.write(reservations.renew, principal, number, data.ttl_seconds)


@bp.delete("/<rowid:reservation_id>")
@accepts(returns=Ok)
async def release(reservation_id: str) -> dict[str, Any]:
    """Release a reservation (its holder or an admin); an expired one is cleared from the holder's wake."""
    principal = require_identity()
    number = path_int(reservation_id)
    await coord().store.write(reservations.release, principal, number)
    return {"ok": True}
