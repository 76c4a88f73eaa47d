"""Silence endpoints under /api/buzz/silences (skill page `buzz`, "Silences"): parse and authorise here, rules in
domain/silences.py."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec

from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import silences
from ..schemas.base import INT_MAX
from ..schemas.silences import NewSilence, Silence, SilencePreview, Silences, SilenceTarget
from .common import accepts, body, path_int

bp = Blueprint("silences", __name__, url_prefix="/api/buzz/silences")
PathRowId = Annotated[int, msgspec.Meta(ge=0, le=INT_MAX)]  # path_int's range, as <rowid:...> is documented


@bp.post("")
@accepts(NewSilence, returns=Silence)
async def create() -> dict[str, Any]:
    """Silence matching ingests of a webhook or an app name until a time: stored and counted, with no effects."""
    principal = require_identity()
    new: NewSilence = await body()
    return await coord().store.write(silences.create, principal.identity, principal.is_admin, new.fields())


@bp.get("")
@accepts(returns=Silences)
async def list_silences() -> dict[str, Any]:
    """Running silences and those that ended in the last 24 h, with who made them."""
    principal = require_identity()
    return {"silences": await coord().store.read(silences.list_silences, principal.identity, principal.is_admin)}


@bp.post("/preview")
@accepts(SilenceTarget, returns=SilencePreview)
async def preview() -> dict[str, Any]:
    """How many events of the last 24 h a silence would have matched, and which alerts."""
    principal = require_identity()
    target: SilenceTarget = await body()
    return await coord().store.read(silences.preview, principal.identity, principal.is_admin, target.fields())


@bp.delete("/<other_than(preview):silence_id>")  # so that /preview answers (and OPTIONS lists) POST alone
@accepts(returns=Silence, path={"silence_id": PathRowId})
async def end(silence_id: str) -> dict[str, Any]:
    """End a running silence now."""
    principal = require_identity()
    number = path_int(silence_id)
    return await coord().store.write(silences.end, principal.identity, principal.is_admin, number)
