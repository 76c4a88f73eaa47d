"""Notebook pages: rules, persistence of the CRDT document, and the page-changed events.

Plain functions run inside Store units. The live document of an open page is held by the rooms
(realtime/notebook/room.py); what is stored here is its last saved state (`ydoc`, a Yjs v1 update)
plus the plain text (`content`) used by lists, search and readers without a CRDT.
"""
from __future__ import annotations

import base64
import difflib
from datetime import timedelta

from pycrdt import Doc, Text

from .. import db
from ..jsonstrict import JSONObject
from ..principal import Principal
from ..errors import Forbidden, Invalid, NotFound
from ..events import log
from ..events.channels import NOTEBOOK, NotebookPayload, RoomMeta
from ..models import NotebookPage, NotebookReadBase, NotebookRelay
from ..timeutil import iso, to_db
from .identities import valid_identity
from . import notebook_versions as versions, visibility
from .visibility import can_see, is_owner

TEXT_NAME = "content"
TITLE_MAX = 255
EVENT_TYPE = "notebook_page_updated"
RELAY_RETENTION = timedelta(minutes=10)
READ_BASE_RETENTION = timedelta(days=1)  # a PATCH later than this after the read diffs two-way


# --- the CRDT text ---------------------------------------------------------------------------

def byte_offset(text: str, index: int) -> int:
    """pycrdt Text positions are UTF-8 byte offsets; callers think in code points."""
    return len(text[:index].encode())


def new_document(content: str) -> Doc[Text]:
    doc: Doc[Text] = Doc()
    text = doc.get(TEXT_NAME, type=Text)
    if content:
        text.insert(0, content)
    return doc


def load_document(state: bytes | None) -> Doc[Text]:
    doc: Doc[Text] = Doc()
    doc.get(TEXT_NAME, type=Text)
    if state:
        doc.apply_update(state)
    return doc


def document_text(doc: Doc[Text]) -> str:
    return str(doc.get(TEXT_NAME, type=Text))


def merge_text(doc: Doc[Text], new_content: str, origin: object = None) -> bytes | None:
    """Turn the document's text into `new_content` with the smallest edits (a diff on code points),
    so concurrent edits elsewhere in the text survive. Returns the Yjs update, or None if unchanged."""
    text = doc.get(TEXT_NAME, type=Text)
    old = str(text)
    if old == new_content:
        return None
    before = doc.get_state()
    with doc.transaction(origin=origin):
        for tag, i1, i2, j1, j2 in reversed(_opcodes(old, new_content)):
            start = byte_offset(old, i1)
            if tag in ("replace", "delete"):
                del text[start:byte_offset(old, i2)]
            if tag in ("replace", "insert"):
                text.insert(start, new_content[j1:j2])
    return doc.get_update(before)


def merge_text_from(doc: Doc[Text], base: bytes | None, new_content: str) -> bytes | None:
    """A three-way merge: the edits that turn `base` (the document state the writer last read) into
    `new_content` are made on a copy of `base` and applied to `doc` as CRDT operations, so whatever
    others changed since the writer read the page survives. Without a base, diff against `doc` itself."""
    if base is None:
        return merge_text(doc, new_content)
    update = merge_text(load_document(base), new_content)
    if update is not None:
        doc.apply_update(update)
    return update


