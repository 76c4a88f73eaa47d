"""Buzz: webhook configs that turn outside alerts (CI, Alertmanager, GitHub, scripts) into wake items.

Plain functions run inside Store units of work. An ingest does all of its effects in one unit:
lastHitAt, the BuzzEvent row, the `broadcast` log event and the wake pulses of its agents.
"""
from __future__ import annotations

import codecs
import hashlib
import hmac
import json
import logging
import re
import secrets
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

import peewee as pw

from .. import db, jsonstrict
from ..jsonstrict import JSONObject
from ..errors import Forbidden, Invalid, NotFound, RateLimited
from ..events import log
from ..events.channels import WEBHOOKS, WebhooksPayload
from ..models import BuzzAlert, BuzzEvent, BuzzSilence, BuzzWebhook, NotebookPage
from ..sql import in_list, json_rows, json_rows_param, serial_sequences
from . import alert_tallies, alerts, silences
from ..timeutil import from_db, iso, to_db
from .fields import flag, optional_http_url
from .identities import is_known, valid_identity
from . import wake_signal

logger = logging.getLogger("coord")

APP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DEDUP_WINDOW = timedelta(seconds=300)
INGEST_WINDOW = timedelta(seconds=60)
APP_NAME_MAX = 50
TITLE_MAX = 255
APP_NAME_RULE = "appName may contain only letters, digits, '.', '_' and '-' (it is part of the ingest URL)"
FOR_USERS_MAX = 255
RUNBOOK_URL_MAX = 2000
ESCALATE_MINUTES_MAX = 7 * 24 * 60
FLAP_RESOLUTIONS_MAX = 1000
FLAP_WINDOW_MINUTES_MAX = 7 * 24 * 60


# --- wire shapes -----------------------------------------------------------------------------

def ingest_url(base_url: str, webhook: BuzzWebhook) -> str:
    return f"{base_url}/api/ingest/{webhook.app_name}/{webhook.token}"


def webhook_json(webhook: BuzzWebhook, base_url: str) -> JSONObject:
    return {"id": webhook.id, "appName": webhook.app_name, "token": webhook.token, "title": webhook.title,
            "owner": webhook.owner, "forUsers": webhook.for_users, "wakeAgent": webhook.wake_agent,
            "notifyAgent": webhook.notify_agent, "enabled": webhook.enabled, "createdAt": iso(webhook.created_at),
            "lastHitAt": iso(webhook.last_hit_at), "ingestUrl": ingest_url(base_url, webhook),
            "runbookPageId": webhook.runbook_page_id, "runbookUrl": webhook.runbook_url,
            "escalateAfterMinutes": webhook.escalate_after_minutes,
            "escalateTo": webhook.escalate_to.split(",") if webhook.escalate_to else None,
            "flapResolutions": webhook.flap_resolutions, "flapWindowMinutes": webhook.flap_window_minutes}


def event_json(event: BuzzEvent) -> JSONObject:
    return {"id": event.id, "webhookId": event.webhook_id, "appName": event.app_name, "title": event.title,
            "forUsers": event.for_users, "receivedAt": iso(event.received_at), "contentType": event.content_type,
            "bodyText": event.body_text, "bodyJson": event.body_json,
            "wakeDeliveredAt": iso(event.wake_delivered_at), "notifyDeliveredAt": iso(event.notify_delivered_at),
            "suppressed": event.suppressed, "alertId": event.alert_id, "silencedBy": event.silenced_by}


# --- field validation ------------------------------------------------------------------------

def clean_app_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("appName and title are required")
    value = value.strip()
    if len(value) > APP_NAME_MAX:
        raise Invalid(f"appName is longer than {APP_NAME_MAX} characters")
    if not APP_NAME_RE.match(value):
        raise Invalid(APP_NAME_RULE)
    return value


