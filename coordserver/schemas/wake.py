"""Wake query and response models (API.md §9, §18 chat in wake)."""
from __future__ import annotations

from typing import Literal, Union

import msgspec
from msgspec import UNSET, UnsetType

from .alerts import Runbook
from .base import Model, Query
from .common import Time
from .swarm import Status


class WakeQuery(Query):
    """GET /api/wake and /api/wake/{identity}."""
    include_off_hours: bool = False


class WakeItem(Model, tag_field="source"):
    """A waiting item; `source` says which kind (the fields beside the common ones depend on it).
    `summary` and `action` are prose: show them, never parse them."""
    summary: str
    action: str
    priority: Literal["low", "normal", "high"]
    ephemeral: bool
    age: str


class MessageItem(WakeItem, tag="message"):
    """An unread message; `from`: its sender (whose words the summary quotes)."""
    id: int
    from_: str = msgspec.field(name="from")
    project_id: None


class PendingItem(WakeItem, tag="message_pending"):
    """A message awaiting the caller's reply; `from`: its sender."""
    id: int
    from_: str = msgspec.field(name="from")
    project_id: None


class SwarmItem(WakeItem, tag="swarm"):
    """A task assigned to the caller in a wakeable status; `leaseExpiresAt` while it holds a lease (the item is
    `high` with a renew action in the lease's last stretch)."""
    id: str
    status: Status
    project_id: str | None
    lease_expires_at: Time | UnsetType = UNSET


class LeaseExpiredItem(WakeItem, tag="lease_expired"):
    """A task whose lease ran out while the caller held it, or that the caller created: back in ready and
    unassigned. It leaves when the task is claimed, moved or assigned again."""
    id: str
    former_holder: str
    project_id: str | None


class ReservationExpiredItem(WakeItem, tag="reservation_expired"):
    """A reservation of the caller's that ran out. It leaves when released or the resource is reserved again."""
    id: int
    project_id: str | None


class ReservationExpiringItem(WakeItem, tag="reservation_expiring"):
    """A reservation of the caller's in its last stretch (the lead time of a task lease's warning: its last 20 %,
    at most 5 minutes). It leaves when renewed, released, or when it runs out (then `reservation_expired`)."""
    id: int
    expires_at: Time
    project_id: str | None


class BuzzItem(WakeItem, tag="buzz"):
    """A buzz event for the caller as its wake or notify agent."""
    id: int
    role: Literal["wake", "notify"]
    app_name: str
    alert_id: int | None = None  # one line per alert for a client that shows alerts


class AlertItem(WakeItem, tag="alert"):
    """An open alert for which the caller is the wake agent (one per alert, whatever its count). It leaves
    when someone acks, snoozes or resolves it."""
    id: int
    app_name: str
    title: str
    count: int
    state: Literal["open"]
    first_at: Time
    runbook: Runbook | None
    escalated: bool  # it escalated to the caller (unacknowledged too long), not watched by them


class BackupItem(WakeItem, tag="backup"):
    """An agent the caller backs up, silent with work waiting."""
    id: str
    target_agent: str
    stale_since: Time


class ChatItem(WakeItem, tag="chat"):
    """A channel holding messages from others newer than the caller's read marker."""
    id: str
    channel_id: str
    channel_type: Literal["dm", "group"]
    channel_name: str | None


class AskItem(WakeItem, tag="ask"):
    """An open ask put to the caller (alone or in a group): answer with one of `options` (numbered from 1)
    or, with `allowText`, in text. It leaves when anyone asked answers, or the ask is cancelled or expires."""
    id: int
    from_: str = msgspec.field(name="from")
    question: str
    options: list[str]
    allow_text: bool
    deadline: Time | None


class AskResultItem(WakeItem, tag="ask_result"):
    """The outcome of an ask the caller made: answered (by `answeredBy`, with `option` or `text`) or expired
    (`option`: the default applied, or null). It leaves when the asker reads the ask (GET /api/asks/{id})."""
    id: int
    status: Literal["answered", "expired"]
    answered_by: str | None
    option: str | None
    text: str | None


class GuardItem(WakeItem, tag="guard"):
    """A suspected loop among agents (issue 28): for each member, and for every human admin. While it holds, wake
    pulses and pushes among `members` are coalesced to one each; it leaves when it clears (at `until`, or when a
    human writes to a member)."""
    id: str
    guard_id: int
    kind: Literal["mail_loop", "chat_loop"]
    members: list[str]
    until: Time
    project_id: None


class WakeAction(Model, rename=None):
    """What to do with one kind of item, and the skill page that explains it."""
    item: str
    action: str
    skill_url: str


class OffHours(Model):
    """A project whose work hours hide some of the identity's tasks now (hours 0-23, start inclusive,
    end exclusive, in `workHoursTimezone`)."""
    project_id: str
    project_title: str
    tasks: int
    work_hours_start: int
    work_hours_end: int
    work_hours_timezone: str


class WakePayload(Model):
    """What is waiting for an identity, most urgent first."""
    instructions: str
    skill_url: str = msgspec.field(name="skill_url")  # snake_case on the wire, as in v1
    items: list[Union[MessageItem, PendingItem, SwarmItem, BuzzItem, AlertItem, BackupItem, ChatItem, AskItem,
                      AskResultItem, GuardItem, LeaseExpiredItem, ReservationExpiredItem,
                      ReservationExpiringItem]]
    actions: list[WakeAction]
    summary: str | None
    timestamp: Time
    off_hours: list[OffHours] = msgspec.field(default_factory=list)  # empty with includeOffHours=true
