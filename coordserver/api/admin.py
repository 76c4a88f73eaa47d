"""User admin (API.md §18): the admin user list, user PATCH and user stats (the caller's own profile: users.py);
the loop guards' list and clearing (skill page `guards`)."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_admin
from ..context import coord
from ..domain import guards, users
from ..schemas.auth import UserFields
from ..schemas.guards import LoopGuard, LoopGuards
from ..schemas.users import AdminUsers, AllUserStats, UserAnswer
from ..schemas.common import Error
from .common import accepts, body, path_int

bp = Blueprint("admin", __name__, url_prefix="/api")


@bp.get("/admin/users")
@accepts(returns=AdminUsers)
async def list_users():
    """Every user, archived ones included, by id."""
    require_admin()
    return {"users": await coord().store.read(users.admin_list)}


@bp.patch("/admin/users/<id>")
@accepts(UserFields, returns={200: UserAnswer, 409: Error})  # 409: the last admin, or a look-alike displayName
async def update_user(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change a user's displayName, isAdmin, isAgent, avatarUrl, archivedAt (archiving revokes its tokens) or
    its loop-guard thresholds loopMessages and loopMinutes (null: the deployment's)."""
    require_admin()
    fields: UserFields = await body()
    c = coord()
    return await c.store.write(users.admin_update, id, fields.changes(), c.env_identities)


@bp.get("/admin/user-stats")
@accepts(returns=AllUserStats)
async def user_stats():
    """Per identity: inbox counts, tasks by status, presence and how it is reached."""
    require_admin()
    c = coord()
    tracker = c.services.presence
    seen = dict(tracker.seen)
    online = {identity: tracker.is_online(identity) for identity in seen}
    streaming = c.services.sse.streaming_identities(everywhere=True)  # a stream on any worker
    return await c.store.read(users.user_stats, c.env_identities, seen, online, streaming,
                              frozenset(c.settings.webhook_overrides))


@bp.get("/admin/guards")
@accepts(returns=LoopGuards)
async def list_guards():
    """Loop guards holding now, and those cleared in the last 24 hours with who cleared them."""
    require_admin()
    return await coord().store.read(guards.admin_list)


@bp.post("/admin/guards/<rowid:guard_id>/clear")
@accepts(returns={200: LoopGuard, 404: Error, 409: Error})  # 409: already cleared (names by whom)
async def clear_guard(guard_id: str):
    """Clear an active loop guard now: its members' pulses and pushes flow again (`guard_cleared` is logged)."""
    principal = require_admin()
    number = path_int(guard_id)
    return await coord().store.write(guards.clear_by_admin, number, principal.identity)