def clean_title(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("appName and title are required")
    value = value.strip()
    if len(value) > TITLE_MAX:
        raise Invalid(f"title is longer than {TITLE_MAX} characters")
    return value


def clean_for_users(value: Any, key: str = "forUsers") -> str | None:
    """A comma-separated string or an array of identities; stored normalised ("alice,bob") or null."""
    if value is None:
        return None
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = value
    else:
        raise Invalid(f"{key} must be a comma-separated string or an array of identities")
    names: list[str] = []
    for part in parts:
        if not part.strip():
            continue
        try:
            name = valid_identity(part)
        except Invalid:
            raise Invalid(f"{key} contains an invalid identity: {part.strip()[:60]}") from None
        if name not in names:
            names.append(name)
    if not names:
        return None
    joined = ",".join(names)
    if len(joined) > FOR_USERS_MAX:
        raise Invalid(f"{key} is longer than {FOR_USERS_MAX} characters")
    return joined


def clean_runbook_page(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or NotebookPage.get_or_none(NotebookPage.id == value.strip()) is None:
        raise Invalid("runbookPageId is not a notebook page")
    return value.strip()


def optional_count(value: Any, key: str, maximum: int) -> int | None:
    """An integer from 1 to `maximum`, or null (the field's default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise Invalid(f"{key} must be 1 to {maximum}, or null")
    return value


def clean_agent(value: Any, key: str) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise Invalid(f"{key} must be an identity")
    try:
        return valid_identity(value)
    except Invalid:
        raise Invalid(f"{key} is not a valid identity") from None


def _require_known(agent: str | None, key: str, env_identities: frozenset[str]) -> None:
    if agent is not None and not is_known(agent, env_identities):
        raise Invalid(f"{key} is not a known identity: {agent}")


# --- webhook configs -------------------------------------------------------------------------

# Each takes a request body's field (any JSON value) and returns it checked and normalised.
_CLEANERS: dict[str, Callable[[Any], Any]] = {
    "appName": clean_app_name, "title": clean_title, "forUsers": clean_for_users,
    "wakeAgent": lambda value: clean_agent(value, "wakeAgent"),
    "notifyAgent": lambda value: clean_agent(value, "notifyAgent"),
    "enabled": lambda value: flag(value, "enabled"), "runbookPageId": clean_runbook_page,
    "runbookUrl": lambda value: optional_http_url(value, "runbookUrl", RUNBOOK_URL_MAX, ", or null"),
    "escalateAfterMinutes": lambda value: optional_count(value, "escalateAfterMinutes", ESCALATE_MINUTES_MAX),
    "escalateTo": lambda value: clean_for_users(value, "escalateTo"),
    "flapResolutions": lambda value: optional_count(value, "flapResolutions", FLAP_RESOLUTIONS_MAX),
    "flapWindowMinutes": lambda value: optional_count(value, "flapWindowMinutes", FLAP_WINDOW_MINUTES_MAX)}


def _cleaned(body: JSONObject, env_identities: frozenset[str]) -> JSONObject:
    """The config fields present in `body` (wire names), checked and normalised; agents must be known."""
    fields: JSONObject = {key: clean(body[key]) for key, clean in _CLEANERS.items() if key in body}
    for key in ("wakeAgent", "notifyAgent"):
        _require_known(fields.get(key), key, env_identities)
    for identity in (fields.get("escalateTo") or "").split(","):
        _require_known(identity or None, "escalateTo", env_identities)
    return fields


def create_webhook(owner: str, body: JSONObject, base_url: str, env_identities: frozenset[str]) -> JSONObject:
    """`appName` and `title` required; routing, runbook, escalation and flap fields optional. Starts enabled."""
    if not body.get("appName") or not body.get("title"):
        raise Invalid("appName and title are required")
    fields = _cleaned({key: value for key, value in body.items() if key != "enabled"}, env_identities)
    webhook = BuzzWebhook.create(
        app_name=fields["appName"], token=secrets.token_hex(7), title=fields["title"], owner=owner,
        for_users=fields.get("forUsers"), wake_agent=fields.get("wakeAgent"), notify_agent=fields.get("notifyAgent"),
        enabled=True, created_at=to_db(db.now()), runbook_page_id=fields.get("runbookPageId"),
        runbook_url=fields.get("runbookUrl"), escalate_after_minutes=fields.get("escalateAfterMinutes"),
        escalate_to=fields.get("escalateTo"), flap_resolutions=fields.get("flapResolutions"),
        flap_window_minutes=fields.get("flapWindowMinutes"))
    webhooks_changed(webhook.id)
    return webhook_json(webhook, base_url)


def list_webhooks(identity: str, is_admin: bool, base_url: str) -> list[JSONObject]:
    query = alert_tallies.webhooks(BuzzWebhook.select())
    if not is_admin:
        query = query.where(BuzzWebhook.owner == identity)
    return [webhook_json(alert_tallies.hit(w), base_url)
            for w in query.order_by(BuzzWebhook.created_at.desc(), BuzzWebhook.id.desc())]


def _owned_webhook(webhook_id: int, identity: str, is_admin: bool) -> BuzzWebhook:
    webhook: BuzzWebhook | None = db.locked(BuzzWebhook.select().where(BuzzWebhook.id == webhook_id)).first()
    if webhook is None:
        raise NotFound("Webhook not found")
    if not is_admin and webhook.owner != identity:
        raise Forbidden("Only the webhook's owner or an admin may change it")
    return webhook


_COLUMNS = {"title": "title", "appName": "app_name", "enabled": "enabled", "forUsers": "for_users",
            "wakeAgent": "wake_agent", "notifyAgent": "notify_agent", "runbookPageId": "runbook_page_id",
            "runbookUrl": "runbook_url", "escalateAfterMinutes": "escalate_after_minutes", "escalateTo": "escalate_to",
            "flapResolutions": "flap_resolutions", "flapWindowMinutes": "flap_window_minutes"}
_CARRIED = ("runbook_page_id", "runbook_url", "escalate_to")  # what its alerts carry, changed with it


def update_webhook(webhook_id: int, identity: str, is_admin: bool, body: JSONObject, base_url: str,
                   env_identities: frozenset[str]) -> JSONObject:
    """Any of title, appName, enabled, forUsers, wakeAgent, notifyAgent, runbookPageId, runbookUrl,
    escalateAfterMinutes, escalateTo, flapResolutions, flapWindowMinutes (null clears all but the first three;
    a null flap field is the deployment's default)."""
    changes = _cleaned(body, env_identities)
    if not changes:
        raise Invalid("No fields to update")
    webhook = _owned_webhook(webhook_id, identity, is_admin)
    for key, value in changes.items():
        setattr(webhook, _COLUMNS[key], value)
    webhook.save()
    webhooks_changed(webhook.id)
    carried = {column: getattr(webhook, column) for column in _CARRIED if column in map(_COLUMNS.get, changes)}
    if carried:
        BuzzAlert.update(carried).where(BuzzAlert.webhook_id == webhook.id).execute()
    return webhook_json(alert_tallies.webhook(webhook.id), base_url)


def delete_webhook(webhook_id: int, identity: str, is_admin: bool) -> None:
    webhook = _owned_webhook(webhook_id, identity, is_admin)
    webhook.delete_instance()
    webhooks_changed(webhook.id)


def list_events(identity: str, app_name: str | None, limit: int) -> list[JSONObject]:
    """Newest first; only events addressed to everyone or naming the caller (filtered before the limit)."""
    query = BuzzEvent.select().where(BuzzEvent.for_users.is_null() | alerts.names(BuzzEvent.for_users, identity))
    if app_name:
        query = query.where(BuzzEvent.app_name == app_name)
    return [event_json(e) for e in query.order_by(BuzzEvent.id.desc()).limit(limit)]


# --- ingest ----------------------------------------------------------------------------------

def _first_line(text: str, limit: int = 120) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line[:limit]


def summarise_alertmanager(payload: JSONObject) -> tuple[str, str]:
    alerts = [a for a in payload.get("alerts") or [] if isinstance(a, dict)]
    status = str(payload.get("status") or "firing")
    labels = payload.get("commonLabels")
    labels = labels if isinstance(labels, dict) else {}
    annotations = payload.get("commonAnnotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    first = alerts[0] if alerts else {}
    name = labels.get("alertname") or (first.get("labels") or {}).get("alertname") or "alert"
    title = f"[{status.upper()}:{len(alerts)}] {name}"
    if labels.get("severity"):
        title += f" ({labels['severity']})"
    lines = []
    common = annotations.get("summary") or annotations.get("description")
    if common:
        lines.append(str(common))
    for alert in alerts[:10]:
        alert_labels = alert.get("labels")
        alert_labels = alert_labels if isinstance(alert_labels, dict) else {}
        alert_notes = alert.get("annotations")
        alert_notes = alert_notes if isinstance(alert_notes, dict) else {}
        where = alert_labels.get("instance") or alert_labels.get("job") or ""
        text = alert_notes.get("summary") or alert_notes.get("description") or alert_labels.get("alertname") or ""
        lines.append(f"- {alert.get('status', status)} {where}: {text}".replace("  ", " ").strip())
    if len(alerts) > 10:
        lines.append(f"... and {len(alerts) - 10} more")
    return title, "\n".join(lines)


def _repo(payload: JSONObject) -> str:
    repository = payload.get("repository")
    return repository.get("full_name", "repository") if isinstance(repository, dict) else "repository"


def _login(obj: Any) -> str:
    return obj.get("login", "someone") if isinstance(obj, dict) else "someone"


def summarise_github(event: str, payload: JSONObject) -> tuple[str, str]:
    repo = _repo(payload)
    action = payload.get("action")
    if event == "push":
        commits = [c for c in payload.get("commits") or [] if isinstance(c, dict)]
        branch = str(payload.get("ref", "")).rsplit("/", 1)[-1] or "?"
        pusher = (payload.get("pusher") or {}).get("name") if isinstance(payload.get("pusher"), dict) else None
        title = f"{repo}: {pusher or _login(payload.get('sender'))} pushed {len(commits)} commit" \
                f"{'' if len(commits) == 1 else 's'} to {branch}"
        body = "\n".join(f"- {_first_line(c.get('message', ''))}" for c in commits[:10])
        return title, body or str(payload.get("compare") or "")
    if event == "pull_request" and isinstance(payload.get("pull_request"), dict):
        pr = payload["pull_request"]
        verb = "merged" if action == "closed" and pr.get("merged") else action
        return (f"{repo}: PR #{pr.get('number')} {verb}: {pr.get('title', '')}",
                f"by {_login(pr.get('user'))} {pr.get('html_url', '')}".strip())
    if event == "issues" and isinstance(payload.get("issue"), dict):
        issue = payload["issue"]
        return (f"{repo}: issue #{issue.get('number')} {action}: {issue.get('title', '')}",
                f"by {_login(issue.get('user'))} {issue.get('html_url', '')}".strip())
    if event == "issue_comment" and isinstance(payload.get("issue"), dict):
        issue, comment = payload["issue"], payload.get("comment") or {}
        return (f"{repo}: {_login(comment.get('user'))} commented on #{issue.get('number')}: {issue.get('title', '')}",
                _first_line(comment.get("body", ""), 300))
    if event == "workflow_run" and isinstance(payload.get("workflow_run"), dict):
        run = payload["workflow_run"]
        outcome = run.get("conclusion") or run.get("status") or action
        return (f"{repo}: workflow {run.get('name', '?')} {outcome} on {run.get('head_branch', '?')}",
                f"{_first_line((run.get('head_commit') or {}).get('message', ''))} {run.get('html_url', '')}".strip())
    if event == "check_run" and isinstance(payload.get("check_run"), dict):
        check = payload["check_run"]
        outcome = check.get("conclusion") or check.get("status") or action
        return (f"{repo}: check {check.get('name', '?')} {outcome}",
                str(check.get("html_url") or check.get("details_url") or ""))
    if event == "release" and isinstance(payload.get("release"), dict):
        release = payload["release"]
        return (f"{repo}: release {release.get('tag_name', '?')} {action}", str(release.get("html_url") or ""))
    if event == "ping":
        return f"{repo}: GitHub webhook ping", str(payload.get("zen") or "")
    return f"{repo}: GitHub {event}{' ' + action if isinstance(action, str) else ''}", ""


def is_alertmanager(payload: JSONObject) -> bool:
    return isinstance(payload.get("alerts"), list) and "status" in payload and (
        "groupKey" in payload or "receiver" in payload or "commonLabels" in payload)


def _short_key(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 255 else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


_CHARSET = re.compile(r"charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.IGNORECASE)


def body_text(raw: bytes, content_type: str) -> str:
    """The body as storable text: decoded by its declared charset (UTF-8 when none, or one Python
    cannot decode text with), undecodable bytes as U+FFFD, and NUL, which PostgreSQL cannot store in
    text, as U+FFFD too. An ingest stores what it is sent; it never refuses a body for its content."""
    match = _CHARSET.search(content_type)
    text = None
    if match:
        try:
            text = raw.decode(codecs.lookup(match.group(1)).name, errors="replace")
        except (LookupError, UnicodeError):  # unknown, or not a text encoding (rot13, base64, idna...)
            text = None
    if text is None:
        text = raw.decode("utf-8", errors="replace")
    return text.replace("\x00", "\ufffd")


def _json_payload(text: str, content_type: str) -> Any:
    """The body as JSON when it looks like JSON and is standard JSON; otherwise None (kept as text)."""
    if not ("json" in content_type.lower() or text.lstrip()[:1] in ("{", "[")) or not text.strip():
        return None
    try:
        return jsonstrict.loads(text)
    except jsonstrict.JSONRejected:  # not JSON, or NaN, too deep, lone surrogates, NUL: stored as text
        return None


def _summary(payload: JSONObject, github_event: str | None) -> tuple[str | None, str | None]:
    """A sender's summary (Alertmanager, GitHub); None, None when the payload is neither or its shape
    is not what the summariser expects (anyone holding the URL can post anything): the event is then
    stored under the webhook's own title."""
    try:
        if is_alertmanager(payload):
            return summarise_alertmanager(payload)
        if github_event:
            return summarise_github(github_event, payload)
    except (TypeError, AttributeError, ValueError, KeyError):
        logger.info("ingest payload of an unexpected shape; stored with a generic summary")
    return None, None


def parse_body(raw: bytes, content_type: str | None, github_event: str | None,
               github_delivery: str | None) -> JSONObject:
    """What an ingest records: contentType, bodyText, bodyJson, title override and dedup key."""
    content_type = (content_type or "").replace("\x00", "").strip()[:100] or "text/plain"
    text = body_text(raw, content_type)
    payload = _json_payload(text, content_type)
    parsed = {"content_type": content_type, "body_text": text if payload is None else None,
              "body_json": payload, "title": None, "dedup_key": None, "group_key": None, "resolves": False}
    if not isinstance(payload, dict):
        return parsed
    if isinstance(payload.get("title"), str) and payload["title"].strip():
        parsed["title"] = payload["title"].strip()
    if "body" in payload and payload["body"] is not None:
        parsed["body_text"] = payload["body"] if isinstance(payload["body"], str) else jsonstrict.dumps(payload["body"])
    title, body = _summary(payload, github_event)
    parsed["title"] = parsed["title"] or title
    parsed["body_text"] = parsed["body_text"] or body
    if is_alertmanager(payload):
        parsed["dedup_key"] = _short_key(payload.get("fingerprint")) or _short_key(
            f"{payload['groupKey']}|{payload.get('status')}" if payload.get("groupKey") else None)
    elif github_event:
        parsed["dedup_key"] = _short_key(github_delivery and f"github:{github_delivery}")
    if payload.get("dedupKey") not in (None, ""):
        parsed["dedup_key"] = _short_key(payload["dedupKey"])
    parsed["group_key"] = _group_key(payload, github_event) or parsed["dedup_key"]
    parsed["resolves"] = is_alertmanager(payload) and payload.get("status") == "resolved"
    return parsed


def _github_group(event: str, payload: JSONObject) -> str:
    """The repository plus the workflow (or check), or the PR (an issue's comments join its PR's or
    issue's alert: GitHub numbers both alike); any other event groups by repository and event."""
    for key, kind in (("workflow_run", "workflow"), ("check_run", "check")):
        if event == key and isinstance(payload.get(key), dict):
            return f"github:{_repo(payload)}:{kind}:{payload[key].get('name', '?')}"
    for key in ("pull_request", "issue"):
        if isinstance(payload.get(key), dict) and payload[key].get("number") is not None:
            return f"github:{_repo(payload)}:#{payload[key]['number']}"
    return f"github:{_repo(payload)}:{event}"


def _group_key(payload: JSONObject, github_event: str | None) -> str | None:
    """Which alert an ingest belongs to, before the dedupKey and title fallbacks (skill page `buzz`)."""
    try:
        if is_alertmanager(payload):
            return _short_key(payload.get("groupKey")) or _short_key(payload.get("fingerprint"))
        if github_event:
            return _short_key(_github_group(github_event, payload))
    except (TypeError, AttributeError, ValueError, KeyError):
        logger.info("ingest payload of an unexpected shape; grouped by its other keys")
    return _short_key(payload.get("groupKey"))




def _locked_webhook(webhook_id: int, app_name: str, token: str) -> BuzzWebhook:
    """The webhook (every column), its row locked until the unit commits: two concurrent ingests
    could otherwise both count 59 in the window, or both miss the other's dedupKey. App name, token
    (constant time) and enabled are checked again here: the caller found the id in a per-process cache
    (webhook_cache.py), which a change committed elsewhere reaches a few milliseconds later."""
    rows = db.sql_models(BuzzWebhook, "WHERE id = ?" + db.for_update(), (webhook_id,))
    webhook = rows[0] if rows else None
    if not _takes(webhook, app_name, token):
        raise NotFound("Invalid webhook")
    assert webhook is not None  # _takes said so
    return webhook


def _takes(webhook: BuzzWebhook | None, app_name: str, token: str) -> bool:
    """Whether an ingest URL naming `app_name` and `token` reaches this webhook (the token compared in constant
    time) and the webhook is enabled."""
    return (webhook is not None and hmac.compare_digest(webhook.token.encode(), token.encode()) and webhook.enabled
            and webhook.app_name == app_name)


def webhooks_changed(webhook_id: int) -> None:
    """Once this unit commits, every process drops its ingest lookup cache (webhook_cache.py)."""
    changed: WebhooksPayload = {"webhookId": webhook_id}
    db.after_commit(WEBHOOKS, changed)


_REPEAT_SQL = ("SELECT 1 FROM buzz_event WHERE webhook_id = ? AND dedup_key = ? AND received_at > ? AND suppressed = ? "
               "LIMIT 1")


def _is_repeat(webhook: BuzzWebhook, dedup_key: str | None, now: datetime) -> bool:
    """An ingest of that dedupKey, not itself a repeat, within DEDUP_WINDOW (fixed SQL: the hot path)."""
    if not dedup_key:
        return False
    return bool(db.sql_rows(_REPEAT_SQL, (webhook.id, dedup_key, to_db(now - DEDUP_WINDOW), False)))


def _audience(webhook: BuzzWebhook) -> list[str] | None:
    return alerts.audience(webhook.for_users, webhook.wake_agent, webhook.notify_agent)


_WINDOW_SQL = ("SELECT received_at FROM buzz_event WHERE webhook_id = ? AND received_at > ? "
               "ORDER BY received_at DESC LIMIT ?")


def _window(webhook_id: int, now: datetime, limit: int) -> list[datetime]:
    """When the webhook's newest `limit` ingests within INGEST_WINDOW were stored, newest first."""
    rows = db.sql_rows(_WINDOW_SQL, (webhook_id, to_db(now - INGEST_WINDOW), limit))
    return [from_db(value) for (value,) in rows]


def _rate_refusal(window: list[datetime], now: datetime, limit: int) -> RateLimited | None:
    """The refusal of one more ingest when `window` (newest first) holds `limit` already, with the seconds
    until the limit-th newest leaves it."""
    if len(window) < limit:
        return None
    retry = max(1, int((min(window[:limit]) + INGEST_WINDOW - now).total_seconds() + 0.999))
    return RateLimited(retry, f"Too many ingests for this webhook; retry in {retry} s")


def _check_rate(webhook: BuzzWebhook, now: datetime, limit: int) -> None:
    """The authoritative per-webhook window, counted in the database under the webhook's row lock, so
    it holds across server processes. The caller's in-memory check refuses most floods before this."""
    refusal = _rate_refusal(_window(webhook.id, now, limit), now, limit)
    if refusal is not None:
        raise refusal


_INSERT_EVENT_SQL = ("INSERT INTO buzz_event (webhook_id, app_name, title, for_users, received_at, content_type, "
                     "body_text, body_json, wake_agent, notify_agent, suppressed, dedup_key, alert_id, silenced_by) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_HIT_SQL = "UPDATE buzz_webhook SET last_hit_at = ? WHERE id = ?"


def _insert_event(webhook: BuzzWebhook, title: str, now: datetime, parsed: JSONObject, suppressed: bool,
                  alert_id: int | None, silenced: int | None) -> int:
    """The ingest's BuzzEvent row, by fixed SQL (the hot path: Peewee composing the INSERT cost more than
    running it); returns its id."""
    event_id = db.sql_insert(_INSERT_EVENT_SQL, (
        webhook.id, webhook.app_name, title, webhook.for_users, to_db(now), parsed["content_type"],
        parsed["body_text"], BuzzEvent.body_json.db_value(parsed["body_json"]), webhook.wake_agent,
        webhook.notify_agent, suppressed, parsed["dedup_key"], alert_id, silenced))
    assert event_id is not None  # an unguarded INSERT always inserts
    return event_id


# --- ingests queued together (db.merges) --------------------------------------------------------------------
# An alert storm: many firings into alerts that already exist, none changing an alert's state. The batch reads
# what its decisions need once (the webhooks, locked in id order when a call needs it: _serialised; running
# silences; the alerts; the rate window and repeats when asked), decides each call in order as `ingest` would, and
# writes every event row, its `broadcast` and their targets in one statement on PostgreSQL (one INSERT per table on
# SQLite: see sql.highest_ids), with one tally per alert for its firings (alert_tallies.py: no alert or webhook row
# is updated). A call that would change state (a new alert, a silenced firing, a reopening, a flapping alert, one
# routed otherwise than its alert) sends the whole batch back to be run one call at a time (db.Unmerged), so every
# state change keeps one code path: `ingest`.

class _Call(NamedTuple):
    webhook_id: int
    app_name: str
    token: str
    parsed: JSONObject
    limit: int | None = None
    flap: alerts.FlapRule = alerts.FlapRule()
    ingested_by: str | None = None


class _Counted(NamedTuple):
    """Of an alert, what a batch decides by: a firing into it merges while it is neither resolved nor flapping nor
    silenced, and routed as its webhook is (a tally changes no other column: alert_tallies.py)."""
    id: int
    state: str
    flapping: bool
    silenced_by: int | None
    routing: tuple[Any, ...]

    @classmethod
    def of(cls, alert: BuzzAlert) -> _Counted:
        return cls(alert.id, alert.state, alert.flapping, alert.silenced_by,
                   tuple(getattr(alert, column) for column in alert_tallies.ROUTING))

    def takes(self, hook: BuzzWebhook) -> bool:
        return (self.state != "resolved" and not self.flapping and self.silenced_by is None
                and self.routing == tuple(getattr(hook, column) for column in alert_tallies.ROUTING))


# What a webhook's merged firings are decided by; its print (_hook_print) is read with it, and the statement that
# stores a batch checks it again (_merged_ingest_sql), so no batch stores what a change committed meanwhile would
# have decided otherwise.
_DECIDING = ("app_name", "token", "enabled", "title", "for_users", "wake_agent", "notify_agent")


def _hook_print(table: str) -> str:
    return f"md5(row({', '.join(f'{table}.{column}' for column in _DECIDING)})::text)"


class _KnownHook(NamedTuple):
    webhook: BuzzWebhook
    print: str
    silences: tuple[BuzzSilence, ...]  # its running silences and its app name's, when read


class _Known:
    """What merged batches on PostgreSQL read last, per database: each webhook with its print and running silences,
    and the alerts by (webhook, group key). A batch none of whose calls needs its webhooks locked (_serialised) and
    whose webhooks and alerts are all here decides from it, without its read statement (_batch_read_sql). The
    statement that stores the batch checks what it was decided by: the webhooks' prints, no running silence of
    theirs unknown, each alert countable (_stored_together_postgres); anything else sends the batch back
    (db.Unmerged) and this is forgotten. A refusal is never answered from here. So memory saves a read but
    decides nothing alone, and needs no announcement of changes: a stale entry costs one batch run one by one."""

    MAX_ENTRIES = 10_000  # of each kind: past this, start again

    def __init__(self) -> None:
        self.webhooks: dict[int, _KnownHook] = {}
        self.alerts: dict[tuple[int, str], _Counted] = {}

    def file(self, batch: _Batch) -> None:
        for kind in (self.webhooks, self.alerts):
            if len(kind) >= self.MAX_ENTRIES:
                kind.clear()
        for hook in batch.webhooks.values():
            mine = tuple(s for s in batch.silences if s.webhook_id == hook.id or s.app_name == hook.app_name)
            self.webhooks[hook.id] = _KnownHook(hook, batch.prints[hook.id], mine)
        self.alerts.update((key, alert) for key, alert in batch.alerts.items() if alert is not None)


_KNOWN: weakref.WeakKeyDictionary[pw.Database, _Known] = weakref.WeakKeyDictionary()


def _known() -> _Known:
    database = db.current_database()
    known = _KNOWN.get(database)
    if known is None:
        known = _KNOWN[database] = _Known()
    return known


def _forget_known() -> None:
    _KNOWN.pop(db.current_database(), None)


class _Stored(NamedTuple):
    """A call that stores an event row: a repeat (no alert counted, nothing logged) or a firing into `alert`."""
    call: _Call
    webhook: BuzzWebhook
    title: str
    alert: _Counted | None
    suppressed: bool


def _title(parsed: JSONObject, hook: BuzzWebhook) -> str:
    """An ingest's title: its own, else its webhook's."""
    return (parsed["title"] or hook.title)[:TITLE_MAX]


def _alert_key(parsed: JSONObject, title: str) -> str:
    """The group key of the alert an ingest titled `title` (its own or its webhook's) goes into, as `ingest` has it."""
    return parsed.get("group_key") or _short_key(title) or title


def _known_alert_key(parsed: JSONObject) -> str | None:
    """`_alert_key` when the ingest's webhook does not decide it (the ingest has a group key or a title)."""
    if parsed.get("group_key") or parsed["title"]:
        return _alert_key(parsed, parsed["title"][:TITLE_MAX] if parsed["title"] else "")
    return None


_MERGED_COLUMNS = (("ord", "integer"), ("webhook_id", "bigint"), ("app_name", "text"), ("title", "text"),
                   ("for_users", "text"), ("received_at", "timestamp"), ("content_type", "text"), ("body_text", "text"),
                   ("body_json", "text"), ("wake_agent", "text"), ("notify_agent", "text"), ("suppressed", "boolean"),
                   ("dedup_key", "text"), ("alert_id", "bigint"), ("data", "text"), ("to_all", "boolean"),
                   ("audience", "text"), ("firings", "integer"))


@lru_cache(maxsize=1)
def _merged_ingest_sql() -> str:
    """Parameters: the rows (json_rows_param of _MERGED_COLUMNS); how many alerts the batch counts on, its webhook
    ids and their prints (two arrays), now, and the ids of the running silences it knew; log.id_filled's marker and
    prefix. Returns each row's ordinal, buzz_event id and broadcast's event id (NULL for a repeat); no row at all,
    and nothing stored, unless every check of `ok` holds (_stored_together_postgres then sends the batch back:
    db.Unmerged). So a batch decided by what is no longer so stores nothing and takes no id from a sequence.

    `ok`: each alert the batch counts on is countable (alert_tallies.countable), each of its webhooks is as the
    batch decided by (its print: _DECIDING), and none of their running silences is one the batch did not know.
    The statement counts the batch's firings: one tally row per alert (`c`, the last firing's time, event and
    title, how many firings the batch has). `al` holds the alert's row FOR SHARE, read as locked (a locking read
    returns a row's newest version; the statement's other reads, its snapshot's), in id order. A shared lock:
    another batch, of this process or another, takes it too and neither waits; a state change, which updates the
    alert, waits for the batch, and a batch for it. The webhook (`wl`) is read, not locked: a firing the batch
    counts before an update_webhook commits is one of the webhook as it was (the update carries what it changes for
    the alerts themselves, and a later firing routed otherwise runs unmerged: alerts.record copies the new
    routing). So the batch locks no row a lone `ingest` locks first (its webhook's), and runs in a transaction of
    its own (Merge.shares_locks): no lock order of two processes' units can close a cycle through it."""
    routing = ", ".join(alert_tallies.ROUTING)
    return (f"WITH {serial_sequences(b='buzz_event', e='event')}, "
            f"r AS MATERIALIZED (SELECT * FROM {json_rows(_MERGED_COLUMNS)}), "
            f"wl AS MATERIALIZED (SELECT id, {routing}, {_hook_print('buzz_webhook')} AS print FROM buzz_webhook "
            "WHERE id IN (SELECT webhook_id FROM r)), "
            f"al AS MATERIALIZED (SELECT id, webhook_id, state, flapping, silenced_by, {routing} FROM buzz_alert "
            "WHERE id IN (SELECT alert_id FROM r WHERE firings IS NOT NULL) ORDER BY id FOR SHARE), "
            "ok AS (SELECT (SELECT count(*) FROM al JOIN r ON r.alert_id = al.id AND r.firings IS NOT NULL "
            f"JOIN wl ON wl.id = al.webhook_id WHERE {alert_tallies.countable('al', 'wl')}) = ? "
            "AND (SELECT count(*) FROM wl JOIN unnest(?::bigint[], ?::text[]) AS p(id, print) "
            "ON p.id = wl.id AND p.print = wl.print) = cardinality(?::bigint[]) "
            "AND NOT EXISTS (SELECT FROM buzz_silence WHERE ends_at > ? AND ended_at IS NULL "
            "AND NOT (id = ANY(?::bigint[])) AND (webhook_id IN (SELECT id FROM wl) "
            "OR app_name IN (SELECT app_name FROM wl))) AS ok), "
            "v AS (SELECT r.*, nextval(s.b) AS bid, CASE WHEN NOT r.suppressed THEN nextval(s.e) END AS eid "
            "FROM s, r, ok WHERE ok.ok ORDER BY r.ord), "
            "b AS (INSERT INTO buzz_event (id, webhook_id, app_name, title, for_users, received_at, content_type, "
            "body_text, body_json, wake_agent, notify_agent, suppressed, dedup_key, alert_id, silenced_by) "
            "SELECT bid, webhook_id, app_name, title, for_users, received_at, content_type, body_text, body_json, "
            "wake_agent, notify_agent, suppressed, dedup_key, alert_id, NULL FROM v), "
            "e AS (INSERT INTO event (id, type, data, to_all, created_at) "
            f"SELECT eid, 'broadcast', {log.id_filled_sql('bid', 'data')}, to_all, received_at FROM v "
            "WHERE NOT suppressed), "
            "t AS (INSERT INTO event_target (identity, event) SELECT unnest(string_to_array(audience, ',')), eid "
            "FROM v WHERE NOT suppressed AND NOT to_all), "
            "c AS (INSERT INTO buzz_alert_tally (alert_id, webhook_id, firings, last_at, last_event_id, title) "
            "SELECT al.id, v.webhook_id, v.firings, v.received_at, v.bid, v.title FROM al "
            "JOIN v ON v.alert_id = al.id AND v.firings IS NOT NULL) "
            "SELECT ord, bid, eid FROM v")


# The batch's one read on PostgreSQL: its webhooks with their prints (kind 0), their running silences (1) and the
# alerts of its group keys (2), as one UNION ALL whose rows carry every kind's columns, the other kinds' as NULLs. Those NULLs are cast
# to the columns' types: in a UNION of three, two untyped NULLs would make a text column.
_NULL_TYPES = {"AUTO": "integer", "BIGINT": "bigint", "INT": "integer", "BOOL": "boolean", "DATETIME": "timestamp",
               "VARCHAR": "text", "TEXT": "text"}
_ALERT_READ = ("webhook_id", "group_key", "id", "state", "flapping", "silenced_by",
               *alert_tallies.ROUTING)  # what _Counted and its key need


def _nulls(model: type[pw.Model], columns: tuple[str, ...] | None = None) -> list[str]:
    fields = model._meta.sorted_fields if columns is None else [model._meta.columns[c] for c in columns]
    return [f"NULL::{_NULL_TYPES[field.field_type]}" for field in fields]


_HOOK_COLUMNS = slice(1, 1 + len(BuzzWebhook._meta.sorted_fields))
_PRINT_COLUMN = _HOOK_COLUMNS.stop
_SILENCE_COLUMNS = slice(_PRINT_COLUMN + 1, _PRINT_COLUMN + 1 + len(BuzzSilence._meta.sorted_fields))
_ALERT_COLUMNS = slice(_SILENCE_COLUMNS.stop, _SILENCE_COLUMNS.stop + len(_ALERT_READ))


@lru_cache(maxsize=2)
def _batch_read_sql(lock: str) -> str:
    """Parameters: the webhook ids, now, the group keys' webhook ids and the group keys (two arrays).

    `lock` (FOR UPDATE, _serialised) locks the webhooks' rows, in id order, and nothing else, as the batch's
    webhook read did when it read them alone. Its silences and alerts are read in the statement's snapshot, from before a wait
    for a webhook's lock: an alert that another ingest changed meanwhile is as it was, and the batch's counting
    (_merged_ingest_sql's `c`) counts only on an alert still neither resolved nor flapping, else sends the batch back
    (db.Unmerged). A new alert read as missing sends the batch back too. The rate window and the repeats, what the
    lock is for, are read after this statement, under the lock."""
    hook, silence = (f"{db.every_column(model)}" for model in (BuzzWebhook, BuzzSilence))
    no_hook, no_silence = (", ".join(_nulls(model)) for model in (BuzzWebhook, BuzzSilence))
    no_alert = ", ".join(_nulls(BuzzAlert, _ALERT_READ))
    return (f"WITH w AS MATERIALIZED (SELECT {hook}, {_hook_print('buzz_webhook')} AS print FROM buzz_webhook "
            f"WHERE id = ANY(?::bigint[]) ORDER BY id{lock}) "
            f"SELECT 0, *, {no_silence}, {no_alert} FROM w "  # (the webhook's columns, then its print)
            f"UNION ALL SELECT 1, {no_hook}, NULL::text, {silence}, {no_alert} FROM buzz_silence "
            "WHERE ends_at > ? AND ended_at IS NULL AND (webhook_id IN (SELECT id FROM w) "
            "OR app_name IN (SELECT app_name FROM w)) "
            f"UNION ALL SELECT 2, {no_hook}, NULL::text, {no_silence}, {', '.join(_ALERT_READ)} FROM buzz_alert "
            "WHERE (webhook_id, group_key) IN (SELECT * FROM unnest(?::bigint[], ?::text[]))")


class _Batch:
    """What a merged batch read once, and what its earlier calls stored (later calls see both)."""

    def __init__(self, calls: list[_Call], now: datetime) -> None:
        self.now = now
        ids = sorted({call.webhook_id for call in calls})
        lock = db.for_update() if any(_serialised(call) for call in calls) else ""
        self.windows: dict[tuple[int, int], list[datetime]] = {}  # (webhook, limit): its window before the batch
        self.added: dict[int, int] = {}  # webhook: the event rows this batch stored
        self.firsts: dict[tuple[int, str], bool] = {}  # (webhook, dedupKey): an ingest within DEDUP_WINDOW
        self.alerts: dict[tuple[int, str], _Counted | None] = {}
        self.webhooks: dict[int, BuzzWebhook] = {}
        self.prints: dict[int, str] = {}  # PostgreSQL: webhook id: its print (_hook_print)
        self.silences: list[BuzzSilence] = []
        self.remembered = False  # decided from _Known, without reading
        if db.is_sqlite(db.current_database()):
            self.webhooks = {hook.id: hook for hook in db.sql_models(
                BuzzWebhook, f"WHERE id IN {in_list(len(ids))} ORDER BY id{lock}", ids)}
            self.silences = self._running_silences() if self.webhooks else []
        elif lock or not self._remember(calls, ids):
            self._read_postgres(calls, ids, lock)
            _known().file(self)

    def _remember(self, calls: list[_Call], ids: list[int]) -> bool:
        """Takes what the batch decides by from _Known, if every webhook and alert of it is there."""
        known = _known()
        hooks = [known.webhooks.get(webhook_id) for webhook_id in ids]
        if None in hooks:
            return False
        by_id = {known_hook.webhook.id: known_hook for known_hook in hooks if known_hook is not None}
        keys = {(call.webhook_id, _alert_key(call.parsed, _title(call.parsed, by_id[call.webhook_id].webhook)))
                for call in calls}
        alerts_known = {key: known.alerts.get(key) for key in keys}
        if None in alerts_known.values():
            return False
        self.webhooks = {webhook_id: known_hook.webhook for webhook_id, known_hook in by_id.items()}
        self.prints = {webhook_id: known_hook.print for webhook_id, known_hook in by_id.items()}
        self.silences = list({s.id: s for known_hook in by_id.values() for s in known_hook.silences}.values())
        self.alerts.update(alerts_known)
        self.remembered = True
        return True

    def _read_postgres(self, calls: list[_Call], ids: list[int], lock: str) -> None:
        """The webhooks, their running silences and the alerts of the calls' group keys in one statement
        (_batch_read_sql). A call without a title of its own takes its group key from its webhook's title: its
        alert is looked up when it is decided (self.alert), as before."""
        keys = sorted({(call.webhook_id, known) for call in calls
                       if (known := _known_alert_key(call.parsed)) is not None})
        self.alerts.update(dict.fromkeys(keys))  # none unless read
        rows = db.sql_rows(_batch_read_sql(lock), (ids, to_db(self.now), [k[0] for k in keys], [k[1] for k in keys]))
        for row in rows:
            if row[0] == 0:
                hook = db.model_from_row(BuzzWebhook, row[_HOOK_COLUMNS])
                self.webhooks[hook.id] = hook
                self.prints[hook.id] = row[_PRINT_COLUMN]
            elif row[0] == 1:
                self.silences.append(db.model_from_row(BuzzSilence, row[_SILENCE_COLUMNS]))
            else:
                webhook_id, group_key, alert_id, state, flapping, silenced_by, *routing = row[_ALERT_COLUMNS]
                self.alerts[(webhook_id, group_key)] = _Counted(alert_id, state, flapping, silenced_by, tuple(routing))

    def _running_silences(self) -> list[BuzzSilence]:
        hooks = list(self.webhooks.values())
        return db.sql_models(BuzzSilence,
                             f"WHERE ends_at > ? AND ended_at IS NULL AND (webhook_id IN {in_list(len(hooks))} "
                             f"OR app_name IN {in_list(len(hooks))}) ORDER BY id",
                             (to_db(self.now), *(h.id for h in hooks), *(h.app_name for h in hooks)))

    def webhook(self, call: _Call) -> BuzzWebhook | None:
        hook = self.webhooks.get(call.webhook_id)
        if _takes(hook, call.app_name, call.token):
            return hook
        if self.remembered:  # a refusal is answered from what the database holds now
            raise db.Unmerged()
        return None

    def rate_refusal(self, hook: BuzzWebhook, limit: int | None) -> RateLimited | None:
        if limit is None:
            return None
        if (hook.id, limit) not in self.windows:
            self.windows[(hook.id, limit)] = _window(hook.id, self.now, limit)
        window = [self.now] * self.added.get(hook.id, 0) + self.windows[(hook.id, limit)]
        return _rate_refusal(window, self.now, limit)

    def is_repeat(self, hook: BuzzWebhook, dedup_key: str | None) -> bool:
        if not dedup_key:
            return False
        key = (hook.id, dedup_key)
        if key not in self.firsts:
            self.firsts[key] = _is_repeat(hook, dedup_key, self.now)
        return self.firsts[key]

    def silenced(self, hook: BuzzWebhook, title: str, body_json: Any) -> bool:
        return any((s.webhook_id == hook.id or s.app_name == hook.app_name) and silences.matches(s, title, body_json)
                   for s in self.silences)

    def alert(self, hook: BuzzWebhook, group_key: str) -> _Counted | None:
        key = (hook.id, group_key)
        if key not in self.alerts:
            found = alerts.find(hook.id, group_key)
            self.alerts[key] = None if found is None else _Counted.of(found)
        return self.alerts[key]

    def stored(self, hook: BuzzWebhook, call: _Call, suppressed: bool) -> None:
        """An event row this batch stores counts in later calls' rate window, and a first for their repeats."""
        self.added[hook.id] = self.added.get(hook.id, 0) + 1
        if call.parsed["dedup_key"] and not suppressed:
            self.firsts[(hook.id, call.parsed["dedup_key"])] = True


def _serialised(call: _Call) -> bool:
    """Whether the call's answer depends on the ingests before it across processes (its webhook's rate window,
    an earlier firing of its dedup key): then the batch holds its webhook's row lock, as `ingest` does, from its
    first read to its commit. Without either, nothing the batch decides needs the lock: another process's batch
    into the same webhook proceeds meanwhile (it waited for the whole batch before), and the alert is
    counted only if still as read (alert_tallies.countable)."""
    return call.limit is not None or bool(call.parsed["dedup_key"])


def _decide(batch: _Batch, call: _Call) -> _Stored | Exception:
    """What `ingest` would do with `call` after the batch's earlier calls: a refusal, or the row it stores.
    Raises db.Unmerged where `ingest` would change an alert's state."""
    hook = batch.webhook(call)
    if hook is None:
        return NotFound("Invalid webhook")
    refusal = batch.rate_refusal(hook, call.limit)
    if refusal is not None:
        return refusal
    parsed = call.parsed
    suppressed = batch.is_repeat(hook, parsed["dedup_key"])
    title = _title(parsed, hook)
    alert = batch.alert(hook, _alert_key(parsed, title))
    if not suppressed and (alert is None or not alert.takes(hook) or batch.silenced(hook, title, parsed["body_json"])):
        raise db.Unmerged()
    batch.stored(hook, call, suppressed)
    return _Stored(call, hook, title, alert, suppressed)


def _broadcast_data(row: _Stored, event_id: int | None) -> JSONObject:
    return {"type": "broadcast", "appName": row.webhook.app_name, "title": row.title, "eventId": event_id,
            "alertId": row.alert.id if row.alert else None}


def _event_values(row: _Stored, received: datetime) -> list[Any]:
    """The buzz_event row of `row`, from webhook_id to alert_id (as _merged_ingest_sql's columns)."""
    hook, parsed = row.webhook, row.call.parsed
    return [hook.id, hook.app_name, row.title, hook.for_users, received, parsed["content_type"], parsed["body_text"],
            BuzzEvent.body_json.db_value(parsed["body_json"]), hook.wake_agent, hook.notify_agent, row.suppressed,
            parsed["dedup_key"], row.alert.id if row.alert else None]


def _merged_rows(rows: list[tuple[int, _Stored]], received: datetime, firings: dict[int, int]) -> list[list[Any]]:
    """The rows of _merged_ingest_sql (_MERGED_COLUMNS). A batch's broadcasts mostly share their text (the same
    webhook, title and alert, the id filled in by the statement) and audience: each distinct one is made once.
    Making the text was half of a row's time (20 us of 40, 20 rows, a busy machine; bench/RESULTS.md)."""
    texts: dict[tuple[str, str, int | None], str] = {}
    audiences: dict[int, tuple[bool, str]] = {}
    made = []
    for ordinal, row in rows:
        hook = row.webhook
        heard = audiences.get(hook.id)
        if heard is None:
            audience = _audience(hook)
            heard = audiences[hook.id] = (audience is None,
                                          ",".join(sorted({identity for identity in audience or () if identity})))
        key = (hook.app_name, row.title, row.alert.id if row.alert else None)
        text = texts.get(key)
        if text is None:
            text = texts[key] = log.id_filled(_broadcast_data(row, None), "eventId")[0]
        made.append([ordinal, *_event_values(row, received), text, *heard, firings.get(ordinal)])
    return made


def _ingest_many(raw_calls: list[tuple[Any, ...]]) -> list[Callable[[], JSONObject]]:
    """db.merges for `ingest`: the batch's firings stored together, and counted on their alerts by tallies: on
    PostgreSQL by the same statement (_merged_ingest_sql), on SQLite by one INSERT per alert (alert_tallies.add_sqlite)."""
    now = db.now()
    calls = [_Call(*args) for args in raw_calls]
    received = to_db(now)
    try:
        batch = _Batch(calls, now)
        decided = [_decide(batch, call) for call in calls]
        rows = [(ordinal, d) for ordinal, d in enumerate(decided) if isinstance(d, _Stored)]
        ids: dict[int, tuple[int, int | None]] = {}
        if rows and not db.is_sqlite(db.current_database()):
            ids = _stored_together_postgres(batch, rows, received)
        elif rows:
            ids = _stored_together_sqlite(rows, received)
            if not alert_tallies.add_sqlite(_tallies(rows, ids, now)):
                raise db.Unmerged()
    except db.Unmerged:
        _forget_known()  # what sent the batch back may be a change that _Known has not seen
        raise
    return [_ingest_finisher(d, ids.get(ordinal)) for ordinal, d in enumerate(decided)]


def _firings(rows: list[tuple[int, _Stored]]) -> dict[int, int]:
    """By the ordinal of each alert's last firing in the batch: the alert's firings in the batch."""
    last: dict[int, tuple[int, int]] = {}  # alert id: its last firing's ordinal, its firings
    for ordinal, row in rows:
        if not row.suppressed and row.alert is not None:
            previous = last.get(row.alert.id)
            last[row.alert.id] = (ordinal, (previous[1] if previous else 0) + 1)
    return dict(last.values())


def _stored_together_postgres(batch: _Batch, rows: list[tuple[int, _Stored]],
                              received: datetime) -> dict[int, tuple[int, int | None]]:
    """By ordinal: the buzz_event id each row got, and its broadcast's event id (None for a repeat). An alert the
    statement did not count on (resolved, or flapping, since the batch read it) sends the batch back
    (db.Unmerged): each call then runs alone and reopens it. So does a webhook changed or deleted, or a running
    silence of theirs the batch did not know, since what the batch decided by was read."""
    firings = _firings(rows)
    values = json_rows_param(_MERGED_COLUMNS, _merged_rows(rows, received, firings))
    _text, marker, prefix = log.id_filled({}, "eventId")
    hook_ids = sorted({row.webhook.id for _ordinal, row in rows})
    stored = db.sql_rows(_merged_ingest_sql(), [
        values, len(firings), hook_ids, [batch.prints[hook_id] for hook_id in hook_ids], hook_ids, received,
        [silence.id for silence in batch.silences], marker, prefix])
    if not stored:
        raise db.Unmerged()
    return {ordinal: (bid, eid) for ordinal, bid, eid in stored}


_BUZZ_EVENT_COLUMNS = ("id", "webhook_id", "app_name", "title", "for_users", "received_at", "content_type",
                       "body_text", "body_json", "wake_agent", "notify_agent", "suppressed", "dedup_key", "alert_id")


def _stored_together_sqlite(rows: list[tuple[int, _Stored]], received: datetime) -> dict[int, tuple[int, int | None]]:
    highest_buzz, highest_event = db.highest_ids("buzz_event", "event")
    ids: dict[int, tuple[int, int | None]] = {}
    broadcasts: list[tuple[int, str, JSONObject, list[str] | None, datetime]] = []
    for bid, (ordinal, row) in enumerate(rows, start=highest_buzz + 1):
        eid = None if row.suppressed else highest_event + 1 + len(broadcasts)
        if eid is not None:
            broadcasts.append((eid, "broadcast", _broadcast_data(row, bid), _audience(row.webhook), received))
        ids[ordinal] = (bid, eid)
    db.insert_rows("buzz_event", _BUZZ_EVENT_COLUMNS,
                   [(ids[ordinal][0], *_event_values(row, received)) for ordinal, row in rows])
    if broadcasts:
        log.insert_numbered(broadcasts)
    return ids


def _tallies(rows: list[tuple[int, _Stored]], ids: dict[int, tuple[int, int | None]],
             now: datetime) -> list[alert_tallies.Tally]:
    """Each alert's firings of the batch, as of the alert's last firing in it (its event id and title), in id order."""
    counted: dict[int, alert_tallies.Tally] = {}
    for ordinal, row in rows:
        if not row.suppressed and row.alert is not None:
            previous = counted.get(row.alert.id)
            counted[row.alert.id] = alert_tallies.Tally(row.alert.id, row.webhook.id,
                                                        (previous.firings if previous else 0) + 1, now,
                                                        ids[ordinal][0], row.title)
    return [counted[alert_id] for alert_id in sorted(counted)]


def _ingest_finisher(decided: _Stored | Exception, ids: tuple[int, int | None] | None) -> Callable[[], JSONObject]:
    def finish() -> JSONObject:
        if isinstance(decided, Exception):
            raise decided
        assert ids is not None
        event_id, logged = ids
        if decided.suppressed:
            return {"ok": True, "eventId": event_id, "suppressed": True}
        assert decided.alert is not None and logged is not None
        db.note_event(logged, "broadcast")
        hook = decided.webhook
        for agent in {a for a in (hook.wake_agent, hook.notify_agent) if a is not None}:
            wake_signal.enters_wake(agent, None)
        return {"ok": True, "eventId": event_id, "alertId": decided.alert.id}
    return finish


def _mergeable(_webhook_id: int, _app_name: str, _token: str, parsed: JSONObject, _limit: int | None = None,
               _flap: alerts.FlapRule | None = None, ingested_by: str | None = None) -> bool:
    """A resolution changes state, and an identity's own ingest asks the loop guard: those run on their own."""
    return not parsed.get("resolves") and ingested_by is None


@db.merges(_ingest_many, when=_mergeable, on_sqlite=True, shares_locks=True)
def ingest(webhook_id: int, app_name: str, token: str, parsed: JSONObject, limit: int | None = None,
           flap: alerts.FlapRule = alerts.FlapRule(), ingested_by: str | None = None) -> JSONObject:
    """Into the webhook `webhook_id` (webhook_cache.WebhookCache.webhook_id: the one the ingest URL's app name
    and `token` name). `limit`: ingests per webhook per minute across every process (None when rate limits
    are off). `ingested_by`: the identity whose bearer token the ingest carried (optional): its own ingest
    never wakes or pushes to it (the `broadcast` event names it as `ingestedBy`)."""
    webhook = _locked_webhook(webhook_id, app_name, token)
    now = db.now()
    if limit is not None:
        _check_rate(webhook, now, limit)
    suppressed = _is_repeat(webhook, parsed["dedup_key"], now)
    title = _title(parsed, webhook)
    group_key = _alert_key(parsed, title)
    silenced = None if suppressed else silences.silencing(webhook, title, parsed["body_json"], now)
    resolves = bool(parsed.get("resolves")) and silenced is None
    alert = alerts.find(webhook.id, group_key)
    created = alert is None and not suppressed  # a repeat never starts an alert
    if alert is None and not suppressed:
        alert = alerts.create_for(webhook, group_key, title, resolves, now)
    event_id = _insert_event(webhook, title, now, parsed, suppressed, alert.id if alert else None, silenced)
    if suppressed:
        return {"ok": True, "eventId": event_id, "suppressed": True}
    assert alert is not None
    if silenced is not None:
        alerts.record_silenced(alert, event_id, silenced, now)
        return {"ok": True, "eventId": event_id, "alertId": alert.id, "silencedBy": silenced}
    wakes = alerts.record(alert, webhook, event_id, title, resolves, created, now, flap.for_webhook(webhook),
                          ingested_by)
    db.sql_execute(_HIT_SQL, (to_db(now), webhook.id))
    log.append("broadcast", {"type": "broadcast", "appName": webhook.app_name, "title": title, "eventId": event_id,
                             "alertId": alert.id, **alerts.quiet(wakes),
                             **({"ingestedBy": ingested_by} if ingested_by else {})},
               to=_audience(webhook))
    for agent in {a for a in (webhook.wake_agent, webhook.notify_agent) if a is not None and wakes}:
        wake_signal.enters_wake(agent, ingested_by)
    return {"ok": True, "eventId": event_id, "alertId": alert.id}


def alert_detail(identity: str, is_admin: bool, alert_id: int) -> JSONObject:
    """An alert the caller may see, with its most recent events (newest first)."""
    alert = alerts.visible(identity, is_admin, alert_id)
    events = (BuzzEvent.select().where(BuzzEvent.alert_id == alert.id).order_by(BuzzEvent.id.desc())
              .limit(alerts.RECENT_EVENTS))
    return {**alerts.alert_json(alert), "events": [event_json(e) for e in events]}
