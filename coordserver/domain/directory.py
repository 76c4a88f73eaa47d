"""The directory: shared links, visible under the same tagging rule as notebook pages."""
from __future__ import annotations

import re

from .fields import WS, WS_CHARS

from .. import db
from ..jsonstrict import JSONObject
from ..errors import Forbidden, Invalid, NotFound
from ..models import DirectoryEntry
from ..timeutil import iso, to_db
from . import kinds
from .visibility import can_see, is_owner

TITLE_MAX = 255
URL_MAX = 2000
# An http(s) URL with a host and no white space inside (around it is trimmed): the model states it, api/directory checks it.
URL_RE = re.compile(rf"^{WS}*[Hh][Tt][Tt][Pp][Ss]?://[^{WS_CHARS}\x00/?#\[\]@]+(?:[/?#][^{WS_CHARS}\x00]*)?{WS}*$")
DESCRIPTION_MAX = 10_000
TAGGED_MAX = 100  # identities an entry may be tagged with
# What an update may change: its wire name -> the column.
EDITABLE = {"title": "title", "url": "url", "description": "description", "taggedUsers": "tagged_users"}


def entry_json(e: DirectoryEntry, agents: set[str]) -> JSONObject:
    """An entry; `agents`: which identities are agents (who is who: `createdByIsAgent`)."""
    return {"id": e.id, "title": e.title, "url": e.url, "description": e.description, "createdBy": e.created_by,
            "createdByIsAgent": e.created_by in agents, "taggedUsers": e.tagged_users, "createdAt": iso(e.created_at)}


def list_entries(identity: str, is_admin: bool, q: str | None, limit: int, offset: int) -> list[JSONObject]:
    """Visible entries, newest first. Visibility depends on a JSON list, so it is applied here, before paging."""
    query = DirectoryEntry.select()
    if q:
        query = query.where(DirectoryEntry.title.contains(q) | DirectoryEntry.description.contains(q))
    visible = (e for e in query.order_by(DirectoryEntry.created_at.desc(), DirectoryEntry.id.desc()).iterator()
               if can_see(e.created_by, e.tagged_users, identity, is_admin))
    page: list[DirectoryEntry] = []
    for index, entry in enumerate(visible):
        if index >= offset + limit:
            break
        if index >= offset:
            page.append(entry)
    agents = kinds.agents_among(e.created_by for e in page)
    return [entry_json(e, agents) for e in page]


def create(identity: str, title: str, url: str, description: str | None, tagged_users: list[str] | None) -> JSONObject:
    entry = DirectoryEntry.create(title=title, url=url, description=description, created_by=identity,
                                  tagged_users=tagged_users or None, created_at=to_db(db.now()))
    return entry_json(entry, kinds.agents_among([identity]))


def _owned(identity: str, is_admin: bool, entry_id: int, doing: str) -> DirectoryEntry:
    """The entry the caller may change: 404 when absent or not visible to them, 403 when not theirs."""
    entry = DirectoryEntry.get_or_none(DirectoryEntry.id == entry_id)
    if entry is None or not can_see(entry.created_by, entry.tagged_users, identity, is_admin):
        raise NotFound("Entry not found")
    if not is_owner(entry.created_by, identity, is_admin):
        raise Forbidden(f"Only the creator or an admin may {doing} this entry")
    return entry


def update(identity: str, is_admin: bool, entry_id: int, changes: JSONObject) -> JSONObject:
    """Any of title, url, description, taggedUsers (by wire name, already checked as POST checks them; a null
    description or an empty or null taggedUsers clears it). The creator or an admin; the entry as it is now."""
    if not changes:
        raise Invalid("No fields to update")
    entry = _owned(identity, is_admin, entry_id, "edit")
    for key, value in changes.items():
        if key == "taggedUsers":
            value = value or None  # as create stores them: no tags is null
        setattr(entry, EDITABLE[key], value)
    entry.save()
    return entry_json(entry, kinds.agents_among([entry.created_by]))


def delete(identity: str, is_admin: bool, entry_id: int) -> JSONObject:
    _owned(identity, is_admin, entry_id, "delete").delete_instance()
    return {"success": True, "id": entry_id}
