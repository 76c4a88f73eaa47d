"""The push feeder on PostgreSQL: while another process holds the feed cursor (it is feeding now), a feed
returns at once instead of stalling its process's one writer; once the lock is gone it moves on."""
from __future__ import annotations

import asyncio

import psycopg2

from coordserver.domain import messages
from coordserver.models import WorkerCursor
from coordserver.realtime import webhook_delivery as push
from coordserver.realtime.logreader import GapTracker
from tests.server.domain.conftest import KNOWN


def cursor_at() -> int:
    return WorkerCursor.get(WorkerCursor.name == push.CURSOR_NAME).last_event_id


async def test_a_feed_skips_while_another_process_feeds(pg_cluster):
    from coordserver.db import Store
    from coordserver.timeutil import FrozenClock
    from tests.server.domain.conftest import START

    url = pg_cluster.create_database()
    store = Store(url, FrozenClock(START))
    store.open()
    try:
        await store.write(push.ensure_cursor)
        sent = await store.write(messages.send, "alice", "bob", {"title": "hi"}, KNOWN)
        other = psycopg2.connect(url)  # another process, mid-feed: it holds the cursor row
        with other.cursor() as cursor:
            cursor.execute("SELECT last_event_id FROM worker_cursor WHERE name = %s FOR UPDATE", (push.CURSOR_NAME,))
        skipped = await asyncio.wait_for(store.write(push.feed, {}, GapTracker(), False), 5)
        assert skipped == push.Fed(0, False, None)  # nothing read, no webhook looked up
        assert await store.read(cursor_at) == 0
        other.rollback()
        other.close()
        assert await store.write(push.feed, {}, GapTracker(), False) == push.Fed(0, False, hooked=False)
        assert await store.read(cursor_at) >= 1 and sent["id"] >= 1
    finally:
        store.close()