def _opcodes(old: str, new: str) -> list[tuple[str, int, int, int, int]]:
    """difflib opcodes, with the common prefix and suffix cut first (cheap for the usual small edit)."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    a, b = old[prefix:len(old) - suffix], new[prefix:len(new) - suffix]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(tag, i1 + prefix, i2 + prefix, j1 + prefix, j2 + prefix)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


# --- wire shapes -----------------------------------------------------------------------------

def page_json(page: NotebookPage, content: str | None = None) -> JSONObject:
    return {"id": page.id, "title": page.title, "content": page.content if content is None else content,
            "createdBy": page.created_by, "taggedUsers": page.tagged_users, "tags": page.tags,
            "expiresAt": iso(page.expires_at), "reviewAt": iso(page.review_at), "locked": page.locked,
            "lockedBy": page.locked_by, "archivedAt": iso(page.archived_at), "createdAt": iso(page.created_at),
            "updatedAt": iso(page.updated_at)}


def summary_json(page: NotebookPage) -> JSONObject:
    row = page_json(page)
    del row["content"], row["archivedAt"]
    return row


def room_meta(page: NotebookPage) -> RoomMeta:
    """What a room needs to decide who may see and edit (also sent to rooms after every change)."""
    return {"createdBy": page.created_by, "taggedUsers": page.tagged_users, "locked": page.locked,
            "lockedBy": page.locked_by, "archived": page.archived_at is not None}


# --- audience of page events -----------------------------------------------------------------

def audience(page: NotebookPage, env_admins: frozenset[str]) -> list[str] | None:
    return visibility.audience(page.created_by, page.tagged_users, env_admins)


def _emit(page: NotebookPage, actor: str, change: str, env_admins: frozenset[str]) -> None:
    log.append(EVENT_TYPE, {"type": EVENT_TYPE, "pageId": page.id, "title": page.title, "updatedBy": actor,
                            "updatedAt": iso(page.updated_at), "change": change},
               to=audience(page, env_admins))


def _announce_to_rooms(page: NotebookPage) -> None:
    meta = room_meta(page)
    payload: NotebookPayload = {"kind": "meta", "origin": None, "createdBy": meta["createdBy"],
                                "taggedUsers": meta["taggedUsers"], "locked": meta["locked"],
                                "lockedBy": meta["lockedBy"], "archived": meta["archived"]}
    db.after_commit(NOTEBOOK.of(page.id), payload)


# --- reading ---------------------------------------------------------------------------------

def _page_for_update(page_id: str) -> NotebookPage | None:
    """The row, locked until the unit commits on PostgreSQL (several processes may save one page);
    SQLite's single writer already serialises units."""
    page: NotebookPage | None = db.locked(NotebookPage.select().where(NotebookPage.id == page_id)).first()
    return page


def _visible_page(page_id: str, principal: Principal, for_update: bool = True) -> NotebookPage:
    page = _page_for_update(page_id) if for_update else NotebookPage.get_or_none(NotebookPage.id == page_id)
    if page is None:
        raise NotFound("Not found")
    if not can_see(page.created_by, page.tagged_users, principal.identity, principal.is_admin):
        raise Forbidden("Forbidden")
    return page


def get_page(page_id: str, principal: Principal) -> NotebookPage:
    return _visible_page(page_id, principal, for_update=False)


def list_pages(principal: Principal, q: str | None, limit: int, offset: int) -> list[JSONObject]:
    query = NotebookPage.select().where(NotebookPage.archived_at.is_null())
    needle = q.lower() if q else None
    if q and q.isascii() and "\\" not in q:
        # A coarse filter in SQL (databases fold only ASCII case alike; % and _ merely widen it);
        # the exact, case-insensitive match for every script is checked below.
        pattern = f"%{q}%"
        query = query.where(NotebookPage.title.ilike(pattern) | NotebookPage.content.ilike(pattern))
    query = query.order_by(NotebookPage.updated_at.desc(), NotebookPage.id)
    pages, skipped = [], 0
    # Visibility depends on a JSON list, so it is checked here; rows stream in order until the page is full.
    for page in query.iterator():
        if not can_see(page.created_by, page.tagged_users, principal.identity, principal.is_admin):
            continue
        if needle and needle not in page.title.lower() and needle not in page.content.lower():
            continue
        if skipped < offset:
            skipped += 1
            continue
        pages.append(summary_json(page))
        if len(pages) >= limit:
            break
    return pages


# --- writing ---------------------------------------------------------------------------------

def _identity_list(value: list[str] | None) -> list[str] | None:
    if not value:
        return None
    return list(dict.fromkeys(valid_identity(v) for v in value))


def _tag_list(value: list[str] | None) -> list[str] | None:
    if not value:
        return None
    tags = [v.strip() for v in value if v.strip()]
    return list(dict.fromkeys(tags)) or None


def create_page(principal: Principal, fields: JSONObject, env_admins: frozenset[str]) -> JSONObject:
    now = to_db(db.now())
    content = fields.get("content") or ""
    page = NotebookPage.create(
        title=fields["title"], content=content, ydoc=new_document(content).get_update(),
        created_by=principal.identity, tagged_users=_identity_list(fields.get("taggedUsers")),
        tags=_tag_list(fields.get("tags")), expires_at=to_db(fields.get("expiresAt")),
        review_at=to_db(fields.get("reviewAt")), locked=False, locked_by=None, archived_at=None,
        created_at=now, updated_at=now)
    _emit(page, principal.identity, "meta", env_admins)
    versions.first_version(page, env_admins)
    return page_json(page)


