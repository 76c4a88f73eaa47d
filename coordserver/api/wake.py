"""Wake: GET /api/wake (marks buzz items delivered) and the admin view of another identity (marks nothing)."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_admin, require_identity
from ..context import coord
from ..domain import wake
from ..domain.identities import valid_identity
from .common import query_bool

bp = Blueprint("wake", __name__, url_prefix="/api")


def presence_snapshot() -> dict:
    """Last-seen times as plain values for the domain code (backup alerts)."""
    presence = coord().services.get("presence")
    return {identity: when for identity, (when, _source) in list(presence.seen.items())} if presence else {}


@bp.get("/wake")
async def my_wake():
    """The caller's wake; buzz items returned are marked delivered."""
    principal = require_identity()
    return await deliver_wake(principal.identity, query_bool("includeOffHours"))


async def deliver_wake(identity: str, include_off_hours: bool) -> dict:
    """The caller's wake, with its buzz items marked delivered in the unit that returns them.
    Most wakes hold no buzz item: those are answered from a read unit and never queue on the writer."""
    c = coord()
    args = (identity, c.settings.base_url, include_off_hours)
    payload = await c.store.read(wake.wake_payload, *args, False, c.env_identities, presence_snapshot())
    if not any(item["source"] == "buzz" for item in payload["items"]):
        return payload
    return await c.store.write(wake.wake_payload, *args, True, c.env_identities, presence_snapshot())


@bp.get("/wake/<identity>")
async def wake_of(identity: str):
    """Another identity's wake (admin); marks nothing delivered."""
    require_admin("Admin required")
    target = valid_identity(identity)
    c = coord()
    return await c.store.read(wake.wake_payload, target, c.settings.base_url, query_bool("includeOffHours"),
                              False, c.env_identities, presence_snapshot())
