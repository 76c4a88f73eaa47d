"""Recurring task template response models (API.md §7)."""
from __future__ import annotations

from .base import Model
from .common import Time
from .swarm import Status


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
