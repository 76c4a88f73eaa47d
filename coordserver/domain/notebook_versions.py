"""Notebook page versions: stored snapshots of a page's text, made by time, when the last editor
leaves, on demand (a checkpoint) and by a restore.

- Every content change names its editor in NotebookPendingEditor (the room's save, a REST PATCH); the
  next version lists those identities and clears them. A page with pending editors has changed since
  its newest version, so the timed pass (realtime/notebook/history.py) only looks at those pages.
- Each version is made in a unit that holds the page row (FOR UPDATE on PostgreSQL) and checks again
  whether one is due, so several server processes running the pass never make the same version twice.
- A `notebook_version` event goes to the page's audience in the unit that stores the version.
- Versions older than the retention window are pruned in short units; a page's newest version stays.
"""
from __future__ import annotations

from datetime import timedelta

import peewee as pw

from .. import db
from ..errors import Forbidden, NotFound
from ..events import log
from ..jsonstrict import JSONObject
from ..models import NotebookPage, NotebookPendingEditor, NotebookVersion
from ..principal import Principal
from ..timeutil import from_db, iso, to_db
from . import visibility
from .visibility import can_see, is_owner

EVENT_TYPE = "notebook_version"
LABEL_MAX = 200
PRUNE_CHUNK = 500  # versions per pruning unit: a short transaction

CREATED, TIME, IDLE, CHECKPOINT = "created", "time", "idle", "checkpoint"
BEFORE_RESTORE, RESTORE = "before_restore", "restore"


# --- wire shapes -----------------------------------------------------------------------------

def version_json(version: NotebookVersion, with_content: bool = False) -> JSONObject:
    row: JSONObject = {"id": version.id, "pageId": version.page_id, "createdAt": iso(version.created_at),
                       "editors": list(version.editors or []), "size": len(version.content),
                       "label": version.label, "reason": version.reason, "createdBy": version.created_by}
    if with_content:
        row["content"] = version.content
    return row


# --- who may do what -------------------------------------------------------------------------

def _page(page_id: str, principal: Principal, for_update: bool = False) -> NotebookPage:
    query = NotebookPage.select().where(NotebookPage.id == page_id)
    page: NotebookPage | None = (db.locked(query) if for_update else query).first()
    if page is None:
        raise NotFound("Not found")
    if not can_see(page.created_by, page.tagged_users, principal.identity, principal.is_admin):
        raise Forbidden("Forbidden")
    return page


def _require_editable(page: NotebookPage, principal: Principal) -> None:
    """The page's own rules for a change: nobody changes an archived page, only the owner a locked one."""
    if page.archived_at is not None:
        raise Forbidden("Page is archived")
    if page.locked and not is_owner(page.created_by, principal.identity, principal.is_admin):
        raise Forbidden("Page is locked")


def check_editable(page_id: str, principal: Principal) -> None:
    _require_editable(_page(page_id, principal), principal)


# --- reading ---------------------------------------------------------------------------------

def list_versions(page_id: str, principal: Principal, limit: int, offset: int) -> list[JSONObject]:
    _page(page_id, principal)
    query = (NotebookVersion.select().where(NotebookVersion.page_id == page_id)
             .order_by(NotebookVersion.id.desc()).limit(limit).offset(offset))
    return [version_json(v) for v in query]


def _version(page_id: str, version_id: int) -> NotebookVersion:
    version: NotebookVersion | None = NotebookVersion.get_or_none(
        (NotebookVersion.id == version_id) & (NotebookVersion.page_id == page_id))
    if version is None:
        raise NotFound("Version not found")
    return version


def get_version(page_id: str, version_id: int, principal: Principal) -> JSONObject:
    _page(page_id, principal)
    return version_json(_version(page_id, version_id), with_content=True)


def restore_source(page_id: str, version_id: int, principal: Principal) -> str:
    """The text of the version to restore, once the principal may change the page."""
    _require_editable(_page(page_id, principal), principal)
    return str(_version(page_id, version_id).content)


def latest(page_id: str) -> NotebookVersion | None:
    version: NotebookVersion | None = (NotebookVersion.select().where(NotebookVersion.page_id == page_id)
                                       .order_by(NotebookVersion.id.desc()).first())
    return version


# --- editors since the newest version --------------------------------------------------------

def note_editors(page_id: str, identities: list[str]) -> None:
    """Called in the unit that stores a content change."""
    now = to_db(db.now())
    for identity in dict.fromkeys(identities):
        (NotebookPendingEditor.insert(page_id=page_id, identity=identity, edited_at=now)
         .on_conflict_ignore().execute())


def _take_editors(page_id: str) -> list[str]:
    where = NotebookPendingEditor.page_id == page_id
    names = [row.identity for row in NotebookPendingEditor.select(NotebookPendingEditor.identity)
             .where(where).order_by(NotebookPendingEditor.edited_at, NotebookPendingEditor.identity)]
    NotebookPendingEditor.delete().where(where).execute()
    return names


