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
    principal = require_identity()
    c = coord()
    return await c.store.write(wake.wake_payload, principal.identity, c.settings.base_url,
                               query_bool("includeOffHours"), True, c.env_identities, presence_snapshot())


@bp.get("/wake/<identity>")
async def wake_of(identity: str):
    require_admin("Admin required")
    target = valid_identity(identity)
    c = coord()
    return await c.store.read(wake.wake_payload, target, c.settings.base_url, query_bool("includeOffHours"),
                              False, c.env_identities, presence_snapshot())
