"""User and user-admin response models (API.md §3, §18)."""
from __future__ import annotations

from typing import Literal

from .base import Model
from .common import Time
from .presence import Seen


class User(Model):
    """A user; environment-only identities are minimal rows (the times null)."""
    id: str
    display_name: str
    is_admin: bool
    is_agent: bool
    avatar_url: str | None
    created_at: Time | None
    updated_at: Time | None
    last_seen_at: Time | None
    archived_at: Time | None


class AdminUser(User, omit_defaults=False):
    """A user as admins see it: with its own loop-guard thresholds, null where it uses the deployment's
    (COORD_LOOP_MESSAGES, COORD_LOOP_MINUTES); skill page `guards`."""
    loop_messages: int | None
    loop_minutes: int | None


class Users(Model):
    """Users."""
    users: list[User]


class AdminUsers(Model):
    """Users, as admins see them."""
    users: list[AdminUser]


class UserAnswer(Model):
    """One user, as changed."""
    user: AdminUser


class Profile(Model):
    """The caller's display name, as set."""
    identity: str
    display_name: str


class InboxCounts(Model):
    unread: int
    pending: int
    read: int
    total: int


class UserStats(Model):
    """One identity's inbox counts, assigned tasks by status, presence and how it is reached."""
    inbox: InboxCounts
    swarm: dict[str, int]
    presence: Seen
    connection: Literal["sse", "webhook", "api", "none"]


class AllUserStats(Model):
    """Stats per identity."""
    users: dict[str, UserStats]
