"""Chat request and response models (API.md §5). Channel list and search rows are snake_case, as v1 sends them."""
from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ..domain.chat import BODY_MAX, MEMBERS_MAX, NAME_MAX
from .base import Query, Model, RowId, text
from .common import IDENTITY_RULE, SEARCH_MAX, Identity, Limit, Time, clamp_limit

_GROUP = "name and members required for group chat"


class ChannelsQuery(Query):
    """GET /api/chat/channels."""
    archived: bool = False


class CreateChannel(Model):
    """POST /api/chat/channels: `{"type":"dm","identity":...}` or `{"type":"group","name":...,"members":[...]}`."""
    __messages__ = {"type": 'type must be "dm" or "group"', "identity": "identity required for DM",
                    "name": _GROUP, "members": _GROUP, "name:length": f"name is longer than {NAME_MAX} characters",
                    "identity:format": IDENTITY_RULE}
    # Which fields each type needs: stated here for the schema, enforced by __post_init__.
    __schema_extra__ = {"oneOf": [
        {"properties": {"type": {"const": "dm"}, "identity": {"type": "string"}}, "required": ["type", "identity"]},
        {"properties": {"type": {"const": "group"}, "name": {"type": "string"}, "members": {"type": "array"}},
         "required": ["type", "name", "members"]}]}
    type: Literal["dm", "group"]
    identity: Identity | None = None
    name: Annotated[str, text(NAME_MAX)] | None = None
    members: Annotated[list[Identity], msgspec.Meta(min_length=1, max_length=MEMBERS_MAX)] | None = None

    def __post_init__(self) -> None:
        if self.type == "dm" and self.identity is None:
            raise ValueError(self.__messages__["identity"])
        if self.type == "group":
            if self.name is None or self.members is None:
                raise ValueError(_GROUP)
            self.name = self.name.strip()


class ChatPost(Model):
    """POST /api/chat/channels/{id}/messages. The body is trimmed; longer than the limit is refused."""
    __messages__ = {"body": "body required"}
    body: Annotated[str, text(BODY_MAX)]

    def __post_init__(self) -> None:
        self.body = self.body.strip()


class ChatMessagesQuery(Query):
    """GET /api/chat/channels/{id}/messages: older than `before` (a chat message id)."""
    __messages__ = {"before": "Invalid before"}
    before: RowId | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class ChatSearchQuery(Query):
    """GET /api/chat/search. `before`/`after` are ISO-8601 times."""
    q: Annotated[str, text(SEARCH_MAX)]
    channel_id: str | None = None
    sender: str | None = None
    before: Time | None = None
    after: Time | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.sender = (self.sender or "").strip().lower() or None
        self.limit = clamp_limit(self.limit)


ChannelType = Literal["dm", "group"]


class ChatMessage(Model):
    """A chat message."""
    id: int
    channel_id: str
    sender: str
    body: str
    created_at: Time
    edited_at: Time | None
    deleted_at: Time | None
    is_agent: bool = False  # the sender's kind: an agent, or a human (who is who, issue 28)


class PostedChatMessage(ChatMessage):
    """The message just posted, and how many members it woke (pulsed): an agent member of a group channel is
    woken at most once per COORD_CHAT_WAKE_COOLDOWN_MINUTES, members a loop guard holds are not, nor the
    sender."""
    woke: int = 0


class ChatMessages(Model):
    """A channel's messages, oldest first."""
    messages: list[ChatMessage]


class ChannelOpened(Model):
    """The channel a DM reuses or a group creates."""
    channel_id: str
    type: ChannelType


class Member(Model):
    identity: str


class LastMessage(Model, rename=None):
    """A channel's latest message, in the channel row (snake_case)."""
    id: int
    sender: str
    body: str
    created_at: Time


class ChannelRow(Model, rename=None):
    """One of the caller's channels, in v1's snake_case (API.md §5)."""
    id: str
    type: ChannelType
    name: str | None
    created_by: str
    created_at: Time
    last_read_at: Time | None
    archived_at: Time | None
    members: list[Member]
    last_message: LastMessage | None
    unread_count: int


class Channels(Model):
    """The caller's channels: latest message first, empty channels last."""
    channels: list[ChannelRow]


class ChatSearchRow(Model, rename=None):
    """A chat search hit, in v1's snake_case (API.md §5)."""
    id: int
    channel_id: str
    sender: str
    body: str
    created_at: Time
    channel_type: ChannelType
    channel_name: str | None


class ChatSearchResults(Model):
    """Chat search hits, newest first."""
    messages: list[ChatSearchRow]
