"""Directory endpoints: parse and authorise here, rules in domain/directory.py."""
from __future__ import annotations

from urllib.parse import urlparse

from quart import Blueprint, request

from ..auth import require_identity
from ..context import coord
from ..domain import directory
from ..domain.identities import valid_identity
from ..errors import Invalid
from .common import json_object, path_int, query_int, query_limit, string_list, text

bp = Blueprint("directory", __name__, url_prefix="/api")


@bp.get("/directory")
async def list_entries():
    principal = require_identity()
    q = (request.args.get("q") or "").strip() or None
    return await coord().store.read(directory.list_entries, principal.identity, principal.is_admin, q,
                                    query_limit(), query_int("offset", 0))


def _http_url(value: str) -> str:
    value = value.strip()
    if len(value) > directory.URL_MAX:
        raise Invalid(f"url is longer than {directory.URL_MAX} characters")
    parsed = urlparse(value)
    if parsed.scheme.lower() not in ("http", "https") or not parsed.netloc or any(c.isspace() for c in value):
        raise Invalid("url must be an http or https URL")
    return value


@bp.post("/directory")
async def create_entry():
    principal = require_identity()
    body = await json_object()
    title, url = body.get("title"), body.get("url")
    if not isinstance(title, str) or not title.strip() or not isinstance(url, str) or not url.strip():
        raise Invalid("title and url are required")
    description = text(body, "description", max_len=directory.DESCRIPTION_MAX)
    tagged = string_list(body, "taggedUsers", max_len=50)
    tagged = list(dict.fromkeys(valid_identity(t) for t in tagged)) if tagged else None
    return await coord().store.write(directory.create, principal.identity, title.strip()[:directory.TITLE_MAX],
                                     _http_url(url), description, tagged)


@bp.delete("/directory/<entry_id>")
async def delete_entry(entry_id: str):
    principal = require_identity()
    return await coord().store.write(directory.delete, principal.identity, principal.is_admin, path_int(entry_id))
