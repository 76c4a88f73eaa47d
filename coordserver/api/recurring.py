"""Recurring task templates over HTTP (API.md §7)."""
from __future__ import annotations

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import recurring
from .common import json_object, query_bool

bp = Blueprint("recurring", __name__, url_prefix="/api/swarm/recurring")


@bp.get("")
async def list_templates():
    require_identity()
    return {"templates": await coord().store.read(recurring.list_templates, query_bool("includeDisabled"))}


@bp.post("")
async def create_template():
    principal = require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(recurring.create_template, principal.identity, body, c.env_identities)


@bp.patch("/<template_id>")
async def update_template(template_id: str):
    require_identity()
    body = await json_object()
    c = coord()
    return await c.store.write(recurring.update_template, template_id, body, c.env_identities)


@bp.delete("/<template_id>")
async def delete_template(template_id: str):
    require_identity()
    await coord().store.write(recurring.delete_template, template_id)
    return {"ok": True}


@bp.post("/tick")
async def tick():
    require_identity()
    return await coord().services["scheduler"].tick()
