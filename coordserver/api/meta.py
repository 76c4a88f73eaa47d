"""Describes the API itself: the OpenAPI document built from the routes the app really serves, and a docs page."""
from __future__ import annotations

import re
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version

from pathlib import Path

from quart import Blueprint, Response, current_app

from ..context import coord
from ..schemas.doctor import Health
from ..schemas.meta import ApiDocument
from ..timeutil import iso
from ..web.headers import page_headers, script_hashes
from .common import accepts
from .openapi import openapi_document

bp = Blueprint("meta", __name__, url_prefix="/api")


@bp.get("/health")
@accepts(returns=Health, operation_id="auth.health")  # its v1 operationId, from when auth.py served it
async def health():
    return health_json(coord())


def health_json(c) -> dict[str, str]:
    """The health answer (also served by hotpaths.py, without Quart: the floor every request pays)."""
    return {"status": "ok", "timestamp": iso(c.now())}

_PARAM = re.compile(r"<(?:[a-z_]+(?:\([^)]*\))?:)?([A-Za-z_][A-Za-z0-9_]*)>")  # <id>, <int:id>, <other_than(x):id>
_DOCS_PAGE = Path(__file__).resolve().parent.parent / "web" / "api_docs.html"


@lru_cache(maxsize=512)
def route_template(rule: str) -> str:
    """A Quart rule as API.md writes the path: `/api/chat/channels/<channel_id>/read` ->
    `/api/chat/channels/{id}/read`. The first parameter that is an id (`id`, `<thing>_id`) is `{id}`,
    later ones camelCase (`<workflow_id>` -> `{workflowId}`), names such as `recipient` stay."""
    seen_id = False

    def name(match: re.Match) -> str:
        nonlocal seen_id
        param = match.group(1)
        if (param == "id" or param.endswith("_id")) and not seen_id:
            seen_id = True
            return "{id}"
        head, *rest = param.split("_")
        return "{" + head + "".join(part.title() for part in rest) + "}"
    return _PARAM.sub(name, rule)


def package_version() -> str:
    try:
        return version("coord")
    except PackageNotFoundError:
        return "0.0.0"


@bp.get("/openapi.json")
@accepts(returns=ApiDocument)
async def openapi():
    """The OpenAPI 3.1 document of this API, generated from the request and response models."""
    document = current_app.extensions.get("openapi")
    if document is None:  # the routes are fixed once the app serves: build it once
        document = openapi_document(current_app.url_map.iter_rules(), current_app.view_functions, package_version())
        current_app.extensions["openapi"] = document
    return document


@bp.get("/docs")
@accepts(media="text/html")
async def docs():
    """The API reference for people: a self-contained page (no external scripts) rendering /api/openapi.json."""
    page = _docs_page()
    return Response(page, headers=page_headers(script_src=script_hashes(page), connect_src="'self'"))


@lru_cache(maxsize=1)
def _docs_page() -> str:
    return _DOCS_PAGE.read_text(encoding="utf-8")
