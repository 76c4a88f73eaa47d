"""Mailbox request and response models (API.md §4)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.messages import BATCH_ACK_MAX, BODY_MAX, DEDUPE_MAX, THREAD_MAX, TITLE_MAX
from .base import NOT_BLANK, Int32, Model, PositiveInt32, Query, RowId, cut, snake_case, text
from .common import SEARCH_MAX, Limit, Time, clamp_limit


class SendMessage(Model):
    """POST /api/mailboxes/{recipient}/messages. Title and body longer than their limits are cut, not refused."""
    __messages__ = {"threadId": "threadId must be a string"}
    title: Annotated[str, msgspec.Meta(pattern=NOT_BLANK, description=f"longer than {TITLE_MAX} characters is cut")]
    body: Annotated[str, msgspec.Meta(description=f"longer than {BODY_MAX} characters is cut")] | None = None
    urgent: bool | None = None
    thread_id: Annotated[str, msgspec.Meta(max_length=THREAD_MAX)] | Int32 | None = None  # an integer is kept as its text
    reply_to_message_id: PositiveInt32 | None = None
    dedupe_key: Annotated[str, msgspec.Meta(max_length=DEDUPE_MAX)] | None = None
    metadata: Any = None

    def __post_init__(self) -> None:
        self.title = cut(self.title, TITLE_MAX)
        self.body = cut(self.body, BODY_MAX) or ""
        self.urgent = bool(self.urgent)
        if isinstance(self.thread_id, int):
            self.thread_id = str(self.thread_id)
        self.thread_id = self.thread_id or None
        self.dedupe_key = self.dedupe_key or None


class Reply(Model):
    """POST /api/mailboxes/me/messages/{id}/reply."""
    body: Annotated[str, msgspec.Meta(pattern=NOT_BLANK, description=f"longer than {BODY_MAX} characters is cut")]

    def __post_init__(self) -> None:
        self.body = cut(self.body, BODY_MAX)


class AckMany(Model):
    """POST /api/mailboxes/me/messages/ack."""
    __messages__ = {"ids": "ids must be an array of message ids"}
    ids: Annotated[list[RowId], msgspec.Meta(max_length=BATCH_ACK_MAX)]


class InboxQuery(Query):
    """GET /api/mailboxes/me/messages."""
    __messages__ = {"status": "status must be unread or read", "cursor:format": "Invalid cursor"}
    status: Literal["unread", "read"] | None = None
    limit: Limit = 50
    cursor: Annotated[str, msgspec.Meta(pattern="^(?:[A-Za-z0-9_-]+={0,2})?$",  # empty: absent
                                        description="opaque: a nextCursor the server gave")] | None = None

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class SentQuery(Query):
    """GET /api/mailboxes/me/sent."""
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class SearchQuery(Query):
    """GET /api/mailboxes/me/messages/search."""
    q: Annotated[str, text(SEARCH_MAX)]
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class Message(Model, omit_defaults=False):
    """The wire Message."""
    id: int
    recipient: str
    sender: str
    title: str
    body: str
    status: Literal["unread", "read"]
    urgent: bool
    created_at: Time
    viewed_at: Time | None
    thread_id: str | None
    reply_to_message_id: int | None
    dedupe_key: str | None
    metadata: Any
    response_waiting: bool
    waiting_responder: str | None
    waiting_since: Time | None
    from_is_agent: bool  # the sender's kind: an agent, or a human (who is who, issue 28)


if TYPE_CHECKING:  # a type the checker can read: a SearchRow has the Message's fields (only its wire names differ)
    SearchRow = Message
else:
    SearchRow = snake_case(Message, "SearchRow", "A mailbox search hit: the Message in snake_case, as v1 returns it.")


class MessagePage(Model, omit_defaults=False):
    """The inbox: one page of messages, the count of all matches and, when more exist, the next cursor."""
    messages: list[Message]
    total: int
    next_cursor: str | UnsetType = UNSET


class Messages(Model):
    """Sent messages, newest first."""
    messages: list[Message]


class SearchResults(Model):
    """Search hits, newest first."""
    messages: list[SearchRow]


class AckResult(Model):
    """A batch ack: the ids marked read and the ids of no message of the caller's."""
    success: list[int]
    not_found: list[int]
