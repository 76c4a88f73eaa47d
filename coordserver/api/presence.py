"""`GET /api/presence`: who is online, with unread mail and active task counts."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..realtime.presence import presence_counts
from ..schemas.presence import Presence
from ..timeutil import iso
from .common import accepts

bp = Blueprint("presence", __name__, url_prefix="/api")


@bp.get("/presence")
@accepts(returns=Presence)
async def presence():
    principal = require_identity()
    c = coord()
    tracker = c.services.presence
    can_act, unread, tasks, agents = await c.store.read(presence_counts, c.env_identities, principal)
    result = {}
    for identity in sorted(can_act):
        seen = tracker.last_seen(identity)
        result[identity] = {"online": tracker.is_online(identity),
                            "lastSeen": iso(seen[0]) if seen else None,
                            "source": seen[1] if seen else None,
                            "unread": unread.get(identity, 0), "tasks": tasks.get(identity, 0),
                            "isAgent": identity in agents}
    return result