def update_page(page_id: str, principal: Principal, changes: JSONObject, env_admins: frozenset[str],
                merge_here: bool, base: bytes | None = None) -> JSONObject:
    """Apply a PATCH. Content is merged as a diff into the CRDT document: here, into the stored one,
    when `merge_here` (no room of this process holds the page; rooms elsewhere hear the update on the
    bus), else by the caller into the live room after commit.

    Returns {"page": NotebookPage, "change": kind or None, "merge": content still to merge or None}.
    """
    page = _visible_page(page_id, principal)
    owner = is_owner(page.created_by, principal.identity, principal.is_admin)
    if page.archived_at is not None:
        if not (owner and changes == {"archived": False}):
            raise Forbidden("Page is archived")
        page.archived_at = None
        return _save_change(page, principal, "archive", env_admins)
    if changes.get("archived") is True:
        if not owner:
            raise Forbidden("Only the page owner may archive it")
        page.archived_at = to_db(db.now())
        return _save_change(page, principal, "archive", env_admins)
    if page.locked and not owner and changes:
        raise Forbidden("Page is locked")
    if "taggedUsers" in changes:
        changes["taggedUsers"] = _identity_list(changes["taggedUsers"])
    if not owner and (("locked" in changes and changes["locked"] != page.locked)
                      or ("taggedUsers" in changes and changes["taggedUsers"] != page.tagged_users)):
        raise Forbidden("Only the page owner may change locked or taggedUsers")

    kinds = set()
    for key, attr in (("title", "title"), ("taggedUsers", "tagged_users"), ("tags", "tags"),
                      ("expiresAt", "expires_at"), ("reviewAt", "review_at")):
        if key not in changes:
            continue
        value = changes[key]
        if key == "tags":
            value = _tag_list(value)
        elif key in ("expiresAt", "reviewAt"):
            value = to_db(value)
        if getattr(page, attr) != value:
            setattr(page, attr, value)
            kinds.add("meta")
    if "locked" in changes and changes["locked"] != page.locked:
        page.locked = changes["locked"]
        page.locked_by = principal.identity if page.locked else None
        kinds.add("lock")
    content = changes.get("content")
    if content is not None and merge_here:
        update = _merge_into_stored(page, content, base)
        if update is not None:
            kinds.add("content")
            db.after_commit(NOTEBOOK.of(page.id), bus_update(page.id, update, origin=None))
        content = None
    elif content is not None and content != page.content:
        kinds.add("content")
    if not kinds:
        return {"page": page, "change": None, "merge": content}
    if "content" in kinds:
        versions.note_editors(page.id, [principal.identity])
    change = "lock" if "lock" in kinds else "content" if "content" in kinds else "meta"
    result = _save_change(page, principal, change, env_admins)
    result["merge"] = content
    return result


def archive_page(page_id: str, principal: Principal, env_admins: frozenset[str]) -> None:
    page = _visible_page(page_id, principal)
    if not is_owner(page.created_by, principal.identity, principal.is_admin):
        raise Forbidden("Only the page owner may archive it")
    if page.archived_at is None:
        page.archived_at = to_db(db.now())
        _save_change(page, principal, "archive", env_admins)


def _save_change(page: NotebookPage, principal: Principal, change: str, env_admins: frozenset[str]) -> JSONObject:
    page.updated_at = to_db(db.now())
    page.save()
    _emit(page, principal.identity, change, env_admins)
    _announce_to_rooms(page)
    return {"page": page, "change": change, "merge": None}


# --- the stored document ---------------------------------------------------------------------

def stored_document(page_id: str) -> tuple[bytes, RoomMeta] | None:
    """The saved Yjs state and the room metadata; a page saved before it had a CRDT state gets one
    here, once (a conditional update, so two processes never build two different documents)."""
    page = NotebookPage.get_or_none(NotebookPage.id == page_id)
    if page is None:
        return None
    if page.ydoc is None:
        state = new_document(page.content).get_update()
        updated = (NotebookPage.update(ydoc=state)
                   .where((NotebookPage.id == page_id) & NotebookPage.ydoc.is_null()).execute())
        if not updated:
            page = NotebookPage.get_by_id(page_id)
            assert page.ydoc is not None  # another process stored one first
            state = bytes(page.ydoc)
        return state, room_meta(page)
    return bytes(page.ydoc), room_meta(page)


