"""Reservation request and response models (skill page `reservations`). The rules are domain/reservations.py's,
which checks them again (it is callable without HTTP)."""
from __future__ import annotations

from typing import Annotated

import msgspec

from ..domain.reservations import REASON_MAX, TTL_MAX, TTL_MIN
from ..domain.resource_globs import RESOURCE_MAX
from .base import Model, Query, text
from .common import IdentityOrBlank, Time

Ttl = Annotated[int, msgspec.Meta(ge=TTL_MIN, le=TTL_MAX, description=f"seconds ({TTL_MIN} to {TTL_MAX})")]
TTL_MESSAGE = f"ttlSeconds must be an integer from {TTL_MIN} to {TTL_MAX}"
Resource = Annotated[str, text(RESOURCE_MAX, "a path, a glob (`*`, `?` within a segment; `**` for any segments; "
                                             "a trailing `/` means the whole directory) or a name")]


class NewReservation(Model):
    """POST /api/reservations."""
    __messages__ = {"ttlSeconds": TTL_MESSAGE, "reason": f"reason must be a string of at most {REASON_MAX} characters",
                    "exclusive": "exclusive must be true or false"}
    resource: Resource
    ttl_seconds: Ttl
    exclusive: bool = True
    reason: Annotated[str, msgspec.Meta(max_length=REASON_MAX)] | None = None
    project_id: Annotated[str, text(36)] | None = None


class RenewReservation(Model):
    """POST /api/reservations/{id}/renew: by ttlSeconds, else the reservation's own length."""
    __messages__ = {"ttlSeconds": TTL_MESSAGE}
    ttl_seconds: Ttl | None = None


class ReservationsQuery(Query):
    """GET /api/reservations: those in force the caller may see; `resource`: those overlapping it."""
    resource: Annotated[str, msgspec.Meta(max_length=RESOURCE_MAX)] | None = None
    holder: Annotated[IdentityOrBlank, msgspec.Meta(description="an identity (blank: anyone)")] | None = None
    project_id: str | None = None


class Reservation(Model, omit_defaults=False):
    """An advisory lock on a resource, held until released or `expiresAt` (`expired`: the expiry pass ended it)."""
    id: int
    resource: str
    exclusive: bool
    holder: str
    reason: str | None
    project_id: str | None
    ttl_seconds: int
    created_at: Time
    expires_at: Time
    expired: bool


class Reservations(Model):
    """Reservations in force, soonest to end first."""
    reservations: list[Reservation]
