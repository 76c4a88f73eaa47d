"""Ask endpoints (skill page `asks`): parse and authorise here, rules in domain/asks.py."""
from __future__ import annotations

from typing import Any

from msgspec import UNSET
from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import asks
from ..schemas.asks import Ask, AskAnswer, Asks, AsksQuery, NewAsk
from .common import accepts, body, path_int, query

bp = Blueprint("asks", __name__, url_prefix="/api/asks")


@bp.post("")
@accepts(NewAsk, returns=Ask)
async def create() -> dict[str, Any]:
    """Ask one identity or a group a question with options; the first answer wins."""
    principal = require_identity()
    new: NewAsk = await body()
    c = coord()
    return await c.store.write(asks.create, principal.identity, new.fields(), c.env_identities)


@bp.get("")
@accepts(query=AsksQuery, returns=Asks)
async def list_asks() -> dict[str, Any]:
    """Asks put to the caller or made by the caller, newest first."""
    principal = require_identity()
    q: AsksQuery = query()
    return await coord().store.read(asks.list_asks, principal.identity, q.role, q.status, q.limit)


@bp.get("/<rowid:ask_id>")
@accepts(returns=Ask)
async def get(ask_id: str) -> dict[str, Any]:
    """One ask; its asker reading a closed one marks the outcome read (its wake item leaves)."""
    principal = require_identity()
    number = path_int(ask_id)
    c = coord()
    found, unread = await c.store.read(asks.get, principal.identity, number)
    if unread:
        found = await c.store.write(asks.mark_read, principal.identity, number)
    return found


@bp.post("/<rowid:ask_id>/answer")
@accepts(AskAnswer, returns=Ask)
async def answer(ask_id: str) -> dict[str, Any]:
    """Answer an ask put to you: the first answer wins, later ones get 409 naming who answered."""
    principal = require_identity()
    number = path_int(ask_id)
    given: AskAnswer = await body()
    option = None if given.option is UNSET else given.option
    text = None if given.text is UNSET else given.text
    return await coord().store.write(asks.answer, principal.identity, number, option, text)


@bp.post("/<rowid:ask_id>/cancel")
@accepts(returns=Ask)
async def cancel(ask_id: str) -> dict[str, Any]:
    """Cancel an open ask you made."""
    principal = require_identity()
    return await coord().store.write(asks.cancel, principal.identity, path_int(ask_id))
