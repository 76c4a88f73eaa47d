"""Recurring task template request and response models (API.md §7). Shapes here; the rules (a 5-field cron that fires, a
real time zone, a known assignee, a project the caller sees, text limits) are domain/recurring.py's."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.recurring import CRON_MAX, CRON_PATTERN, PREVIEW_MAX
from .base import Model, text
from ..domain.swarm import TEXT_MAX
from .common import Identity, Time, capped
from .swarm import Status, TimeZone, Title

_REQUIRED = "title and cronExpr are required"
_CRON = "cronExpr must have 5 fields: minute hour day-of-month month day-of-week"
_TIMEZONE = "timezone must be an IANA timezone name such as America/Chicago"
CronExpr = Annotated[str, msgspec.Meta(pattern=CRON_PATTERN, max_length=CRON_MAX,
                                       description="5 fields: minute hour day-of-month month day-of-week")]


class TemplateFields(Model):
    """PATCH /api/swarm/recurring/{id}: only the fields present change; nextRunAt is recomputed when the
    schedule (cronExpr, timezone, enabled) changes. null clears detail, projectId and assigneeUserId."""
    __messages__ = {"timezone": _TIMEZONE}
    title: Title | UnsetType = UNSET
    detail: Annotated[str, capped(TEXT_MAX)] | None | UnsetType = UNSET
    project_id: str | None | UnsetType = UNSET
    assignee_user_id: Identity | None | UnsetType = UNSET
    initial_status: Status | None | UnsetType = UNSET
    timezone: TimeZone | None | UnsetType = UNSET
    cron_expr: CronExpr | UnsetType = UNSET
    enabled: bool | UnsetType = UNSET


class NewTemplate(TemplateFields, kw_only=True):
    """POST /api/swarm/recurring: `title` and `cronExpr` required; timezone defaults to America/Chicago and
    initialStatus to ready."""
    __messages__ = {"timezone": _TIMEZONE, "title": _REQUIRED, "cronExpr": _REQUIRED, "cronExpr:format": _CRON,
                    "cronExpr:length": _CRON}
    title: Title
    cron_expr: CronExpr


class PreviewSchedule(Model):
    """POST /api/swarm/recurring/preview: the next `count` runs of a schedule, nothing saved."""
    __messages__ = {"timezone": _TIMEZONE, "cronExpr": "cronExpr is required", "cronExpr:format": _CRON,
                    "cronExpr:length": _CRON,
                    "count": f"count must be an integer from 1 to {PREVIEW_MAX}"}
    cron_expr: CronExpr
    timezone: TimeZone | None = None
    count: Annotated[int, msgspec.Meta(ge=1, le=PREVIEW_MAX)] = 3



class Template(Model):
    """A recurring template: a 5-field cron in an IANA timezone."""
    id: str
    project_id: str | None
    title: str
    detail: str | None
    assignee_user_id: str | None
    creator_user_id: str
    cron_expr: str
    timezone: str
    initial_status: Status
    enabled: bool
    last_run_at: Time | None
    next_run_at: Time | None
    created_at: Time
    updated_at: Time


class Templates(Model):
    """Recurring templates by title."""
    templates: list[Template]


class TickResult(Model):
    """What one scheduler pass did: tasks created, templates that failed."""
    created: int
    errors: int


class RunPreview(Model):
    """The next runs of a cron expression (normalised) in a timezone."""
    cron_expr: str
    timezone: str
    runs: list[Time]