def stored_state(page_id: str) -> bytes | None:
    row = NotebookPage.select(NotebookPage.ydoc).where(NotebookPage.id == page_id).first()
    return bytes(row.ydoc) if row is not None and row.ydoc is not None else None


def save_document(page_id: str, state: bytes, state_vector: bytes, editors: list[str],
                  env_admins: frozenset[str]) -> bytes | None:
    """Persist a room's document, merged with what is stored (another process may have saved in
    between), and the plain text. Emits one content event if peers edited since the last save.
    Returns what the stored document had that the room lacked (None when nothing)."""
    page = _page_for_update(page_id)
    if page is None:
        return None
    doc = load_document(bytes(page.ydoc) if page.ydoc is not None else None)
    doc.apply_update(state)
    content = document_text(doc)
    missing = doc.get_update(state_vector)
    changed = content != page.content
    page.ydoc = doc.get_update()
    page.content = content
    if changed:
        page.updated_at = to_db(db.now())
    page.save()
    if changed and editors:
        _emit(page, editors[-1], "content", env_admins)
    # Named even when another process saved the merged text first: these editors made part of it.
    versions.note_editors(page_id, editors)
    _prune_relays()
    return missing if has_content(missing) else None


def _merge_into_stored(page: NotebookPage, new_content: str, base: bytes | None) -> bytes | None:
    doc = load_document(bytes(page.ydoc)) if page.ydoc is not None else new_document(page.content)
    update = merge_text_from(doc, base if page.ydoc is not None else None, new_content)
    if update is not None:
        page.ydoc = doc.get_update()
        page.content = document_text(doc)
    return update


def has_content(update: bytes) -> bool:
    """An empty Yjs v1 update is two zero bytes (no structs, empty delete set)."""
    return update not in (b"", b"\x00\x00")


# --- large updates between processes ---------------------------------------------------------

BUS_INLINE_LIMIT = 5000  # base64 bytes; PostgreSQL NOTIFY payloads stop near 8000


def bus_update(page_id: str, update: bytes, origin: str | None) -> NotebookPayload:
    """The bus payload for a CRDT update; call inside a unit (a large update is stored for loading)."""
    encoded = base64.b64encode(update).decode()
    if len(encoded) <= BUS_INLINE_LIMIT:
        return {"kind": "update", "origin": origin, "update": encoded}
    return {"kind": "update", "origin": origin, "relay": store_relay(page_id, update)}


def store_relay(page_id: str, update: bytes) -> int:
    return NotebookRelay.create(page_id=page_id, payload=update, created_at=to_db(db.now())).id


def load_relay(relay_id: int) -> bytes | None:
    row = NotebookRelay.get_or_none(NotebookRelay.id == relay_id)
    return bytes(row.payload) if row else None


def _prune_relays() -> None:
    NotebookRelay.delete().where(NotebookRelay.created_at < to_db(db.now() - RELAY_RETENTION)).execute()


# --- read bases: what each writer last read, for three-way PATCH merges ------------------------

def remember_read(page_id: str, identity: str, state: bytes) -> None:
    """`state` is what `identity` just read of the page: the base of their next PATCH of content.
    One row per (page, reader); rows not refreshed within READ_BASE_RETENTION are dropped."""
    now = db.now()
    (NotebookReadBase.insert(page_id=page_id, identity=identity, state=state, read_at=to_db(now))
     .on_conflict(conflict_target=[NotebookReadBase.page_id, NotebookReadBase.identity],
                  update={NotebookReadBase.state: state, NotebookReadBase.read_at: to_db(now)})
     .execute())
    NotebookReadBase.delete().where(NotebookReadBase.read_at < to_db(now - READ_BASE_RETENTION)).execute()


def read_base(page_id: str, identity: str) -> bytes | None:
    row = (NotebookReadBase.select(NotebookReadBase.state)
           .where((NotebookReadBase.page_id == page_id) & (NotebookReadBase.identity == identity)).first())
    return bytes(row.state) if row is not None else None


def require_title(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("title is required")
    return value[:TITLE_MAX]
