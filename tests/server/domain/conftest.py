"""Domain rules through the store, no HTTP: a Store on each backend with a frozen clock, and the identities
the rules know (passed as the environment identities a server would have)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from coordserver.db import Store
from coordserver.principal import Principal
from coordserver.timeutil import FrozenClock

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
