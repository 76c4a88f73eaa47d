"""The one place a change decides whom it wakes (the bus `wake` channel: pulses to streams, MCP wake
listeners) when something enters an identity's wake.

Rule (issue 28): an identity's own actions never wake it. A change made by `actor` for `identity`
== `actor` (mail to itself, chat in its own channel, a task it assigns itself, an ask it puts to
itself, a buzz event it ingests, an alert change it makes) announces `wake_changed` instead: its wake
cache entry is dropped so a later GET /api/wake shows the item, but no pulse is sent. Pushes follow
the same rule in realtime/webhook_delivery.py (the event's actor is never in its push audience).

Every domain module calls `enters_wake` instead of publishing on `wake` itself; the loop guard
(domain/guards.py) hooks in here to coalesce the pulses of a suspected agent loop.
"""
from __future__ import annotations

from .. import db
from ..events.channels import WAKE, WAKE_CHANGED, WakeChangedPayload, WakePayload
from . import guards


def enters_wake(identity: str | None, actor: str | None, *, may_be_held: bool = True,
                guard_view: guards.GuardView | None = None) -> bool:
    """Something `actor` did (None: the server, an outside system) entered `identity`'s wake. Returns
    whether a pulse was announced (False for the actor itself). `may_be_held=False` skips reading the loop
    guards, for a caller that knows none holds `identity` (a human's message has just cleared them);
    `guard_view`: the guards as read for the caller's batch (guards.GuardView)."""
    if not identity:
        return False
    if actor is not None and identity == actor:
        changed: WakeChangedPayload = {"identity": identity}
        db.after_commit(WAKE_CHANGED, changed)
        return False
    if actor is not None and may_be_held and guards.holds_pulse(identity, actor, guard_view):  # a suspected loop: its one pulse is used
        held: WakeChangedPayload = {"identity": identity}
        db.after_commit(WAKE_CHANGED, held)
        return False
    pulse: WakePayload = {"identity": identity}
    db.after_commit(WAKE, pulse)
    return True
