"""Swarm (projects and tasks) request and response models (API.md §6, §18). Project and task bodies are checked field by
field by domain/swarm.py and domain/projects.py (create and PATCH share those rules)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.projects import TAGGED_MAX
from ..domain.swarm import (COLOR_RE, DEFAULT_TIMEZONE, TIMEZONE_MAX, TEXT_MAX, URL_MAX, REASON_MAX, STATUS_LIST_PATTERN,
                            TITLE_MAX)
from ..domain.leases import LEASE_MAX, LEASE_MIN
from ..domain.task_rules import STATUSES
from .base import Model, Query, text
from .common import Identity, Limit, Time, capped, clamp_limit

# Checked by the domain (its refusal names the allowed moves); the enum tells OpenAPI and MCP clients the values.
Status = Annotated[str, msgspec.Meta(description="one of: " + ", ".join(STATUSES),
                                     extra_json_schema={"enum": list(STATUSES)})]


# The pattern is stated here and enforced by domain/swarm.py status_filter, whose refusal names the unknown status and the allowed ones.
StatusList = Annotated[str, msgspec.Meta(description="comma-separated: " + ",".join(STATUSES),
                                         extra_json_schema={"pattern": STATUS_LIST_PATTERN})]


class ProjectsQuery(Query):
    """GET /api/swarm/projects."""
    include_archived: bool = False


class TasksQuery(Query):
    """GET /api/swarm/tasks: `statuses=a,b` (or its alias `status`), `assignee=me` for the caller."""
    statuses: StatusList | None = None
    status: Annotated[StatusList, msgspec.Meta(description="an alias of statuses (statuses wins)")] | None = None
    assignee: Annotated[str, msgspec.Meta(description='an identity, or "me" for the caller')] | None = None
    project_id: str | None = None
    include_completed: bool = False


class TaskEventsQuery(Query):
    """GET /api/swarm/tasks/{id}/events."""
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


LeaseSeconds = Annotated[int, msgspec.Meta(
    ge=LEASE_MIN, le=LEASE_MAX, description=f"a lease of this many seconds ({LEASE_MIN} to {LEASE_MAX}): unless "
                                            "renewed (POST /api/swarm/tasks/{id}/renew) the task returns to ready, "
                                            "unassigned, when it runs out")]
LEASE_MESSAGE = f"leaseSeconds must be an integer from {LEASE_MIN} to {LEASE_MAX}"


class MoveTask(Model):
    """PATCH /api/swarm/tasks/{id}/status: a move by the state table (claims are atomic). `leaseSeconds`: a move
    to in_progress only."""
    __messages__ = {"reason": f"reason must be a string of at most {REASON_MAX} characters",
                    "status": "status required", "leaseSeconds": LEASE_MESSAGE}
    status: Status
    reason: Annotated[str, msgspec.Meta(max_length=REASON_MAX)] | None = None
    assignee_user_id: Identity | None = None
    lease_seconds: LeaseSeconds | None = None

    def __post_init__(self) -> None:
        if self.status == "":
            raise ValueError("status required")


class RenewLease(Model):
    """POST /api/swarm/tasks/{id}/renew: the holder extends the lease (by its own length without leaseSeconds)."""
    __messages__ = {"leaseSeconds": LEASE_MESSAGE}
    lease_seconds: LeaseSeconds | None = None


class PageLink(Model):
    """POST and DELETE /api/swarm/tasks/{id}/notebook-pages."""
    __messages__ = {"notebookPageId": "notebookPageId required"}
    notebook_page_id: Annotated[str, text()]


class DisabledQuery(Query):
    """GET /api/swarm/recurring and /api/swarm/workflows: disabled ones only with includeDisabled=true."""
    include_disabled: bool = False


Hour = Annotated[int, msgspec.Meta(ge=0, le=23)]
TimeZone = Annotated[str, msgspec.Meta(min_length=1, max_length=TIMEZONE_MAX,
                                       description=f"IANA time zone (default {DEFAULT_TIMEZONE})")]
Color = Annotated[str, msgspec.Meta(pattern=COLOR_RE.pattern, description="#rrggbb")]
TaggedUsers = Annotated[list[Identity], msgspec.Meta(max_length=TAGGED_MAX)]
Title = Annotated[str, text(TITLE_MAX)]


class ProjectFields(Model):
    """POST /api/swarm/projects (`title` and `color` required) and PATCH /api/swarm/projects/{id} (only the
    fields present change; null clears the nullable ones). The shapes are checked here; the rules (color
    as #rrggbb, known identities, a real time zone, text limits) are domain/projects.py's, for both."""
    __messages__ = {"workHoursStart": "workHoursStart must be an hour from 0 to 23 (or null)",
                    "workHoursEnd": "workHoursEnd must be an hour from 0 to 23 (or null)",
                    "blockingMode": "blockingMode must be true or false",
                    "taggedUsers": "taggedUsers must be null or an array of at most 100 identities",
                    "title": "title is required", "color": "color must look like #rrggbb",
                    "workHoursTimezone": "workHoursTimezone must be an IANA timezone name such as America/Chicago"}
    title: Title | UnsetType = UNSET  # required on create: the domain says so with color
    color: Color | UnsetType = UNSET
    description: Annotated[str, capped(TEXT_MAX)] | None | UnsetType = UNSET
    website_url: Annotated[str, capped(URL_MAX)] | None | UnsetType = UNSET
    onedev_url: Annotated[str, capped(URL_MAX)] | None | UnsetType = UNSET
    github_url: Annotated[str, capped(URL_MAX)] | None | UnsetType = UNSET
    dokploy_deploy_url: Annotated[str, capped(URL_MAX)] | None | UnsetType = UNSET
    project_lead_user_id: Identity | None | UnsetType = UNSET
    developer_lead_user_id: Identity | None | UnsetType = UNSET
    work_hours_start: Hour | None | UnsetType = UNSET
    work_hours_end: Hour | None | UnsetType = UNSET
    work_hours_timezone: TimeZone | None | UnsetType = UNSET
    blocking_mode: bool | UnsetType = UNSET
    tagged_users: TaggedUsers | None | UnsetType = UNSET


class NewProject(ProjectFields, kw_only=True):
    """POST /api/swarm/projects: `title` and `color` required."""
    __messages__ = {**ProjectFields.__messages__, "title": "title and color are required",
                    "color": "title and color are required", "color:format": "color must look like #rrggbb"}
    title: Title
    color: Color


class TaskFields(Model):
    """PATCH /api/swarm/tasks/{id}: the fields present change, null clears; status moves through
    PATCH .../status. Shapes here; the rules (visible project, known identities, other tasks you can see,
    text limits) are domain/swarm.py's."""
    __messages__ = {"sortKey": "sortKey must be a number", "onOrAfterAt": "onOrAfterAt must be an ISO-8601 timestamp",
                    "linkedNotebookPages": "linkedNotebookPages must be an array of page ids",
                    "title": "title is required"}
    title: Title | UnsetType = UNSET
    project_id: str | None | UnsetType = UNSET
    detail: Annotated[str, capped(TEXT_MAX)] | None | UnsetType = UNSET
    follow_up: Annotated[str, capped(TEXT_MAX)] | None | UnsetType = UNSET
    issue_url: Annotated[str, capped(URL_MAX)] | None | UnsetType = UNSET
    assignee_user_id: Identity | None | UnsetType = UNSET
    next_task_assignee_user_id: Identity | None | UnsetType = UNSET
    must_be_done_after_task_id: str | None | UnsetType = UNSET
    next_task_id: str | None | UnsetType = UNSET
    on_or_after_at: Time | None | UnsetType = UNSET
    sort_key: float | None | UnsetType = UNSET
    linked_notebook_pages: Annotated[list[Annotated[str, msgspec.Meta(min_length=1, max_length=36)]],
                                     msgspec.Meta(max_length=100)] | None | UnsetType = UNSET


class NewTask(TaskFields, kw_only=True):
    """POST /api/swarm/tasks: `title` required; status defaults to ready; `leaseSeconds` only with status
    in_progress and an assignee."""
    __messages__ = {**TaskFields.__messages__, "leaseSeconds": LEASE_MESSAGE}
    title: Title
    status: Status | None | UnsetType = UNSET
    lease_seconds: LeaseSeconds | None | UnsetType = UNSET


class Project(Model):
    """A project (API.md §6; `createdBy` and `taggedUsers` from §18)."""
    id: str
    title: str
    description: str | None
    website_url: str | None
    onedev_url: str | None
    github_url: str | None
    dokploy_deploy_url: str | None
    color: str
    project_lead_user_id: str | None
    developer_lead_user_id: str | None
    work_hours_start: int | None
    work_hours_end: int | None
    work_hours_timezone: str
    blocking_mode: bool
    archived_at: Time | None
    created_at: Time
    updated_at: Time
    created_by: str | None  # null on projects made before schema 3
    tagged_users: list[str] | None


class Projects(Model):
    """Projects the caller may see, by title."""
    projects: list[Project]


class Task(Model):
    """A task."""
    id: str
    project_id: str | None
    title: str
    detail: str | None
    follow_up: str | None
    creator_user_id: str
    assignee_user_id: str | None
    status: Status
    issue_url: str | None
    on_or_after_at: Time | None
    must_be_done_after_task_id: str | None
    sort_key: float | None
    next_task_id: str | None
    next_task_assignee_user_id: str | None
    recurring_template_id: str | None
    recurring_instance_at: Time | None
    linked_notebook_pages: list[str] | None
    created_at: Time
    updated_at: Time
    completed_at: Time | None
    lease_expires_at: Annotated[Time, msgspec.Meta(
        description="present only while the task holds a lease: when it runs out")] | UnsetType = UNSET


class Tasks(Model):
    """Tasks, by status rank, sortKey, then creation."""
    tasks: list[Task]


class TaskEvent(Model):
    """An entry of a task's history: the fields before and after the change."""
    id: str
    task_id: str
    actor_user_id: str
    kind: Literal["created", "status_changed", "assigned", "updated"]
    before_state: dict[str, Any] | None
    after_state: dict[str, Any] | None
    created_at: Time


class TaskEvents(Model):
    """A task's history, newest first."""
    events: list[TaskEvent]


class TaskPageLink(Model):
    """A notebook page linked to a task."""
    task_id: str
    notebook_page_id: str
    created_at: Time
    page_title: str
    page_created_by: str
    page_updated_at: Time


class TaskPageLinks(Model):
    """The linked pages the caller may see."""
    pages: list[TaskPageLink]
