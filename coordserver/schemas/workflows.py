"""Workflow request and response models (API.md §18). Shapes here; the rules (title and URL limits, known identities,
creator-or-admin edits, visible tasks and workflows) are domain/workflows.py's."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.fields import HTTP_URL
from ..domain.workflows import TEXT_MAX, TITLE_MAX, URL_MAX
from .base import Model, text
from .common import Time, capped
from .swarm import TaggedUsers

Title = Annotated[str, text(TITLE_MAX)]
Url = Annotated[str, msgspec.Meta(max_length=URL_MAX, pattern=HTTP_URL.pattern, description="http or https")]
_URL = f"documentUrl must be an http or https URL of at most {URL_MAX} characters"


class WorkflowFields(Model):
    """PATCH /api/swarm/workflows/{id} (creator or admin): only the fields present change; null clears the
    nullable ones."""
    __messages__ = {"documentUrl": _URL, "expiresAt": "expiresAt must be an ISO-8601 timestamp",
                    "reviewAt": "reviewAt must be an ISO-8601 timestamp",
                    "taggedUsers": "taggedUsers must be null or an array of at most 100 identities"}
    title: Title | UnsetType = UNSET
    description: Annotated[str, capped(TEXT_MAX)] | None | UnsetType = UNSET
    document_url: Url | None | UnsetType = UNSET
    document: Any | UnsetType = UNSET  # any JSON, stored as given
    enabled: bool | UnsetType = UNSET
    tagged_users: TaggedUsers | None | UnsetType = UNSET
    expires_at: Time | None | UnsetType = UNSET
    review_at: Time | None | UnsetType = UNSET


class NewWorkflow(WorkflowFields, kw_only=True):
    """POST /api/swarm/workflows: `title` required; enabled unless told otherwise."""
    __messages__ = {**WorkflowFields.__messages__, "title": "title is required"}
    title: Title


class AttachWorkflow(Model):
    """POST /api/swarm/tasks/{id}/workflows: attach a workflow the caller can see."""
    __messages__ = {"workflowId": "workflowId required"}
    workflow_id: Annotated[str, text()]



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
