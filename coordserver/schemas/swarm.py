"""Swarm (projects and tasks) request models (API.md §6, §18). Project and task bodies are checked field by
field by domain/swarm.py and domain/projects.py (create and PATCH share those rules)."""
from __future__ import annotations

from typing import Annotated

import msgspec

from ..domain.swarm import REASON_MAX, STATUSES
from .base import Model, Query, required_text
from .common import Limit, clamp_limit

# Checked by the domain (its refusal names the allowed moves); the enum tells OpenAPI and MCP clients the values.
Status = Annotated[str, msgspec.Meta(description="one of: " + ", ".join(STATUSES),
                                     extra_json_schema={"enum": list(STATUSES)})]


class ProjectsQuery(Query):
    """GET /api/swarm/projects."""
    include_archived: bool = False


class TasksQuery(Query):
    """GET /api/swarm/tasks: `statuses=a,b` (or its alias `status`), `assignee=me` for the caller."""
    statuses: str | None = None
    status: str | None = None
    assignee: str | None = None
    project_id: str | None = None
    include_completed: bool = False


class TaskEventsQuery(Query):
    """GET /api/swarm/tasks/{id}/events."""
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class MoveTask(Model):
    """PATCH /api/swarm/tasks/{id}/status: a move by the state table (claims are atomic)."""
    __messages__ = {"reason": f"reason must be a string of at most {REASON_MAX} characters"}
    status: Status | None = None
    reason: Annotated[str, msgspec.Meta(max_length=REASON_MAX)] | None = None
    assignee_user_id: str | None = None

    def __post_init__(self) -> None:
        if self.status is None or self.status == "":
            raise ValueError("status required")


class PageLink(Model):
    """POST and DELETE /api/swarm/tasks/{id}/notebook-pages."""
    __messages__ = {"notebookPageId": "notebookPageId required"}
    notebook_page_id: str | None = None

    def __post_init__(self) -> None:
        required_text(self, "notebook_page_id", "notebookPageId")


class DisabledQuery(Query):
    """GET /api/swarm/recurring and /api/swarm/workflows: disabled ones only with includeDisabled=true."""
    include_disabled: bool = False