def _has_pending(page_id: str) -> bool:
    return bool(NotebookPendingEditor.select().where(NotebookPendingEditor.page_id == page_id).exists())


# --- making versions -------------------------------------------------------------------------

def _make(page: NotebookPage, reason: str, env_admins: frozenset[str], actor: str | None = None,
          label: str | None = None, content: str | None = None) -> NotebookVersion:
    version: NotebookVersion = NotebookVersion.create(
        page_id=page.id, content=page.content if content is None else content, editors=_take_editors(page.id),
        reason=reason, label=label, created_by=actor, created_at=to_db(db.now()))
    log.append(EVENT_TYPE, {"type": EVENT_TYPE, "pageId": page.id, "versionId": version.id, "reason": reason,
                            "label": label, "createdAt": iso(version.created_at)},
               to=visibility.audience(page.created_by, page.tagged_users, env_admins))
    return version


def first_version(page: NotebookPage, env_admins: frozenset[str]) -> None:
    """The page as created: the base every later version (and a restore) can go back to."""
    _make(page, CREATED, env_admins, actor=page.created_by)


def _changed_since(page: NotebookPage, newest: NotebookVersion | None) -> bool:
    return newest is None or newest.content != page.content


def version_if_due(page_id: str, interval: timedelta, env_admins: frozenset[str]) -> bool:
    """A timed version: the page changed since its newest version, which is at least `interval` old."""
    page: NotebookPage | None = db.locked(NotebookPage.select().where(NotebookPage.id == page_id)).first()
    if page is None or not _has_pending(page_id):
        return False
    newest = latest(page_id)
    since = from_db(newest.created_at if newest is not None else page.created_at)
    if db.now() - since < interval:
        return False
    if not _changed_since(page, newest):
        _take_editors(page_id)  # edited back to the newest version's text: nothing to keep
        return False
    _make(page, TIME, env_admins)
    return True


def pages_with_pending_edits() -> list[str]:
    """The pages changed since their newest version: the only ones a timed version can be due for."""
    query = NotebookPendingEditor.select(NotebookPendingEditor.page_id).distinct()
    return [row.page_id for row in query]


def version_when_idle(page_id: str, env_admins: frozenset[str]) -> bool:
    """The last live editor left: keep what they did, if the page changed since its newest version."""
    page: NotebookPage | None = db.locked(NotebookPage.select().where(NotebookPage.id == page_id)).first()
    if page is None or not _has_pending(page_id):
        return False
    if not _changed_since(page, latest(page_id)):
        _take_editors(page_id)
        return False
    _make(page, IDLE, env_admins)
    return True


def checkpoint(page_id: str, principal: Principal, label: str | None, env_admins: frozenset[str],
               content: str | None = None) -> JSONObject:
    """A version on demand, of `content` (the live text) or else the stored text."""
    page = _page(page_id, principal, for_update=True)
    _require_editable(page, principal)
    return version_json(_make(page, CHECKPOINT, env_admins, actor=principal.identity, label=label,
                              content=content))


def keep_before_restore(page_id: str, content: str, env_admins: frozenset[str]) -> None:
    """Before a restore replaces the text: keep the current text as a version if no version holds it."""
    page: NotebookPage | None = db.locked(NotebookPage.select().where(NotebookPage.id == page_id)).first()
    if page is None:
        return
    newest = latest(page_id)
    if newest is None or newest.content != content:
        _make(page, BEFORE_RESTORE, env_admins, content=content)


def record_restore(page_id: str, principal: Principal, restored: int, content: str,
                   env_admins: frozenset[str]) -> JSONObject:
    page = _page(page_id, principal, for_update=True)
    note_editors(page_id, [principal.identity])
    return version_json(_make(page, RESTORE, env_admins, actor=principal.identity,
                              label=f"Restored version {restored}", content=content))


# --- retention -------------------------------------------------------------------------------

def prune(retention: timedelta, chunk: int = PRUNE_CHUNK) -> int:
    """Drop at most `chunk` versions older than the retention window, never a page's newest one.
    Returns how many went; run it until that is 0 (Store.write_until_done)."""
    cutoff = to_db(db.now() - retention)
    newest = NotebookVersion.select(pw.fn.MAX(NotebookVersion.id)).group_by(NotebookVersion.page_id)
    old = (NotebookVersion.select(NotebookVersion.id)
           .where((NotebookVersion.created_at < cutoff) & NotebookVersion.id.not_in(newest))
           .order_by(NotebookVersion.id).limit(chunk))
    ids = [row.id for row in old]
    if not ids:
        return 0
    removed: int = NotebookVersion.delete().where(NotebookVersion.id.in_(ids)).execute()
    return removed
