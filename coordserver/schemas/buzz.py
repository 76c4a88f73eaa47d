"""Buzz request and response models (API.md §8). Webhook config bodies are checked by domain/buzz.py's clean_* rules."""
from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType

from .base import Model, Query
from .common import Limit, Ok, Time, clamp_limit


class BuzzEventsQuery(Query):
    """GET /api/buzz/events and /api/broadcast/events."""
    app_name: str | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.app_name = self.app_name or None
        self.limit = clamp_limit(self.limit)


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


class BuzzEvents(Model):
    """Buzz events for the caller, newest first."""
    events: list[BuzzEvent]


class Ingested(Ok):
    """An accepted ingest: its event id; `suppressed` when it repeated a recent dedup key."""
    event_id: int
    suppressed: bool | UnsetType = UNSET
