"""Chat request and response models (API.md §5). Channel list and search rows are snake_case, as v1 sends them."""
from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ..domain.chat import BODY_MAX, MEMBERS_MAX, NAME_MAX
from .base import Query, Model, RowId, required_text
from .common import Limit, Time, clamp_limit

_GROUP = "name and members required for group chat"


class ChannelsQuery(Query):
    """GET /api/chat/channels."""
    archived: bool = False


class CreateChannel(Model):
    """POST /api/chat/channels: `{"type":"dm","identity":...}` or `{"type":"group","name":...,"members":[...]}`."""
    __messages__ = {"type": 'type must be "dm" or "group"', "identity": "identity required for DM",
                    "name": _GROUP, "members": _GROUP}
    type: str | None = None
    identity: str | None = None
    name: str | None = None
    members: list[str] | None = None

    def __post_init__(self) -> None:
        if self.type == "dm":
            required_text(self, "identity", "identity")
        elif self.type == "group":
            if self.name is None or not self.name.strip() or not self.members:
                raise ValueError(_GROUP)
            self.name = self.name.strip()
            if len(self.name) > NAME_MAX:
                raise ValueError(f"name is longer than {NAME_MAX} characters")
            if len(self.members) > MEMBERS_MAX:
                raise ValueError(f"members may hold at most {MEMBERS_MAX} identities")
        else:
            raise ValueError(self.__messages__["type"])


class ChatPost(Model):
    """POST /api/chat/channels/{id}/messages. The body is trimmed; longer than the limit is refused."""
    __messages__ = {"body": "body required"}
    body: Annotated[str, msgspec.Meta(description=f"not blank, at most {BODY_MAX} characters")]

    def __post_init__(self) -> None:
        required_text(self, "body", "body")
        self.body = self.body.strip()
        if len(self.body) > BODY_MAX:
            raise ValueError(f"body is longer than {BODY_MAX} characters")


class ChatMessagesQuery(Query):
    """GET /api/chat/channels/{id}/messages: older than `before` (a chat message id)."""
    __messages__ = {"before": "Invalid before"}
    before: RowId | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class ChatSearchQuery(Query):
    """GET /api/chat/search. `before`/`after` are ISO-8601 times."""
    q: Annotated[str, msgspec.Meta(max_length=500)] | None = None
    channel_id: str | None = None
    sender: str | None = None
    before: str | None = None
    after: str | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        required_text(self, "q", "q")
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
