"""Workflow response models (API.md §18)."""
from __future__ import annotations

from typing import Any

from .base import Model
from .common import Time


class Workflow(Model):
    """A procedure document agents follow for a task (stored, never run)."""
    id: str
    title: str
    description: str | None
    document_url: str | None
    document: Any
    enabled: bool
    tagged_users: list[str] | None
    expires_at: Time | None
    review_at: Time | None
    created_by: str
    updated_at: Time
    created_at: Time


class Workflows(Model):
    """Workflows the caller may see, by title."""
    workflows: list[Workflow]


class TaskWorkflow(Model):
    """A workflow attached to a task."""
    task_id: str
    workflow_id: str
    attached_by: str
    attached_at: Time
