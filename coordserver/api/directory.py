"""Directory endpoints: parse and authorise here, rules in domain/directory.py."""
from __future__ import annotations


from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import directory
from ..domain.identities import valid_identity
from ..errors import Invalid
from ..schemas.directory import CreateLink, DirectoryEntries, DirectoryEntry, DirectoryQuery, EntryDeleted
from .common import accepts, body, path_int, query

bp = Blueprint("directory", __name__, url_prefix="/api")


@bp.get("/directory")
@accepts(query=DirectoryQuery, returns=DirectoryEntries)
async def list_entries():
    """Directory links visible to the caller, optionally filtered by q."""
    principal = require_identity()
    q: DirectoryQuery = query()
    return await coord().store.read(directory.list_entries, principal.identity, principal.is_admin, q.q,
                                    q.limit, q.offset)


def _http_url(value: str) -> str:
    if len(value) > directory.URL_MAX:
        raise Invalid(f"url is longer than {directory.URL_MAX} characters")
    if not directory.URL_RE.match(value):
        raise Invalid("url must be an http or https URL")
    return value.strip()


@bp.post("/directory")
@accepts(CreateLink, returns=DirectoryEntry)
async def create_entry():
    """Add a link to the directory."""
    principal = require_identity()
    data: CreateLink = await body()
    tagged = list(dict.fromkeys(valid_identity(t) for t in data.tagged_users)) if data.tagged_users else None
    return await coord().store.write(directory.create, principal.identity, data.title, _http_url(data.url),
                                     data.description, tagged)


@bp.delete("/directory/<rowid:entry_id>")
@accepts(returns=EntryDeleted)
async def delete_entry(entry_id: str):
    principal = require_identity()
    return await coord().store.write(directory.delete, principal.identity, principal.is_admin, path_int(entry_id))
