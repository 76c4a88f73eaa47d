"""Profiles and user admin (API.md §18 "Users, profiles and user admin").

Plain functions run inside Store units. Archiving revokes every database token of the identity in the
same unit (identities.revoke_identity_tokens), whose control event closes its streams and sockets on
every process; an archived identity is no longer known (no new mail, chat or tasks).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

import peewee as pw

from .. import db
from ..jsonstrict import JSONObject
from ..errors import Conflict, Invalid, NotFound
from ..models import Message, Task, Token, User, WebhookConfig
from ..timeutil import iso, parse_iso, to_db
from . import guards, identities
from .fields import flag, optional_http_url
from .lookalike import require_own_name

DISPLAY_NAME_MAX = 100
AVATAR_URL_MAX = 500


def display_name(value: object) -> str:
    name = value.strip() if isinstance(value, str) else ""
    if not 1 <= len(name) <= DISPLAY_NAME_MAX:
        raise Invalid(f"displayName must be 1–{DISPLAY_NAME_MAX} characters")
    return name


def setup_profile(identity: str, value: object, env_identities: frozenset[str] = frozenset()) -> JSONObject:
    name = display_name(value)
    require_own_name(identity, name, env_identities)
    user = identities.ensure_user(identity, name)
    User.update(display_name=name, updated_at=to_db(db.now())).where(User.id == user.id).execute()
    return {"identity": identity, "displayName": name}


def admin_user_json(user: User) -> JSONObject:
    """A user as admins see it: with its own loop-guard thresholds (null: the deployment's)."""
    return {**identities.user_json(user), "loopMessages": user.loop_messages, "loopMinutes": user.loop_minutes}


def admin_list() -> list[JSONObject]:
    return [admin_user_json(u) for u in User.select().order_by(User.id)]


def _archived_at(value: object) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_iso(value)
    except (ValueError, TypeError):
        raise Invalid("archivedAt must be an ISO-8601 timestamp or null") from None


def _columns(body: JSONObject) -> dict[str, Any]:
    columns: dict[str, Any] = {}
    if "displayName" in body:
        columns["display_name"] = display_name(body["displayName"])
    if "isAdmin" in body:
        columns["is_admin"] = flag(body["isAdmin"], "isAdmin")
    if "isAgent" in body:
        columns["is_agent"] = flag(body["isAgent"], "isAgent")
    if "avatarUrl" in body:
        columns["avatar_url"] = optional_http_url(body["avatarUrl"], "avatarUrl", AVATAR_URL_MAX, ", or null")
    if "archivedAt" in body:
        columns["archived_at"] = to_db(_archived_at(body["archivedAt"]))
    if "loopMessages" in body:
        columns["loop_messages"] = guards.threshold(body["loopMessages"], "loopMessages", guards.LOOP_MESSAGES_MAX)
    if "loopMinutes" in body:
        columns["loop_minutes"] = guards.threshold(body["loopMinutes"], "loopMinutes", guards.LOOP_MINUTES_MAX)
    return columns


def admin_update(user_id: str, body: JSONObject, env_identities: frozenset[str] = frozenset()) -> JSONObject:
    columns = _columns(body)  # validate before looking anything up: a refused request writes nothing
    user = db.locked(User.select().where(User.id == user_id)).first()
    if user is None:
        raise NotFound("User not found")
    if "display_name" in columns:
        require_own_name(user_id, columns["display_name"], env_identities)
    if _removes_admin(user, columns) and not _other_active_admins(user_id, env_identities):
        verb = "archived" if columns.get("archived_at") is not None else "demoted"
        raise Conflict(f"{user_id} is the only active admin and cannot be {verb}: make another admin first")
    if columns:
        User.update(updated_at=to_db(db.now()), **columns).where(User.id == user_id).execute()
    if "is_admin" in columns:  # the flag is the identity's: its live tokens follow it
        Token.update(is_admin=columns["is_admin"]).where(
            (Token.identity == user_id) & Token.revoked_at.is_null()).execute()
        identities.tokens_changed([], user_id)
    if columns.get("archived_at") is not None and user.archived_at is None:
        identities.revoke_identity_tokens(user_id, "archived")
    elif "archived_at" in columns and user.archived_at is not None:  # unarchived: an environment token
        identities.tokens_changed([], user_id)  # serves again at once, not after the cache's refusal
    return {"user": admin_user_json(User.get_by_id(user_id))}


def _removes_admin(user: User, columns: dict[str, Any]) -> bool:
    """Whether the change takes an active admin away: archives it or clears its admin flag."""
    if not user.is_admin or user.archived_at is not None:
        return False
    return columns.get("archived_at") is not None or columns.get("is_admin") is False


def _other_active_admins(user_id: str, env_identities: frozenset[str]) -> list[str]:
    """Unarchived admins other than `user_id` that can act (a live token, or an environment identity). Their
    rows are locked, so two admins demoting each other at once cannot leave none."""
    others = db.locked(User.select(User.id).where((User.is_admin == True) & User.archived_at.is_null()  # noqa: E712
                                                  & (User.id != user_id)))
    can_act = identities.actors(env_identities)
    return [u.id for u in others if u.id in can_act]


def _inbox_counts() -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for recipient, status, count in db.tuples(Message.select(Message.recipient, Message.status,
                                                             pw.fn.COUNT(Message.id))
                                              .group_by(Message.recipient, Message.status)):
        counts.setdefault(recipient, {})[status] = count
    pending: dict[str, int] = dict(db.tuples(Message.select(Message.recipient, pw.fn.COUNT(Message.id))
                                             .where(Message.response_waiting == True)  # noqa: E712
                                             .group_by(Message.recipient)))
    return {identity: {"unread": c.get("unread", 0), "pending": pending.get(identity, 0), "read": c.get("read", 0),
                       "total": sum(c.values())} for identity, c in counts.items()}


def _task_counts() -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for assignee, status, count in db.tuples(Task.select(Task.assignee_user_id, Task.status, pw.fn.COUNT(Task.id))
                                             .where(Task.assignee_user_id.is_null(False))
                                             .group_by(Task.assignee_user_id, Task.status)):
        counts.setdefault(assignee, {})[status] = count
    return counts


def user_stats(env_identities: frozenset[str], seen: Mapping[str, tuple[datetime, str]],
               online: Mapping[str, bool], streaming: frozenset[str], webhook_overrides: frozenset[str]) -> JSONObject:
    """Per identity (users rows and environment identities): inbox, tasks by status, presence and how
    it is reached: `sse` (an open stream), `webhook` (a URL registered), `api` (seen over REST) or `none`."""
    everyone = {u.id for u in User.select(User.id)} | set(env_identities)
    inbox, tasks = _inbox_counts(), _task_counts()
    hooks = {w.identity for w in WebhookConfig.select(WebhookConfig.identity).where(WebhookConfig.url.is_null(False))}
    hooks |= set(webhook_overrides)
    result = {}
    for identity in sorted(everyone):
        last = seen.get(identity)
        connection = ("sse" if identity in streaming else "webhook" if identity in hooks
                      else "api" if last is not None else "none")
        result[identity] = {
            "inbox": inbox.get(identity, {"unread": 0, "pending": 0, "read": 0, "total": 0}),
            "swarm": tasks.get(identity, {}),
            "presence": {"online": bool(online.get(identity)), "lastSeen": iso(last[0]) if last else None,
                         "source": last[1] if last else None},
            "connection": connection}
    return {"users": result}


def ensure_admin_rows(admins: Mapping[str, tuple[str, str | None]]) -> None:
    """At start: environment admins (and the superuser) get a users row with isAdmin true, so the SQL
    visibility rule and event audiences know them; a given display name is applied. Safe when several
    processes start at once (insert-or-ignore, then update)."""
    now = to_db(db.now())
    for identity, (initial, forced) in admins.items():
        (User.insert(id=identity, display_name=initial[:100], is_admin=True, is_agent=False,
                     created_at=now, updated_at=now).on_conflict_ignore().execute())
        changes: dict[str, Any] = {"is_admin": True}
        if forced:
            changes["display_name"] = forced
        User.update(**changes).where(User.id == identity).execute()
