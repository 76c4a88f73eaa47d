"""The running unit of work's state, per thread: its clock (`now`), the effects it publishes after its
commit (`after_commit`), the events it logged (`note_event`), and which unit functions the writer may
merge (`merges`). db.Store sets and reads this state around every unit; units reach these
as `db.now` and so on, as before.
"""
from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Callable, NamedTuple, TypeVar

from .events.channels import Channel
from .timeutil import Clock, utcnow

P = TypeVar("P")
F = TypeVar("F", bound=Callable[..., Any])


class Merge(NamedTuple):
    """What `merges` marks a unit function with, as its `merge` attribute."""

    many: Callable[[list[tuple[Any, ...]]], list[Callable[[], Any]]]
    when: Callable[..., bool]
    on_sqlite: bool  # merged on SQLite too (else on PostgreSQL only, where each statement is a round trip)
    # PostgreSQL: the merged statement holds rows FOR SHARE, so it runs in a transaction of its own (db.Store's
    # _transactions says why).
    shares_locks: bool = False

_unit = threading.local()


def now() -> datetime:
    """'Now' for the running unit of work: the store's clock, so tests can inject time."""
    clock: Clock | None = getattr(_unit, "clock", None)
    return clock.now() if clock else utcnow()


def guard_rule() -> Any:
    """The running unit's loop-guard rule (domain/guards.LoopRule, from the store's settings), or None."""
    return getattr(_unit, "guard_rule", None)


def after_commit(channel: Channel[P], payload: P) -> None:
    """Publish `payload` on the bus once (and only if) the current unit succeeds: a write unit's
    transaction commits, a read unit returns. Its caller hears back only after the publish."""
    effects = getattr(_unit, "effects", None)
    if effects is None:
        raise RuntimeError("after_commit called outside a Store unit")
    effects.append((channel, payload))


def note_event(event_id: int, event_type: str) -> None:
    current = getattr(_unit, "max_event", None)
    if getattr(_unit, "effects", None) is None or getattr(_unit, "read_only", False):
        raise RuntimeError("events must be appended inside a Store.write unit")
    _unit.max_event = event_id if current is None else max(current, event_id)
    _unit.event_types.append(event_type)


def merges(many: Callable[[list[tuple[Any, ...]]], list[Callable[[], Any]]],
           when: Callable[..., bool], on_sqlite: bool = False, shares_locks: bool = False) -> Callable[[F], F]:
    """Marks a unit function whose queued calls the writer may run as one (on SQLite only if `on_sqlite`,
    as no statement there is a round trip): `many(calls)` (each
    call is its positional arguments) does the database work of all of them, typically one statement
    for the lot instead of a round trip each, and returns per call a function that finishes it without
    SQL: logs its events (note_event), queues its effects and returns its result or raises its refusal.
    Only calls for which `when(*args)` holds are merged. If `many` fails (or raises Unmerged), each call
    runs on its own."""
    def mark(fn: F) -> F:
        merge = Merge(many, when, on_sqlite, shares_locks)
        setattr(fn, "merge", merge)  # read back by merge_of
        return fn
    return mark


class Unmerged(Exception):
    """Raised by a `merges` function that met a call it does not merge (a state change it leaves to the
    unit itself): the writer then runs each call on its own, as if they had never been queued together."""


def merge_of(fn: Callable[..., Any]) -> Merge | None:
    """What `merges` marked `fn` with, if it did."""
    merge: Merge | None = getattr(fn, "merge", None)
    return merge
