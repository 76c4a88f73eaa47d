"""Buzz request and response models (API.md §8). Request shapes here; the rules (appName as a URL segment, text
limits, valid and known identities) are domain/buzz.py's, for create and PATCH alike."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.buzz import APP_NAME_MAX, APP_NAME_RE, APP_NAME_RULE, FOR_USERS_MAX, TITLE_MAX
from .base import Model, Query, at_least_one, text, trimmed
from .common import IDENTITY_LIST_PATTERN, IDENTITY_OR_BLANK_PATTERN, IdentityOrBlank
from .common import Limit, Ok, Time, clamp_limit

_REQUIRED = "appName and title are required"
_FOR_USERS = "forUsers must be a comma-separated string or an array of identities"
AppName = Annotated[str, msgspec.Meta(max_length=APP_NAME_MAX, pattern=trimmed(APP_NAME_RE.pattern), description=f"letters, digits, '.', '_', '-'; at most {APP_NAME_MAX} "
                                                  "characters (part of the ingest URL)")]
Title = Annotated[str, text(TITLE_MAX)]
# Typed loosely for msgspec (a pattern on the text beside a list crashes msgspec 0.22 at exit); the schema below
# states each form, and domain/buzz.py clean_for_users enforces exactly that (the length in _Routing).
ForUsers = str | list[str]
_FOR_USERS_SCHEMA = {"description": f"identities the events are for: \"alice,bob\" or [\"alice\", \"bob\"] (at most "
                                    f"{FOR_USERS_MAX} characters); null for everyone",
                     "anyOf": [{"type": "string", "maxLength": FOR_USERS_MAX, "pattern": IDENTITY_LIST_PATTERN},
                               {"type": "array", "items": {"type": "string", "pattern": IDENTITY_OR_BLANK_PATTERN}},
                               {"type": "null"}]}
Agent = Annotated[IdentityOrBlank, msgspec.Meta(description="a known identity; blank or null for none")]


class BuzzEventsQuery(Query):
    """GET /api/buzz/events and /api/broadcast/events."""
    app_name: str | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.app_name = self.app_name or None
        self.limit = clamp_limit(self.limit)


class _Routing(Model):
    """Who a webhook's events are for, and which agents they wake or notify."""
    __messages__ = {"forUsers": _FOR_USERS, "wakeAgent": "wakeAgent must be an identity",
                    "notifyAgent": "notifyAgent must be an identity"}
    __field_schemas__ = {"forUsers": _FOR_USERS_SCHEMA}
    for_users: ForUsers | None | UnsetType = UNSET
    wake_agent: Agent | None | UnsetType = UNSET
    notify_agent: Agent | None | UnsetType = UNSET

    def __post_init__(self) -> None:
        if isinstance(self.for_users, str) and len(self.for_users) > FOR_USERS_MAX:  # as sent, as the schema says
            raise ValueError(f"forUsers is longer than {FOR_USERS_MAX} characters")


class NewWebhook(_Routing, kw_only=True):
    """POST /api/buzz/webhooks and /api/broadcast/webhooks: `appName` and `title` required."""
    __messages__ = {**_Routing.__messages__, "appName": _REQUIRED, "title": _REQUIRED, "appName:format": APP_NAME_RULE,
                    "appName:length": f"appName is longer than {APP_NAME_MAX} characters",
                    "title:length": f"title is longer than {TITLE_MAX} characters"}
    app_name: AppName
    title: Title


@at_least_one
class WebhookFields(_Routing):
    """PATCH /api/buzz/webhooks/{id} and /api/broadcast/webhooks/{id} (owner or admin): at least one field."""
    __messages__ = NewWebhook.__messages__
    app_name: AppName | UnsetType = UNSET
    title: Title | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET


class BuzzWebhook(Model):
    """A buzz webhook config; `ingestUrl` is where outside systems POST."""
    id: int
    app_name: str
    token: str
    title: str
    owner: str
    for_users: str | None  # comma-separated identities; null = everyone
    wake_agent: str | None
    notify_agent: str | None
    enabled: bool
    created_at: Time
    last_hit_at: Time | None
    ingest_url: str


class BuzzWebhooks(Model):
    """Buzz webhook configs, newest first."""
    webhooks: list[BuzzWebhook]


class BuzzEvent(Model):
    """One ingested event."""
    id: int
    webhook_id: int
    app_name: str
    title: str
    for_users: str | None
    received_at: Time
    content_type: str
    body_text: str | None
    body_json: Any
    wake_delivered_at: Time | None
    notify_delivered_at: Time | None
    suppressed: bool
    alert_id: int | None = None  # the alert it belongs to (none for a repeat that started none)
    silenced_by: int | None = None  # the silence that hid it: stored and counted, with no effects


class BuzzEvents(Model):
    """Buzz events for the caller, newest first."""
    events: list[BuzzEvent]


class Ingested(Ok):
    """An accepted ingest: its event id; `suppressed` when it repeated a recent dedup key."""
    event_id: int
    suppressed: bool | UnsetType = UNSET
    alert_id: int | UnsetType = UNSET  # the alert it counts on (absent for a suppressed repeat)
    silenced_by: int | UnsetType = UNSET  # the silence that hid it (it has no effects)
