"""Recurring task templates over HTTP (API.md §7)."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import recurring
from ..schemas.common import Ok
from ..schemas.recurring import RunPreview, Template, Templates, TickResult
from ..schemas.swarm import DisabledQuery
from .common import accepts, json_object, query

bp = Blueprint("recurring", __name__, url_prefix="/api/swarm/recurring")


@bp.get("")
@accepts(query=DisabledQuery, returns=Templates)
async def list_templates():
    """Recurring templates by title; disabled ones only with includeDisabled=true."""
    require_identity()
    return {"templates": await coord().store.read(recurring.list_templates, query().include_disabled)}


@bp.post("")
@accepts(returns=Template)
async def create_template():
    """Create a recurring template (5-field cron in an IANA timezone)."""
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(recurring.create_template, principal.identity, body, c.env_identities)


@bp.patch("/<other_than(tick, preview):id>")
@accepts(returns=Template)
async def update_template(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change a recurring template; nextRunAt is recomputed when the schedule changes."""
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(recurring.update_template, id, body, c.env_identities, principal.identity)


@bp.delete("/<other_than(tick, preview):id>")
@accepts(returns=Ok)
async def delete_template(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Delete a recurring template (its tasks stay)."""
    require_identity()
    await coord().store.write(recurring.delete_template, id)
    return {"ok": True}


@bp.post("/tick")
@accepts(returns=TickResult)
async def tick():
    """Run the recurring-task scheduler now."""
    require_identity()
    return await coord().services.scheduler.tick()


@bp.post("/preview")
@accepts(returns=RunPreview)
async def preview():
    """The next runs of a cron expression in a timezone (ours): checks a schedule before it is saved."""
    require_identity()
    body = await json_object()
    return await coord().store.read(recurring.preview_runs, body)
