"""Loop guard response models (skill page `guards`): the admin's list and a cleared guard. The rules are
domain/guards.py's."""
from __future__ import annotations

from typing import Literal

from .base import Model
from .common import Time

GuardKind = Literal["mail_loop", "chat_loop"]


class LoopGuard(Model, omit_defaults=False):
    """One loop guard. Active while `clearedAt` is null and `until` has not passed; `clearedBy` is the human
    who wrote to a member or the admin who cleared it (null with `clearedAt` set: its cooldown ran out).
    `channelId` only for a chat loop; `messages` were counted within `minutes` when it tripped."""
    id: int
    kind: GuardKind
    members: list[str]
    channel_id: str | None
    messages: int
    minutes: int
    tripped_at: Time
    until: Time
    cleared_at: Time | None
    cleared_by: str | None
    summary: str


class LoopGuards(Model):
    """GET /api/admin/guards: `active`, oldest first; `cleared`: those cleared in the last 24 hours (at most
    100), most recently cleared first."""
    active: list[LoopGuard]
    cleared: list[LoopGuard]
