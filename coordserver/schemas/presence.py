"""Presence response models (API.md §10)."""
from __future__ import annotations

from typing import Literal

from .base import Model
from .common import Time


class Seen(Model):
    """Whether an identity is online (seen in the last 5 minutes), when and how it was last seen."""
    online: bool
    last_seen: Time | None
    source: Literal["api", "sse"] | None


class PresenceEntry(Seen):
    """An identity's presence with its unread mail and active tasks."""
    unread: int
    tasks: int
    is_agent: bool = False  # who is who: an agent, or a human (issue 28)


Presence = dict[str, PresenceEntry]  # keyed by identity
