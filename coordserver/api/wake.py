"""Wake: GET /api/wake (marks buzz items delivered) and the admin view of another identity (marks nothing)."""
from __future__ import annotations

from quart import Blueprint, Response

from ..auth import require_admin, require_identity
from ..context import coord
from ..domain.identities import valid_identity
from ..schemas.common import Identity
from ..schemas.wake import WakePayload, WakeQuery
from .common import accepts, query

bp = Blueprint("wake", __name__, url_prefix="/api")


def presence_snapshot() -> dict:
    """Last-seen times as plain values for the domain code (backup alerts)."""
    return _presence_of(coord())


def _presence_of(c) -> dict:
    return c.services.presence.snapshot()


@bp.get("/wake")
@accepts(query=WakeQuery, returns=WakePayload)
async def my_wake():
    """The caller's wake; buzz items returned are marked delivered."""
    principal = require_identity()
    return await deliver_wake(principal.identity, query().include_off_hours)


async def deliver_wake(identity: str, include_off_hours: bool) -> Response:
    """The caller's wake, with its buzz items marked delivered in the unit that returns them.
    Most wakes hold no buzz item: those are answered from a read unit (and the wake cache) and never
    queue on the writer."""
    return _json_response(await wake_for(coord(), identity, include_off_hours))


def _json_response(text: str) -> Response:
    """What returning the payload dict would give (Quart's compact JSON and newline), from its text."""
    return Response(text + "\n", content_type="application/json")


async def wake_for(c, identity: str, include_off_hours: bool) -> str:
    """deliver_wake for callers holding the Coord (the ASGI hot path): the payload as JSON text."""
    return await c.services.wake_cache.payload(identity, include_off_hours, True, lambda: _presence_of(c))


@bp.get("/wake/<identity>")
@accepts(query=WakeQuery, returns=WakePayload, path={"identity": Identity})
async def wake_of(identity: str):
    """Another identity's wake (admin); marks nothing delivered."""
    require_admin("Admin required")
    target = valid_identity(identity)
    c = coord()
    return _json_response(
        await c.services.wake_cache.payload(target, query().include_off_hours, False, lambda: _presence_of(c)))
