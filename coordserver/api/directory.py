"""Directory endpoints: parse and authorise here, rules in domain/directory.py."""
from __future__ import annotations


from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import directory
from ..domain.identities import valid_identity
from ..errors import Invalid
from ..schemas.directory import CreateLink, DirectoryEntries, DirectoryEntry, DirectoryQuery, EntryDeleted, LinkFields
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


def _tagged(users: list[str] | None) -> list[str] | None:
    """Tagged identities as stored: each checked and lower-cased, once, in the order given; none is null."""
    return list(dict.fromkeys(valid_identity(t) for t in users)) if users else None


@bp.post("/directory")
@accepts(CreateLink, returns=DirectoryEntry)
async def create_entry():
    """Add a link to the directory."""
    principal = require_identity()
    data: CreateLink = await body()
    return await coord().store.write(directory.create, principal.identity, data.title, _http_url(data.url),
                                     data.description, _tagged(data.tagged_users))


@bp.patch("/directory/<rowid:entry_id>")
@accepts(LinkFields, returns=DirectoryEntry)
async def update_entry(entry_id: str):
    """Change a link's title, url, description or tagged identities (its creator or an admin)."""
    principal = require_identity()
    number = path_int(entry_id)
    fields: LinkFields = await body()
    changes = fields.changes()
    if "url" in changes:
        changes["url"] = _http_url(changes["url"])
    if "taggedUsers" in changes:
        changes["taggedUsers"] = _tagged(changes["taggedUsers"])
    return await coord().store.write(directory.update, principal.identity, principal.is_admin, number, changes)


@bp.delete("/directory/<rowid:entry_id>")
@accepts(returns=EntryDeleted)
async def delete_entry(entry_id: str):
    """Remove a link (its creator or an admin)."""
    principal = require_identity()
    return await coord().store.write(directory.delete, principal.identity, principal.is_admin, path_int(entry_id))
