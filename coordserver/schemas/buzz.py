"""Buzz request and response models (API.md §8). Request shapes here; the rules (appName as a URL segment, text
limits, valid and known identities) are domain/buzz.py's, for create and PATCH alike."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.buzz import (APP_NAME_MAX, APP_NAME_RE, APP_NAME_RULE, ESCALATE_MINUTES_MAX, FLAP_RESOLUTIONS_MAX,
                           FLAP_WINDOW_MINUTES_MAX, FOR_USERS_MAX, RUNBOOK_URL_MAX, TITLE_MAX)
from ..domain.fields import HTTP_URL
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
FlapResolutions = Annotated[int, msgspec.Meta(ge=1, le=FLAP_RESOLUTIONS_MAX, description=(
    "an alert its source resolves more often than this within flapWindowMinutes flaps; null: the server's "
    "default (COORD_FLAP_RESOLUTIONS)"))]
FlapWindowMinutes = Annotated[int, msgspec.Meta(ge=1, le=FLAP_WINDOW_MINUTES_MAX, description=(
    "the flap window, in minutes; null: the server's default (COORD_FLAP_WINDOW_MINUTES)"))]


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
                    "notifyAgent": "notifyAgent must be an identity",
                    "escalateTo": _FOR_USERS.replace("forUsers", "escalateTo"),
                    "runbookUrl": f"runbookUrl must be an http or https URL of at most {RUNBOOK_URL_MAX} characters, "
                                  "or null",
                    "escalateAfterMinutes": f"escalateAfterMinutes must be 1 to {ESCALATE_MINUTES_MAX}, or null",
                    "flapResolutions": f"flapResolutions must be 1 to {FLAP_RESOLUTIONS_MAX}, or null",
                    "flapWindowMinutes": f"flapWindowMinutes must be 1 to {FLAP_WINDOW_MINUTES_MAX}, or null"}
    __field_schemas__ = {"forUsers": _FOR_USERS_SCHEMA, "escalateTo": {
        **_FOR_USERS_SCHEMA, "description": "identities an alert still open after escalateAfterMinutes wakes"}}
    for_users: ForUsers | None | UnsetType = UNSET
    wake_agent: Agent | None | UnsetType = UNSET
    notify_agent: Agent | None | UnsetType = UNSET
    runbook_page_id: Annotated[str, msgspec.Meta(max_length=36, description="a notebook page")] | None | UnsetType = \
        UNSET
    runbook_url: Annotated[str, msgspec.Meta(max_length=RUNBOOK_URL_MAX, pattern=HTTP_URL.pattern)] | None | UnsetType \
        = UNSET
    escalate_after_minutes: Annotated[int, msgspec.Meta(ge=1, le=ESCALATE_MINUTES_MAX)] | None | UnsetType = UNSET
    escalate_to: ForUsers | None | UnsetType = UNSET
    flap_resolutions: FlapResolutions | None | UnsetType = UNSET
    flap_window_minutes: FlapWindowMinutes | None | UnsetType = UNSET

    def __post_init__(self) -> None:
        for name, value in (("forUsers", self.for_users), ("escalateTo", self.escalate_to)):
            if isinstance(value, str) and len(value) > FOR_USERS_MAX:  # as sent, as the schema says
                raise ValueError(f"{name} is longer than {FOR_USERS_MAX} characters")


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
    runbook_page_id: str | None = None
    runbook_url: str | None = None
    escalate_after_minutes: int | None = None
    escalate_to: list[str] | None = None
    flap_resolutions: FlapResolutions | None = None  # null: the server's default
    flap_window_minutes: FlapWindowMinutes | None = None


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
