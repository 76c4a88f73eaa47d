"""Alert request and response models (skill page `buzz`, "Alerts"). The rules are domain/alerts.py's, which
checks them again (it is callable without HTTP)."""
from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.alerts import SNOOZE_MAX_MINUTES
from .base import Model, Query
from .buzz import BuzzEvent
from .common import Limit, Time, clamp_limit

AlertState = Literal["open", "acked", "snoozed", "resolved"]
_SNOOZE_ONE = "Snooze with minutes or until, not both"


class AlertsQuery(Query):
    """GET /api/buzz/alerts: what the caller may see, newest activity first."""
    __messages__ = {"state": "state must be open, acked, snoozed or resolved"}
    state: AlertState | None = None
    app_name: str | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.app_name = self.app_name or None
        self.limit = clamp_limit(self.limit)


class Runbook(Model, omit_defaults=False):
    """The webhook's runbook: a notebook page (open it in Notes) or a URL."""
    page_id: str | None
    url: str | None


class Alert(Model, omit_defaults=False):
    """One alert: a webhook's events of one group key. `count`: its firings; `ackedBy`/`ackedAt` while acked,
    `snoozedUntil` while snoozed, `resolvedAt`/`resolvedBy` once resolved (resolvedBy null: the source did)."""
    id: int
    webhook_id: int
    app_name: str
    title: str
    group_key: str
    state: AlertState
    count: int
    first_at: Time
    last_at: Time
    opened_at: Time  # when it last became open (time to acknowledge counts from here)
    acked_by: str | None
    acked_at: Time | None
    snoozed_until: Time | None
    resolved_at: Time | None
    resolved_by: str | None
    last_event_id: int | None
    silenced_by: int | None  # the silence that hid its latest firing (it is then in no wake)
    runbook: Runbook | None
    escalate_at: Time | None  # when it escalates if still open then
    escalated_at: Time | None  # it escalated since it last opened
    flapping: bool  # resolved by its source too often lately: it wakes at most once per flap window


class Alerts(Model):
    """Alerts the caller may see, newest activity first."""
    alerts: list[Alert]


class AlertDetail(Alert, omit_defaults=False):
    """An alert with its most recent events, newest first."""
    events: list[BuzzEvent]


class Snooze(Model):
    """POST /api/buzz/alerts/{id}/snooze: `minutes` from now, or `until` a time (one of them)."""
    __messages__ = {"minutes": f"minutes must be 1 to {SNOOZE_MAX_MINUTES}",
                    "until": "until must be an ISO-8601 timestamp"}
    __schema_extra__ = {"oneOf": [{"required": ["minutes"]}, {"required": ["until"]}]}
    minutes: Annotated[int, msgspec.Meta(ge=1, le=SNOOZE_MAX_MINUTES)] | UnsetType = UNSET
    until: Time | UnsetType = UNSET

    def __post_init__(self) -> None:
        if (self.minutes is UNSET) == (self.until is UNSET):
            raise ValueError(_SNOOZE_ONE)
