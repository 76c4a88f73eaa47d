"""Users as every identity sees them: the user list (GET /api/users) and the caller's own profile
(POST /api/auth/setup-profile). The admin's user routes are in admin.py.

Both routes came from other blueprints (auth, admin); their OpenAPI operationIds are part of the v1
contract and stay what they were (`operation_id`).
"""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import identities, users
from ..schemas.auth import SetupProfile
from ..schemas.users import Profile, Users
from ..timeutil import iso
from ..schemas.common import Error
from .common import accepts, body

bp = Blueprint("users", __name__, url_prefix="/api")


@bp.get("/users")
@accepts(returns=Users, operation_id="auth.list_users")
async def list_users():
    require_identity()
    c = coord()
    listed = await c.store.read(identities.list_users, c.env_identities)
    presence = c.services.presence
    for user in listed:
        seen = presence.last_seen(user["id"])
        if seen is not None:
            user["lastSeenAt"] = iso(seen[0])
    return {"users": listed}


@bp.post("/auth/setup-profile")
@accepts(SetupProfile, returns={200: Profile, 409: Error}, operation_id="admin.setup_profile")  # 409: a look-alike name
async def setup_profile():
    """Set the caller's display name (1–100 characters, trimmed)."""
    principal = require_identity()
    c = coord()
    return await c.store.write(users.setup_profile, principal.identity, (await body()).display_name,
                               c.env_identities)
