"""Silences (skill page `buzz`, "Silences"): while one runs, a matching ingest is stored (`silencedBy`) and
counted on its alert, and has no effects: no wake, no stream event, no push, no alert state change.

A silence covers one webhook (`webhookId`) or every webhook of an app name (`appName`) and matches on the
event's title (a case-insensitive substring, or `/a regular expression/`) and/or labels (every `k: v`
given must be among the event's labels: Alertmanager's common and group labels, or a top-level `labels`
object of a JSON body). It ends by itself at `endsAt` (nothing to run: ingest compares with its own
time), or early by DELETE. Who may create or end one: whoever may act on the alerts of every webhook it
covers (their agents, forUsers, owner; admins).
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from .. import db
from ..errors import Forbidden, Invalid, NotFound
from ..jsonstrict import JSONObject
from ..models import BuzzAlert, BuzzEvent, BuzzSilence, BuzzWebhook
from ..timeutil import from_db, iso, parse_iso, to_db
from . import alert_tallies
from .alerts import alert_json

MATCH_MAX = 255
LABELS_MAX = 20
COMMENT_MAX = 1_000
MINUTES_MAX = 30 * 24 * 60
RECENTLY = timedelta(hours=24)  # expired silences GET still lists, and the preview's look back
PREVIEW_SCAN = 10_000  # events of the last 24 h a preview reads at most
PREVIEW_ALERTS = 50
NOT_FOUND = "Silence not found"


# --- matching --------------------------------------------------------------------------------

def _pattern(title_match: str | None) -> re.Pattern[str] | None:
    if not title_match:
        return None
    if len(title_match) > 2 and title_match.startswith("/") and title_match.endswith("/"):
        return re.compile(title_match[1:-1], re.IGNORECASE)
    return re.compile(re.escape(title_match), re.IGNORECASE)


def event_labels(body_json: Any) -> dict[str, str]:
    """The labels an event carries: Alertmanager's groupLabels and commonLabels, or a JSON body's `labels`."""
    if not isinstance(body_json, dict):
        return {}
    labels: dict[str, str] = {}
    for key in ("groupLabels", "commonLabels", "labels"):
        found = body_json.get(key)
        if isinstance(found, dict):
            labels.update({str(k): str(v) for k, v in found.items() if isinstance(v, (str, int, float, bool))})
    return labels


def matches(silence: BuzzSilence, title: str, body_json: Any) -> bool:
    pattern = _pattern(silence.title_match)
    if pattern is not None and not pattern.search(title):
        return False
    wanted = silence.labels or {}
    if wanted:
        have = event_labels(body_json)
        return all(have.get(k) == v for k, v in wanted.items())
    return True


def silencing(webhook: BuzzWebhook, title: str, body_json: Any, now: datetime) -> int | None:
    """The id of a running silence that matches this ingest (the oldest), or None: one indexed query (fixed SQL:
    the ingest's hot path)."""
    running = db.sql_models(BuzzSilence, "WHERE ends_at > ? AND ended_at IS NULL AND (webhook_id = ? OR app_name = ?) "
                            "ORDER BY id", (to_db(now), webhook.id, webhook.app_name))
    for silence in running:
        if matches(silence, title, body_json):
            return int(silence.id)
    return None


# --- checks ----------------------------------------------------------------------------------

def _covered(app_name: str | None, webhook_id: int | None) -> list[BuzzWebhook]:
    if (app_name is None) == (webhook_id is None):
        raise Invalid("A silence covers appName or webhookId, one of them")
    where = BuzzWebhook.id == webhook_id if webhook_id is not None else BuzzWebhook.app_name == app_name
    hooks = list(BuzzWebhook.select().where(where))
    if not hooks:
        raise NotFound("Webhook not found")
    return hooks


def _may_silence(hook: BuzzWebhook, identity: str, is_admin: bool) -> bool:
    return is_admin or identity in (hook.owner, hook.wake_agent, hook.notify_agent) or (
        hook.for_users is not None and identity in hook.for_users.split(","))


def _require_rights(hooks: list[BuzzWebhook], identity: str, is_admin: bool) -> None:
    if not all(_may_silence(hook, identity, is_admin) for hook in hooks):
        raise Forbidden("Only those who may act on a webhook's alerts may silence it")


def _match(match: dict[str, Any] | None) -> tuple[str | None, dict[str, str] | None]:
    match = match or {}
    title, labels = match.get("title"), match.get("labels")
    if title is not None and (not isinstance(title, str) or not title.strip() or len(title) > MATCH_MAX):
        raise Invalid(f"match.title must be text of 1 to {MATCH_MAX} characters")
    if labels is not None and (not isinstance(labels, dict) or len(labels) > LABELS_MAX
                               or not all(isinstance(v, str) for v in labels.values())):
        raise Invalid(f"match.labels must be an object of at most {LABELS_MAX} text values")
    if not title and not labels:
        raise Invalid("A silence matches on match.title, match.labels or both")
    try:
        _pattern(title)
    except re.error as exc:
        raise Invalid(f"match.title is not a regular expression: {exc}") from None
    return title, (dict(labels) if labels else None)


def _end(minutes: int | None, ends_at: str | None, now: datetime) -> datetime:
    if (minutes is None) == (ends_at is None):
        raise Invalid("A silence ends with minutes or endsAt, one of them")
    if minutes is not None:
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MINUTES_MAX:
            raise Invalid(f"minutes must be 1 to {MINUTES_MAX}")
        return now + timedelta(minutes=minutes)
    try:
        end = parse_iso(ends_at) if isinstance(ends_at, str) else None
    except ValueError:
        end = None
    if end is None:
        raise Invalid("endsAt must be an ISO-8601 timestamp")
    if not now < end <= now + timedelta(minutes=MINUTES_MAX):
        raise Invalid(f"endsAt must be in the future, within {MINUTES_MAX} minutes")
    return end


# --- wire shape ------------------------------------------------------------------------------

def silence_json(silence: BuzzSilence, now: datetime) -> JSONObject:
    ends_at = from_db(silence.ends_at)
    active = silence.ended_at is None and ends_at is not None and ends_at > now
    match: JSONObject = {}
    if silence.title_match:
        match["title"] = silence.title_match
    if silence.labels:
        match["labels"] = silence.labels
    return {"id": silence.id, "appName": silence.app_name, "webhookId": silence.webhook_id, "match": match,
            "comment": silence.comment, "createdBy": silence.created_by, "createdAt": iso(silence.created_at),
            "endsAt": iso(silence.ends_at), "endedAt": iso(silence.ended_at), "endedBy": silence.ended_by,
            "active": active}


# --- the routes ------------------------------------------------------------------------------

def create(identity: str, is_admin: bool, fields: dict[str, Any]) -> JSONObject:
    """`fields`: app_name or webhook_id, match {title, labels}, minutes or ends_at, comment."""
    now = db.now()
    hooks = _covered(fields.get("app_name"), fields.get("webhook_id"))
    _require_rights(hooks, identity, is_admin)
    title, labels = _match(fields.get("match"))
    end = _end(fields.get("minutes"), fields.get("ends_at"), now)
    comment = fields.get("comment") or ""
    if len(comment) > COMMENT_MAX:
        raise Invalid(f"comment is longer than {COMMENT_MAX} characters")
    silence = BuzzSilence.create(app_name=fields.get("app_name"), webhook_id=fields.get("webhook_id"),
                                 title_match=title, labels=labels, comment=comment, created_by=identity,
                                 created_at=to_db(now), ends_at=to_db(end))
    return silence_json(silence, now)


def list_silences(identity: str, is_admin: bool) -> list[JSONObject]:
    """Running silences and those that ended in the last 24 h, that the caller made or may end; newest first."""
    now = db.now()
    rows = BuzzSilence.select().where(BuzzSilence.ends_at > to_db(now - RECENTLY)).order_by(BuzzSilence.id.desc())
    listed = []
    for silence in rows:
        ended = from_db(silence.ended_at)
        if ended is not None and ended <= now - RECENTLY:
            continue
        if is_admin or silence.created_by == identity or _may_end(silence, identity, is_admin):
            listed.append(silence_json(silence, now))
    return listed


def _may_end(silence: BuzzSilence, identity: str, is_admin: bool) -> bool:
    where = (BuzzWebhook.id == silence.webhook_id) if silence.webhook_id is not None \
        else (BuzzWebhook.app_name == silence.app_name)
    hooks = list(BuzzWebhook.select().where(where))
    return bool(hooks) and all(_may_silence(hook, identity, is_admin) for hook in hooks)


def end(identity: str, is_admin: bool, silence_id: int) -> JSONObject:
    """End a running silence now (its creator, or whoever may silence what it covers)."""
    now = db.now()
    silence: BuzzSilence | None = BuzzSilence.get_or_none(BuzzSilence.id == silence_id)
    if silence is None:
        raise NotFound(NOT_FOUND)
    if not (is_admin or silence.created_by == identity or _may_end(silence, identity, is_admin)):
        raise NotFound(NOT_FOUND)
    BuzzSilence.update(ended_at=to_db(now), ended_by=identity).where(
        (BuzzSilence.id == silence_id) & BuzzSilence.ended_at.is_null()
        & (BuzzSilence.ends_at > to_db(now))).execute()
    return silence_json(BuzzSilence.get_by_id(silence_id), now)


def preview(identity: str, is_admin: bool, fields: dict[str, Any]) -> JSONObject:
    """How many events of the last 24 h the silence would have matched, and which alerts (most hit first)."""
    now = db.now()
    hooks = _covered(fields.get("app_name"), fields.get("webhook_id"))
    _require_rights(hooks, identity, is_admin)
    title, labels = _match(fields.get("match"))
    probe = BuzzSilence(title_match=title, labels=labels)
    events = (BuzzEvent.select(BuzzEvent.title, BuzzEvent.body_json, BuzzEvent.alert_id)
              .where(BuzzEvent.webhook_id.in_([h.id for h in hooks])
                     & (BuzzEvent.received_at > to_db(now - RECENTLY)))
              .order_by(BuzzEvent.id.desc()).limit(PREVIEW_SCAN))
    hits: dict[int | None, int] = {}
    matched = 0
    for event in events:
        if matches(probe, event.title, event.body_json):
            matched += 1
            hits[event.alert_id] = hits.get(event.alert_id, 0) + 1
    ids = [i for i in hits if i is not None]
    found = {a.id: a for a in alert_tallies.rows(alert_tallies.select().where(BuzzAlert.id.in_(ids)))} if ids else {}
    ranked = sorted(found, key=lambda i: (-hits[i], -i))[:PREVIEW_ALERTS]
    return {"events": matched, "alerts": [{**alert_json(found[i]), "matched": hits[i]} for i in ranked]}
