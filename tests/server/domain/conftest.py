"""Domain rules through the store, no HTTP: a Store on each backend with a frozen clock, and the identities
the rules know (passed as the environment identities a server would have)."""
from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable

import pytest

from coordserver.db import Store
from coordserver.domain import project_access
from coordserver.events import log as event_log
from coordserver.models import Project
from coordserver.principal import Principal
from coordserver.timeutil import FrozenClock, to_db

KNOWN = frozenset({"alice", "bob", "carol", "admin"})
START = datetime(2026, 3, 7, 12, 0, tzinfo=timezone.utc)


def who(identity: str) -> Principal:
    return Principal(identity, is_admin=identity == "admin")


@pytest.fixture
def rules_store(database_url):
    store = Store(database_url, FrozenClock(START))
    store.open()
    yield store
    store.close()


@pytest.fixture
def store(rules_store):
    """The rules store, keeping what it announces on the bus once committed (`published`)."""
    rules_store.published = []
    rules_store.on_commit = lambda _max_event, effects: rules_store.published.extend(effects)
    return rules_store


@pytest.fixture
def two_stores(pg_cluster):
    """Two stores (two server processes' worth) on one PostgreSQL database, the same frozen start."""
    url = pg_cluster.create_database()
    stores = [Store(url, FrozenClock(START)) for _ in range(2)]
    for each in stores:
        each.open()
    yield stores
    for each in stores:
        each.close()


def published(store, channel) -> list[dict]:
    """What the store announced on a bus channel (committed units only)."""
    return [payload for ch, payload in store.published if ch is channel]


def logged_after(after: int = 0) -> list[tuple]:
    """The event log past `after`: (type, data, audience sorted, or None for everyone)."""
    return [(kind, data, None if to_all else sorted(audience or []))
            for _id, kind, data, to_all, audience in event_log.range_after(after)]


def last_event_id() -> int:
    rows = event_log.range_after(0, None, 100_000)
    return rows[-1][0] if rows else 0


async def while_held(first_store: Store, first_unit: Callable[[], Any], second: Callable[[], Awaitable[Any]]) -> Any:
    """Run `first_unit` on one store, holding its transaction open a moment after its work, and `second()` (on the
    other store) once the first has done its work; the first unit's answer."""
    held = threading.Event()

    def unit() -> Any:
        result = first_unit()
        held.set()
        time.sleep(0.5)
        return result
    first = asyncio.ensure_future(first_store.write(unit))
    assert await asyncio.to_thread(held.wait, 10)
    await second()
    return await first


def restricted_project(tagged: list[str]) -> str:
    """A project only `tagged` (and its creator "cre", leads "pl" and "dl", and admins) may see; its id."""
    now = to_db(START)
    project = Project.create(title="Secret", color="#000000", project_lead_user_id="pl", developer_lead_user_id="dl",
                             created_by="cre", tagged_users=tagged, created_at=now, updated_at=now)
    project_access.store_tags(project.id, tagged)
    return project.id


def move_row_last(model: Any, row_id: Any, text_column: str) -> None:
    """Changes nothing a caller sees, but on PostgreSQL the row and its index entries move behind the others (an
    indexed text column changed and changed back: no in-place update), so rows that tie in an order come back in
    id order only where the query asks for it, not because of where they happen to lie."""
    column = getattr(model, text_column)
    value = getattr(model.get_by_id(row_id), text_column)
    for changed in (value + "~", value):
        model.update({column: changed}).where(model._meta.primary_key == row_id).execute()
