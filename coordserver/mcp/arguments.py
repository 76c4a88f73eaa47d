"""Tool arguments for the routes that do not declare their request models yet (`@accepts`, schemas/):
one msgspec Struct per tool, from which its inputSchema is generated and with which its arguments are
converted. A tool whose route declares its models takes its schema from them instead (tools.py), and only
its path parameters are typed here (PATH). When every route declares its models, only PATH remains.

Field names are the wire names of the REST route (path parameters, query parameters and body fields
alike). These models only shape and type the arguments: every rule (lengths, known identities,
visibility, transitions) stays with the route. UNSET fields are left out of the request, so a PATCH
clears a field only when it is passed as null.
"""
from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

Status = Literal["queued", "ready", "in_progress", "holding", "review", "complete", "closed"]
Limit = Annotated[int, Meta(ge=1, description="At most this many (default 50, capped at 100)")]
MessageId = Annotated[int, Meta(ge=1, description="A mailbox message id")]
ChannelId = Annotated[str, Meta(description="A chat channel id (uuid)")]
TaskId = Annotated[str, Meta(description="A task id (uuid)")]
PageId = Annotated[str, Meta(description="A notebook page id (uuid)")]
Nullable = str | None | UnsetType


class Args(Struct, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """Unknown argument names are refused (a typo would otherwise be silently ignored)."""


# The type of each path parameter, for routes that declare their models.
PATH = {"id": MessageId, "recipient": Annotated[str, Meta(description="The identity to write to")],
        "channelId": ChannelId, "taskId": TaskId, "pageId": PageId}


class MessageRef(Args):
    id: MessageId


class ChatChannels(Args):
    archived: Annotated[bool, Meta(description="List your archived channels instead")] = False


class ChatRead(Args):
    channelId: ChannelId
    limit: Limit | UnsetType = UNSET
    before: Annotated[int, Meta(ge=1, description="Only messages older than this message id")] | UnsetType = UNSET


class ChatSend(Args):
    channelId: ChannelId
    body: str


class ChannelRef(Args):
    channelId: ChannelId


class ListTasks(Args):
    statuses: list[Status] | UnsetType = UNSET
    assignee: Annotated[str, Meta(description='An identity, or "me"')] | UnsetType = UNSET
    projectId: str | UnsetType = UNSET
    includeCompleted: bool = False


class MoveTask(Args):
    taskId: TaskId
    status: Status
    reason: Annotated[str, Meta(description="Required for holding; recorded in the task's history")] \
        | UnsetType = UNSET
    assigneeUserId: Annotated[str, Meta(description="Reassign in the same move (e.g. to a reviewer)")] \
        | UnsetType = UNSET


class TaskRef(Args):
    taskId: TaskId


class ListProjects(Args):
    includeArchived: bool = False


class NotebookSearch(Args):
    q: Annotated[str, Meta(description="Case-insensitive match in title or content")] | UnsetType = UNSET
    limit: Limit | UnsetType = UNSET
    offset: Annotated[int, Meta(ge=0)] | UnsetType = UNSET


class PageRef(Args):
    pageId: PageId


class NotebookEdit(Args):
    pageId: PageId
    title: str | UnsetType = UNSET
    content: Annotated[str, Meta(description="The whole new text; merged into the live document as a diff")] \
        | UnsetType = UNSET
    tags: list[str] | None | UnsetType = UNSET
    taggedUsers: list[str] | None | UnsetType = UNSET
    locked: bool | UnsetType = UNSET
    expiresAt: Nullable = UNSET
    reviewAt: Nullable = UNSET


class Directory(Args):
    q: Annotated[str, Meta(description="Case-insensitive match in title or description")] | UnsetType = UNSET
    limit: Limit | UnsetType = UNSET
    offset: Annotated[int, Meta(ge=0)] | UnsetType = UNSET


class BuzzEvents(Args):
    appName: str | UnsetType = UNSET
    limit: Limit | UnsetType = UNSET


class NoArgs(Args):
    pass
