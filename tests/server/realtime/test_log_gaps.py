"""An event id that commits late on PostgreSQL is still delivered, in order, to live streams and to the
webhook push outbox: readers wait while the transaction holding it runs, however long past the grace."""
from __future__ import annotations

import asyncio
import json

import psycopg2

from coordserver.models import PushDelivery
from coordserver.realtime.logreader import GapTracker
from tests.helpers import client
from tests.sse_helpers import open_stream, wait_for




def hold_event(database_url: str, identity: str):
    """Logs a `message` event for `identity` in a transaction left open; returns (connection, event id)."""
    connection = psycopg2.connect(database_url.replace("postgresql+psycopg2://", "postgresql://"))
    cursor = connection.cursor()
    data = {"type": "message", "recipient": identity, "sender": "slow", "messageId": 0, "title": "late",
            "urgent": False}
    cursor.execute("INSERT INTO event (type, data, to_all, created_at) VALUES ('message', %s, false, now()) "
                   "RETURNING id", (json.dumps(data),))
    event_id = cursor.fetchone()[0]
    cursor.execute("INSERT INTO event_target (identity, event) VALUES (%s, %s)", (identity, event_id))
    return connection, event_id


async def test_a_late_commit_is_delivered_in_order_to_streams_and_push(make_server, pg_cluster):
    database_url = pg_cluster.create_database()
    srv = make_server(database_url=database_url, env={
        "WEBHOOK_CAROL_URL": "http://127.0.0.1:9/hook", "WEBHOOK_CAROL_TOKEN": "t",
        "SERVICE_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"})
    async with open_stream(srv, "carol") as carol:
        connection, held = await asyncio.to_thread(hold_event, database_url, "carol")
        try:
            sent = client(srv, "alice").post("/api/mailboxes/carol/messages", json={"title": "on time"})
            assert sent.status_code == 200, sent.text
            await asyncio.sleep(2.5)  # well past the 1 s grace: the old reader skipped the held id here
            await asyncio.to_thread(connection.commit)
        finally:
            connection.close()
        first, second = await carol.logged(timeout=10), await carol.logged(timeout=10)
        assert (first.id, first.data["title"]) == (held, "late")
        assert second.id == held + 1 and second.data["title"] == "on time"

    def pushed_ids() -> set[int]:
        return {row.event_id for row in PushDelivery.select().where(PushDelivery.identity == "carol")}

    def both_pushed() -> bool:
        return srv.call(lambda: srv.coord.store.read(pushed_ids)) == {held, held + 1}
    await wait_for(both_pushed, timeout=10)


def test_tracker_waits_out_a_gap_by_the_rules():
    now = [0.0]
    tracker = GapTracker(grace=1.0, give_up=60.0, clock=lambda: now[0])
    assert tracker.usable(10, [11, 12, 14, 15]) == 2 and tracker.waiting()  # 13 is missing
    now[0] = 0.5
    assert tracker.usable(12, [14, 15]) == 0  # within the grace
    now[0] = 5.0
    assert tracker.usable(12, [14, 15], settled=False) == 0  # its transaction may still commit it
    assert tracker.usable(12, [13, 14, 15], settled=False) == 3 and not tracker.waiting()  # it did
    assert tracker.usable(15, [17]) == 0
    now[0] = 6.5
    assert tracker.usable(15, [17], settled=True) == 1  # rolled back: nothing can fill it
    assert tracker.usable(17, [19]) == 0
    now[0] = 100.0
    assert tracker.usable(17, [19], settled=False) == 1  # a transaction that never ends is given up on
