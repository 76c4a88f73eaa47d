"""Recurring task templates over HTTP (API.md §7). A template of a restricted project exists only for
those who can see the project (domain.recurring.template_visible)."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import recurring
from ..schemas.common import Ok
from ..schemas.recurring import NewTemplate, PreviewSchedule, RunPreview, Template, TemplateFields, Templates, TickResult
from ..schemas.swarm import DisabledQuery
from .common import accepts, body, query

bp = Blueprint("recurring", __name__, url_prefix="/api/swarm/recurring")


@bp.get("")
@accepts(query=DisabledQuery, returns=Templates)
async def list_templates():
    """Recurring templates by title; disabled ones only with includeDisabled=true."""
    principal = require_identity()
    return {"templates": await coord().store.read(recurring.list_templates, query().include_disabled,
                                                  principal.identity, principal.is_admin)}


@bp.post("")
@accepts(NewTemplate, returns=Template)
async def create_template():
    """Create a recurring template (5-field cron in an IANA timezone)."""
    principal = require_identity()
    fields: NewTemplate = await body()
    c = coord()
    return await c.store.write(recurring.create_template, principal.identity, fields.changes(), c.env_identities)


@bp.patch("/<other_than(tick, preview):id>")
@accepts(TemplateFields, returns=Template)
async def update_template(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Change a recurring template; nextRunAt is recomputed when the schedule changes."""
    principal = require_identity()
    fields: TemplateFields = await body()
    c = coord()
    return await c.store.write(recurring.update_template, id, fields.changes(), c.env_identities,
                               principal.identity, principal.is_admin)


@bp.delete("/<other_than(tick, preview):id>")
@accepts(returns=Ok)
async def delete_template(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
    """Delete a recurring template (its tasks stay)."""
    principal = require_identity()
    await coord().store.write(recurring.delete_template, id, principal.identity, principal.is_admin)
    return {"ok": True}


@bp.post("/tick")
@accepts(returns=TickResult)
async def tick():
    """Run the recurring-task scheduler now."""
    require_identity()
    return await coord().services.scheduler.tick()


@bp.post("/preview")
@accepts(PreviewSchedule, returns=RunPreview)
async def preview():
    """The next runs of a cron expression in a timezone (ours): checks a schedule before it is saved."""
    require_identity()
    schedule: PreviewSchedule = await body()
    return await coord().store.read(recurring.preview_runs, schedule.cron_expr, schedule.timezone, schedule.count)
