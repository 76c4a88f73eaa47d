"""Skill docs: markdown pages for agents, served without auth or rate limits.

Pages are the files in coordserver/skills: `<page>.md`, plus the reference monitor `script.py`;
which pages exist, and the overview's list of them, is coordserver/skills/index.py.
"""
from __future__ import annotations

from quart import Blueprint

from ..context import coord
from ..errors import NotFound
from ..skills import index
from .common import accepts

bp = Blueprint("skills", __name__, url_prefix="/api")

_MARKDOWN = {"Content-Type": "text/markdown; charset=utf-8"}


@bp.get("/skill")
@accepts(media="text/markdown")
async def overview():
    return index.overview(coord().settings.base_url), 200, _MARKDOWN


@bp.get("/skill/<page>")
@accepts(media=("text/markdown", "text/plain"))
async def page(page: str):
    found = index.page(page)
    if found is None:
        raise NotFound(f"No skill page named '{page}'. GET /api/skill lists them.")
    text, media = found
    return text, 200, {"Content-Type": media}
